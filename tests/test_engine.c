/*
 * test_engine.c — the generation engine on the tiny fixture with token-id prompts: prefix reuse
 * through snapshots (same outputs as recomputing, and the cached-token counter proves only the
 * new suffix was prefilled), namespaces, session files (round trip, corruption, foreign model),
 * cancellation, context overflow.
 */
#include "testutil.h"

#include "runtime/engine.h"

typedef struct {
    int32_t ids[256];
    int n;
    int cancel_after;
} collect;

static int on_ev(void *ud, const ll_gen_event *ev) {
    collect *c = ud;
    if (ev->kind == LL_GEN_TOKEN) c->ids[c->n++] = ev->token;
    return c->cancel_after > 0 && c->n >= c->cancel_after;
}

static ll_engine *open_tiny(const char *dir) {
    ll_engine_params p = {.model_path = dir, .backend = "cpu", .n_ctx = 256, .n_threads = 2};
    ll_engine *e;
    if (ll_engine_open(&p, &e) != LL_OK) fail_msg("%s", ll_errmsg());
    return e;
}

static int32_t prompt[200];

static ll_gen_request greedy(int32_t n_prompt, int32_t max_tokens, const char *ns) {
    ll_gen_request r = {0};
    r.ns = ns;
    r.prompt_ids = prompt;
    r.n_prompt_ids = n_prompt;
    r.sampling = ll_sampler_defaults();
    r.sampling.temperature = 0;
    r.max_tokens = max_tokens;
    r.emit_token_ids = 1;
    return r;
}

static void setup_prompt(void) {
    uint32_t x = 99;
    for (int i = 0; i < 200; i++) { x = x * 1664525u + 1013904223u; prompt[i] = (int32_t)((x >> 8) % 500); }
}

static void test_prefix_reuse(void **st) {
    (void)st;
    setup_prompt();
    const char *dir = tu_shared_path("fixtures/tiny");
    ll_engine *e = open_tiny(dir), *fresh = open_tiny(dir);
    collect a = {0}, b = {0}, ref = {0};
    ll_gen_result ra, rb, rr;
    ll_gen_request q = greedy(100, 12, "k1");
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &a, &ra), LL_OK);
    assert_int_equal(ra.cached_tokens, 0);
    assert_int_equal(ra.completion_tokens, 12);
    /* a longer prompt in the same namespace resumes from the first prompt's state */
    q = greedy(130, 12, "k1");
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &b, &rb), LL_OK);
    assert_int_equal(rb.cached_tokens, 99);
    assert_int_equal(ll_engine_generate(fresh, &q, on_ev, &ref, &rr), LL_OK);
    assert_int_equal(rr.cached_tokens, 0);
    assert_int_equal(b.n, ref.n);
    assert_memory_equal(b.ids, ref.ids, sizeof(int32_t) * (size_t)b.n);
    /* another namespace never sees k1's snapshots */
    collect c = {0};
    q = greedy(130, 4, "k2");
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &c, &rb), LL_OK);
    assert_int_equal(rb.cached_tokens, 0);
    ll_engine_stats s;
    ll_engine_get_stats(e, &s);
    assert_int_equal(s.requests, 3);
    assert_int_equal(s.snapshot_hits, 1);
    ll_engine_close(e);
    ll_engine_close(fresh);
}

static void test_session_file(void **st) {
    (void)st;
    setup_prompt();
    const char *dir = tu_shared_path("fixtures/tiny");
    char path[128];
    snprintf(path, sizeof(path), "%s/session.snap", tu_tmpdir());
    ll_engine *e = open_tiny(dir);
    collect a = {0};
    ll_gen_result r;
    assert_int_equal(ll_engine_session_save(e, NULL, path), LL_ERR_INVALID); /* nothing yet */
    ll_gen_request q = greedy(80, 4, NULL);
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &a, &r), LL_OK);
    assert_int_equal(ll_engine_session_save(e, NULL, path), LL_OK);
    ll_engine_close(e);

    /* a new process: load the session, extend the prompt, only the suffix is prefilled */
    e = open_tiny(dir);
    assert_int_equal(ll_engine_session_load(e, NULL, path), LL_OK);
    collect b = {0}, ref = {0};
    q = greedy(120, 8, NULL);
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &b, &r), LL_OK);
    assert_int_equal(r.cached_tokens, 79);
    ll_engine *fresh = open_tiny(dir);
    assert_int_equal(ll_engine_generate(fresh, &q, on_ev, &ref, &r), LL_OK);
    assert_memory_equal(b.ids, ref.ids, sizeof(int32_t) * 8);
    ll_engine_close(fresh);

    /* corruption anywhere is detected */
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, size / 2, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
    assert_int_not_equal(ll_engine_session_load(e, NULL, path), LL_OK);
    assert_true(strlen(ll_errmsg()) > 0);
    ll_engine_close(e);
}

static void test_foreign_session(void **st) {
    (void)st;
    setup_prompt();
    char path[128];
    snprintf(path, sizeof(path), "%s/s.snap", tu_tmpdir());
    ll_engine *e = open_tiny(tu_shared_path("fixtures/tiny"));
    collect a = {0};
    ll_gen_result r;
    ll_gen_request q = greedy(50, 2, NULL);
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &a, &r), LL_OK);
    assert_int_equal(ll_engine_session_save(e, NULL, path), LL_OK);
    ll_engine_close(e);
    ll_engine_params p = {.model_path = "tests/fixtures/gqa4", .backend = "cpu", .n_ctx = 256, .n_threads = 2};
    assert_int_equal(ll_engine_open(&p, &e), LL_OK);
    assert_int_not_equal(ll_engine_session_load(e, NULL, path), LL_OK);
    print_message("foreign session: %s\n", ll_errmsg());
    assert_non_null(strstr(ll_errmsg(), "model"));
    ll_engine_close(e);
}

static void test_cancel_and_overflow(void **st) {
    (void)st;
    setup_prompt();
    ll_engine *e = open_tiny(tu_shared_path("fixtures/tiny"));
    collect c = {.cancel_after = 3};
    ll_gen_result r;
    ll_gen_request q = greedy(20, 50, NULL);
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &c, &r), LL_ERR_CANCELLED);
    assert_int_equal(r.finish, LL_FINISH_CANCELLED);
    assert_int_equal(r.completion_tokens, 3);
    q = greedy(200, 100, NULL); /* 200 + 100 > 256 */
    collect d = {0};
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &d, &r), LL_ERR_OVERFLOW);
    assert_non_null(strstr(ll_errmsg(), "context is 256 tokens"));
    /* the engine still works afterwards */
    q = greedy(20, 5, NULL);
    assert_int_equal(ll_engine_generate(e, &q, on_ev, &d, &r), LL_OK);
    assert_int_equal(d.n, 5);
    /* text prompts need a tokenizer, and this fixture has none */
    ll_gen_request t = {0};
    t.prompt = "hello";
    t.sampling = ll_sampler_defaults();
    assert_int_equal(ll_engine_generate(e, &t, on_ev, &d, &r), LL_ERR_INVALID);
    ll_engine_close(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_reuse),
        cmocka_unit_test(test_session_file),
        cmocka_unit_test(test_foreign_session),
        cmocka_unit_test(test_cancel_and_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
