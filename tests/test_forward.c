/*
 * test_forward.c — the CPU forward pass against the HF transformers golden fixtures
 * (shared/fixtures/{tiny,small}: logits of one prefill, per-layer residuals, the final norm,
 * prefill-then-decode logits and a greedy continuation), plus internal consistency checks:
 * chunked vs recurrent Gated DeltaNet, prompts split across chunk boundaries, snapshots.
 */
#include "testutil.h"

#include <math.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "format/safetensors.h"

#define LOGIT_TOL 1e-3f

typedef struct {
    const st_file *golden;
    int n_checked;
    float worst;
    char worst_name[32];
} tap_ctx;

static const ll_tensor *golden_get(const st_file *g, const char *name) {
    const ll_tensor *t = st_find(g, name);
    if (!t) fail_msg("golden tensor %s missing", name);
    return t;
}

static float max_abs_diff(const float *a, const float *b, size_t n) {
    float m = 0;
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as a failure */
    }
    return m;
}

/* Compares every tapped activation with the golden tensor of the same name. The residual
 * stream grows with depth, so the tolerance is relative to the tensor's own scale. */
static void on_tap(void *ud, const char *name, const float *data, int32_t T, int32_t dim) {
    tap_ctx *c = ud;
    const ll_tensor *g = st_find(c->golden, name);
    if (!g) return;
    assert_int_equal(g->shape[0], T);
    assert_int_equal(g->shape[1], dim);
    const float *ref = g->data;
    float scale = 0;
    for (int64_t i = 0; i < (int64_t)T * dim; i++) scale = fmaxf(scale, fabsf(ref[i]));
    float d = max_abs_diff(data, ref, (size_t)T * dim) / fmaxf(scale, 1.0f);
    if (!(d <= 1e-4f)) fail_msg("%s: max relative difference %g", name, d);
    if (d > c->worst) { c->worst = d; snprintf(c->worst_name, sizeof(c->worst_name), "%s", name); }
    c->n_checked++;
}

typedef struct {
    qwen_model *m;
    st_file golden;
    int32_t *tok;
    int32_t T;
} fixture;

/* `name`: a shared fixture ("tiny", "small") or one of the project's own generated ones
 * ("gqa4", "wide" in tests/fixtures, see tests/gen/README.md). */
static void fixture_open(fixture *f, const char *name) {
    char p[512], local[512];
    snprintf(local, sizeof(local), "tests/fixtures/%s", name);
    const char *dir = local;
    if (!tu_is_dir(local)) {
        snprintf(p, sizeof(p), "fixtures/%s", name);
        dir = tu_shared_path(p);
    }
    if (qwen_model_load(dir, &f->m) != LL_OK) fail_msg("load %s: %s", dir, ll_errmsg());
    char gp[1100];
    snprintf(gp, sizeof(gp), "%s/golden.safetensors", dir);
    if (st_open(&f->golden, gp) != LL_OK) fail_msg("%s", ll_errmsg());
    const ll_tensor *t = golden_get(&f->golden, "tokens");
    f->T = (int32_t)t->shape[0];
    f->tok = (int32_t *)t->data;
}

static void fixture_close(fixture *f) {
    st_close(&f->golden);
    qwen_model_free(f->m);
}

static ll_backend *cpu_new(const qwen_model *m, int32_t max_batch, ll_tap_fn tapfn, void *ud) {
    ll_backend_params bp = {.n_threads = 2, .max_batch = max_batch, .tap = tapfn, .tap_ud = ud};
    ll_backend *be = NULL;
    if (cpu_backend_new(m, &bp, &be) != LL_OK) fail_msg("%s", ll_errmsg());
    return be;
}

/* One prefill over the whole prompt: logits and every tapped activation match. */
static void check_prefill(const char *name, int32_t max_batch) {
    fixture f;
    fixture_open(&f, name);
    tap_ctx tc = {.golden = &f.golden};
    /* taps see one chunk at a time; compare activations only for single-chunk prefills */
    ll_backend *be = cpu_new(f.m, max_batch, max_batch >= f.T ? on_tap : NULL, &tc);
    ll_seq *s;
    assert_int_equal(be->v->seq_new(be, f.T + 32, &s), LL_OK);
    const int64_t V = f.m->hp.n_vocab;
    float *logits = malloc(sizeof(float) * (size_t)f.T * (size_t)V);
    assert_int_equal(be->v->forward(be, s, f.tok, f.T, LL_LOGITS_ALL, logits), LL_OK);
    const ll_tensor *g = golden_get(&f.golden, "logits");
    float d = max_abs_diff(logits, g->data, (size_t)f.T * (size_t)V);
    print_message("%s prefill (batch %d): max |dlogit| = %.3g, %d activations checked (worst %s %.3g)\n", name,
                  max_batch, d, tc.n_checked, tc.worst_name, tc.worst);
    assert_true(d <= LOGIT_TOL);
    if (max_batch >= f.T) assert_int_equal(tc.n_checked, f.m->hp.n_layer + 3); /* embed, layers, norm.in/out */
    free(logits);
    be->v->seq_free(be, s);
    ll_backend_free(be);
    fixture_close(&f);
}

/* Prefill P tokens, then one token at a time: matches decode.logits; then greedy decoding after
 * the whole prompt reproduces greedy.tokens. */
static void check_decode_and_greedy(const char *name) {
    fixture f;
    fixture_open(&f, name);
    ll_backend *be = cpu_new(f.m, 0, NULL, NULL);
    ll_seq *s;
    assert_int_equal(be->v->seq_new(be, f.T + 64, &s), LL_OK);
    const int64_t V = f.m->hp.n_vocab;
    const int32_t P = *(const int32_t *)golden_get(&f.golden, "decode.prefix_len")->data;
    const ll_tensor *gd = golden_get(&f.golden, "decode.logits");
    float *lg = malloc(sizeof(float) * (size_t)V);
    /* row j of decode.logits = logits after position P-1+j: row 0 from the prefill itself */
    assert_int_equal(be->v->forward(be, s, f.tok, P, LL_LOGITS_LAST, lg), LL_OK);
    float worst = max_abs_diff(lg, gd->data, (size_t)V);
    for (int64_t j = 1; j < gd->shape[0]; j++) {
        assert_int_equal(be->v->forward(be, s, f.tok + P - 1 + j, 1, LL_LOGITS_LAST, lg), LL_OK);
        worst = fmaxf(worst, max_abs_diff(lg, (const float *)gd->data + j * V, (size_t)V));
    }
    print_message("%s decode: max |dlogit| = %.3g over %lld steps\n", name, worst, (long long)gd->shape[0]);
    assert_true(worst <= LOGIT_TOL);
    /* feed the rest of the prompt so lg holds the logits after all of it */
    for (int64_t i = P - 1 + gd->shape[0]; i < f.T; i++)
        assert_int_equal(be->v->forward(be, s, f.tok + i, 1, LL_LOGITS_LAST, lg), LL_OK);
    /* greedy: lg holds the logits after the whole prompt */
    const ll_tensor *gg = golden_get(&f.golden, "greedy.tokens");
    const int32_t *want = gg->data;
    for (int64_t i = 0; i < gg->shape[0]; i++) {
        int32_t best = 0;
        for (int64_t v = 1; v < V; v++) if (lg[v] > lg[best]) best = (int32_t)v;
        if (best != want[i]) fail_msg("%s greedy token %lld: got %d, want %d", name, (long long)i, best, want[i]);
        assert_int_equal(be->v->forward(be, s, &best, 1, LL_LOGITS_LAST, lg), LL_OK);
    }
    free(lg);
    be->v->seq_free(be, s);
    ll_backend_free(be);
    fixture_close(&f);
}

static void test_tiny_prefill(void **st) { (void)st; check_prefill("tiny", 512); }
static void test_small_prefill(void **st) { (void)st; check_prefill("small", 512); }
/* 37-token chunks: engine chunks and GDN 64-token chunks fall at different places */
static void test_tiny_prefill_chunked(void **st) { (void)st; check_prefill("tiny", 37); }
static void test_small_prefill_chunked(void **st) { (void)st; check_prefill("small", 100); }
static void test_tiny_decode(void **st) { (void)st; check_decode_and_greedy("tiny"); }
static void test_gqa4_prefill(void **st) { (void)st; check_prefill("gqa4", 512); }
static void test_gqa4_decode(void **st) { (void)st; check_decode_and_greedy("gqa4"); }
static void test_wide_prefill(void **st) { (void)st; check_prefill("wide", 70); }
static void test_wide_decode(void **st) { (void)st; check_decode_and_greedy("wide"); }
static void test_small_decode(void **st) { (void)st; check_decode_and_greedy("small"); }

/* Snapshot after a prefix, continue; restore into a fresh sequence, continue: identical. */
static void test_snapshot_roundtrip(void **st) {
    (void)st;
    fixture f;
    fixture_open(&f, "tiny");
    ll_backend *be = cpu_new(f.m, 0, NULL, NULL);
    ll_seq *a, *b;
    assert_int_equal(be->v->seq_new(be, 256, &a), LL_OK);
    assert_int_equal(be->v->seq_new(be, 256, &b), LL_OK);
    const int64_t V = f.m->hp.n_vocab;
    assert_int_equal(be->v->forward(be, a, f.tok, 70, LL_LOGITS_NONE, NULL), LL_OK);
    size_t n = be->v->seq_state_bytes(be, a);
    void *snap = malloc(n);
    assert_int_equal(be->v->seq_save(be, a, snap, n), LL_OK);
    assert_int_equal(be->v->seq_save(be, a, snap, n - 1), LL_ERR_INVALID);
    float *la = malloc(sizeof(float) * (size_t)V * 10), *lb = malloc(sizeof(float) * (size_t)V * 10);
    assert_int_equal(be->v->forward(be, a, f.tok + 70, 10, LL_LOGITS_ALL, la), LL_OK);
    assert_int_equal(be->v->forward(be, b, f.tok, 5, LL_LOGITS_NONE, NULL), LL_OK); /* dirty state */
    assert_int_equal(be->v->seq_load(be, b, snap, n - 4), LL_ERR_FORMAT);
    assert_int_equal(be->v->seq_load(be, b, snap, n), LL_OK);
    assert_int_equal(be->v->seq_pos(be, b), 70);
    assert_int_equal(be->v->forward(be, b, f.tok + 70, 10, LL_LOGITS_ALL, lb), LL_OK);
    assert_memory_equal(la, lb, sizeof(float) * (size_t)V * 10);
    free(snap); free(la); free(lb);
    be->v->seq_free(be, a);
    be->v->seq_free(be, b);
    ll_backend_free(be);
    fixture_close(&f);
}

/* Bad input to forward: out-of-vocabulary ids and context overflow are errors, state intact. */
static void test_forward_errors(void **st) {
    (void)st;
    fixture f;
    fixture_open(&f, "tiny");
    ll_backend *be = cpu_new(f.m, 0, NULL, NULL);
    ll_seq *s;
    assert_int_equal(be->v->seq_new(be, 8, &s), LL_OK);
    int32_t bad[2] = {1, f.m->hp.n_vocab};
    assert_int_equal(be->v->forward(be, s, bad, 2, LL_LOGITS_NONE, NULL), LL_ERR_INVALID);
    assert_non_null(strstr(ll_errmsg(), "outside the vocabulary"));
    assert_int_equal(be->v->seq_pos(be, s), 0);
    assert_int_equal(be->v->forward(be, s, f.tok, 9, LL_LOGITS_NONE, NULL), LL_ERR_OVERFLOW);
    assert_int_equal(be->v->forward(be, s, f.tok, 8, LL_LOGITS_NONE, NULL), LL_OK);
    assert_int_equal(be->v->forward(be, s, f.tok, 1, LL_LOGITS_NONE, NULL), LL_ERR_OVERFLOW);
    be->v->seq_free(be, s);
    ll_backend_free(be);
    fixture_close(&f);
}

/* Chunked (WY, C = 64) and recurrent delta rule agree on random inputs, for lengths around
 * chunk multiples, k != v dims, both head mappings, and a carried-in state. */
static void test_gdn_chunked_vs_recurrent(void **st) {
    (void)st;
    ll_pool *pool = ll_pool_new(2);
    const int32_t lens[] = {1, 5, 63, 64, 65, 130};
    for (int tiled = 0; tiled < 2; tiled++)
        for (size_t li = 0; li < LL_ARRAY_LEN(lens); li++) {
            const int32_t T = lens[li], HK = 2, HV = 4, DK = 16, DV = 24, CD = 2 * HK * DK + HV * DV;
            float *qkv = malloc(sizeof(float) * (size_t)T * CD), *beta = malloc(sizeof(float) * (size_t)T * HV);
            float *g = malloc(sizeof(float) * (size_t)T * HV);
            float *S1 = malloc(sizeof(float) * (size_t)HV * DK * DV), *S2 = malloc(sizeof(float) * (size_t)HV * DK * DV);
            float *o1 = malloc(sizeof(float) * (size_t)T * HV * DV), *o2 = malloc(sizeof(float) * (size_t)T * HV * DV);
            float *scr = malloc(sizeof(float) * 2 * cpu_gdn_scratch_floats(DK, DV));
            srand(7 + (unsigned)T);
            for (int64_t i = 0; i < (int64_t)T * CD; i++) qkv[i] = (float)rand() / RAND_MAX * 2 - 1;
            for (int64_t i = 0; i < (int64_t)T * HV; i++) {
                beta[i] = (float)rand() / RAND_MAX;
                g[i] = -3.0f * (float)rand() / RAND_MAX;
            }
            for (int64_t i = 0; i < (int64_t)HV * DK * DV; i++) S1[i] = S2[i] = ((float)rand() / RAND_MAX - 0.5f) * 0.2f;
            cpu_gdn(pool, o1, qkv, beta, g, S1, T, HK, HV, DK, DV, tiled, 1, scr);
            cpu_gdn(pool, o2, qkv, beta, g, S2, T, HK, HV, DK, DV, tiled, 0, scr);
            float d_o = max_abs_diff(o1, o2, (size_t)T * HV * DV), d_s = max_abs_diff(S1, S2, (size_t)HV * DK * DV);
            if (!(d_o < 1e-4f && d_s < 1e-4f)) fail_msg("T=%d tiled=%d: |do|=%g |dS|=%g", T, tiled, d_o, d_s);
            free(qkv); free(beta); free(g); free(S1); free(S2); free(o1); free(o2); free(scr);
        }
    ll_pool_free(pool);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gdn_chunked_vs_recurrent),
        cmocka_unit_test(test_tiny_prefill),
        cmocka_unit_test(test_small_prefill),
        cmocka_unit_test(test_tiny_prefill_chunked),
        cmocka_unit_test(test_small_prefill_chunked),
        cmocka_unit_test(test_tiny_decode),
        cmocka_unit_test(test_small_decode),
        cmocka_unit_test(test_gqa4_prefill),
        cmocka_unit_test(test_gqa4_decode),
        cmocka_unit_test(test_wide_prefill),
        cmocka_unit_test(test_wide_decode),
        cmocka_unit_test(test_snapshot_roundtrip),
        cmocka_unit_test(test_forward_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
