/* test_stop.c — stop ids, stop strings across token boundaries (held back, never partially
 * emitted, overlapping prefixes, several stops, UTF-8) and max tokens, plus a split-independence
 * check of every split of a few texts against a byte-at-a-time reference. */
#include "testutil.h"

#include "runtime/sampler.h" /* ll_rng for random splits */
#include "runtime/stop.h"

typedef struct {
    char text[1024]; /* everything emitted */
    size_t len;
    ll_stop_reason reason;
    int32_t which;
    int n_fed;
} run_result;

static ll_stop *mk(const char *const *strs, int n_strs, const int32_t *ids, int n_ids, int64_t max_tokens) {
    ll_stop_params p = {ids, n_ids, strs, n_strs, max_tokens};
    ll_stop *s = NULL;
    if (ll_stop_new(&p, &s) != LL_OK) fail_msg("ll_stop_new: %s", ll_errmsg());
    return s;
}

static void append(run_result *r, const ll_stop_out *o) {
    assert_true(r->len + o->len < sizeof(r->text));
    memcpy(r->text + r->len, o->text, o->len);
    r->len += o->len;
    r->text[r->len] = 0;
}

/* Feeds pieces (token id = index + 100) until a stop, then finishes. */
static run_result run(ll_stop *s, const char *const *pieces, int n) {
    run_result r = {.reason = LL_STOP_NONE, .which = -1};
    ll_stop_out o;
    for (int i = 0; i < n; i++) {
        assert_int_equal(ll_stop_feed(s, 100 + i, pieces[i], strlen(pieces[i]), &o), LL_OK);
        append(&r, &o);
        r.n_fed = i + 1;
        if (o.reason != LL_STOP_NONE) {
            r.reason = o.reason;
            r.which = o.which;
            return r;
        }
    }
    ll_stop_finish(s, &o);
    append(&r, &o);
    return r;
}

static void test_split_stop_string(void **state) {
    (void)state;
    const char *stops[] = {"world!"};
    ll_stop *s = mk(stops, 1, NULL, 0, 0);
    ll_stop_out o;
    /* "wor" could start "world!": it must be held back */
    assert_int_equal(ll_stop_feed(s, 1, "Hello wor", 9, &o), LL_OK);
    assert_int_equal(o.len, 6);
    assert_memory_equal(o.text, "Hello ", 6);
    assert_int_equal(ll_stop_feed(s, 2, "ld", 2, &o), LL_OK);
    assert_int_equal(o.len, 0);
    assert_int_equal(ll_stop_feed(s, 3, "?", 1, &o), LL_OK); /* resolved: not a stop */
    assert_int_equal(o.reason, LL_STOP_NONE);
    assert_int_equal(o.len, 6);
    assert_memory_equal(o.text, "world?", 6);
    assert_int_equal(ll_stop_feed(s, 4, " w", 2, &o), LL_OK);
    assert_int_equal(o.len, 1);
    const char *rest[] = {"o", "r", "l", "d", "!", "never"};
    run_result r = run(s, rest, 6);
    assert_int_equal(r.reason, LL_STOP_STRING);
    assert_int_equal(r.which, 0);
    assert_int_equal(r.n_fed, 5);
    assert_string_equal(r.text, ""); /* the whole " world!" tail was held, then dropped */
    assert_int_equal(ll_stop_n_tokens(s), 9);
    ll_stop_free(s);
}

static void test_overlapping_prefix(void **state) {
    (void)state;
    const char *stops[] = {"abab"};
    ll_stop *s = mk(stops, 1, NULL, 0, 0);
    const char *p1[] = {"ab", "ab", "ab"};
    run_result r = run(s, p1, 3);
    assert_int_equal(r.reason, LL_STOP_STRING);
    assert_int_equal(r.n_fed, 2);
    assert_string_equal(r.text, "");
    ll_stop_reset(s);
    const char *p2[] = {"x", "a", "b", "a", "X", "a", "b", "a", "b", "a", "b"};
    r = run(s, p2, 11);
    assert_int_equal(r.reason, LL_STOP_STRING);
    assert_int_equal(r.n_fed, 9);
    assert_string_equal(r.text, "xabaX");
    ll_stop_reset(s);
    const char *p3[] = {"aba", "bab"}; /* match starts inside the first piece */
    r = run(s, p3, 2);
    assert_int_equal(r.reason, LL_STOP_STRING);
    assert_string_equal(r.text, "");
    ll_stop_reset(s);
    const char *p4[] = {"aab", "aab", "ab"}; /* "aabaabab": match at 4 */
    r = run(s, p4, 3);
    assert_int_equal(r.reason, LL_STOP_STRING);
    assert_string_equal(r.text, "aaba");
    ll_stop_free(s);
}

static void test_multiple_stops(void **state) {
    (void)state;
    const char *stops[] = {"\n\n", "END", "cde", "abcdef"};
    ll_stop *s = mk(stops, 4, NULL, 0, 0);
    const char *p1[] = {"foo E", "N", "D\n\nbar"};
    run_result r = run(s, p1, 3);
    assert_int_equal(r.which, 1);
    assert_string_equal(r.text, "foo ");
    ll_stop_reset(s);
    const char *p2[] = {"one\n", "\ntwo END"};
    r = run(s, p2, 2);
    assert_int_equal(r.which, 0);
    assert_string_equal(r.text, "one");
    ll_stop_reset(s);
    /* "cde" completes before "abcdef" could: the first completion wins, however the text is cut */
    const char *p3[] = {"xabcdef"};
    r = run(s, p3, 1);
    assert_int_equal(r.which, 2);
    assert_string_equal(r.text, "xab");
    ll_stop_free(s);
}

static void test_utf8(void **state) {
    (void)state;
    const char *stops[] = {"\xc3\xa9!"}; /* "é!" */
    ll_stop *s = mk(stops, 1, NULL, 0, 0);
    const char *text = "caf\xc3\xa9 ok caf\xc3\xa9!";
    char one[2] = {0, 0};
    ll_stop_out o;
    size_t emitted = 0;
    char out[64];
    ll_stop_reason reason = LL_STOP_NONE;
    for (size_t i = 0; text[i] && reason == LL_STOP_NONE; i++) { /* byte by byte, splitting é */
        one[0] = text[i];
        assert_int_equal(ll_stop_feed(s, 1, one, 1, &o), LL_OK);
        memcpy(out + emitted, o.text, o.len);
        emitted += o.len;
        reason = o.reason;
    }
    out[emitted] = 0;
    assert_int_equal(reason, LL_STOP_STRING);
    assert_string_equal(out, "caf\xc3\xa9 ok caf");
    ll_stop_free(s);

    /* no stop strings at all: emitted chunks still end on character boundaries */
    s = mk(NULL, 0, NULL, 0, 0);
    const char *cjk = "\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80x"; /* 日本😀x */
    emitted = 0;
    for (size_t i = 0; cjk[i]; i++) {
        one[0] = cjk[i];
        assert_int_equal(ll_stop_feed(s, 1, one, 1, &o), LL_OK);
        if (o.len) {
            /* the chunk must end exactly after a complete character */
            size_t end = emitted + o.len;
            assert_true(end == 3 || end == 6 || end == 10 || end == 11);
        }
        memcpy(out + emitted, o.text, o.len);
        emitted += o.len;
    }
    ll_stop_finish(s, &o);
    assert_int_equal(o.len, 0);
    out[emitted] = 0;
    assert_string_equal(out, cjk);
    ll_stop_free(s);
}

static void test_stop_ids_and_length(void **state) {
    (void)state;
    const char *stops[] = {"abc"};
    const int32_t ids[] = {7, 151645};
    ll_stop *s = mk(stops, 1, ids, 2, 0);
    ll_stop_out o;
    assert_int_equal(ll_stop_feed(s, 1, "x", 1, &o), LL_OK);
    assert_int_equal(ll_stop_feed(s, 2, "ab", 2, &o), LL_OK);
    assert_int_equal(o.len, 0); /* held */
    assert_int_equal(ll_stop_feed(s, 151645, "<|im_end|>", 10, &o), LL_OK);
    assert_int_equal(o.reason, LL_STOP_TOKEN);
    assert_int_equal(o.which, 1);
    assert_int_equal(o.len, 2); /* held text released; the stop token's own text is not */
    assert_memory_equal(o.text, "ab", 2);
    ll_stop_free(s);

    s = mk(stops, 1, NULL, 0, 3);
    const char *p[] = {"a", "b", "ab", "c"};
    run_result r = run(s, p, 4);
    assert_int_equal(r.reason, LL_STOP_LENGTH);
    assert_int_equal(r.n_fed, 3);
    assert_string_equal(r.text, "abab"); /* the held "ab" is released at the limit */
    ll_stop_reset(s);
    const char *q[] = {"x", "abc"}; /* a stop string on the last allowed token still wins */
    ll_stop_free(s);
    s = mk(stops, 1, NULL, 0, 2);
    r = run(s, q, 2);
    assert_int_equal(r.reason, LL_STOP_STRING);
    assert_string_equal(r.text, "x");
    ll_stop_free(s);

    /* finish releases held text */
    const char *st2[] = {"xyz"};
    s = mk(st2, 1, NULL, 0, 0);
    const char *p2[] = {"ab", "xy"};
    r = run(s, p2, 2);
    assert_int_equal(r.reason, LL_STOP_NONE);
    assert_string_equal(r.text, "abxy");
    ll_stop_free(s);

    /* an empty stop string is rejected */
    const char *bad[] = {"ok", ""};
    ll_stop_params bp = {NULL, 0, bad, 2, 0};
    ll_stop *bs = NULL;
    assert_int_equal(ll_stop_new(&bp, &bs), LL_ERR_INVALID);
    assert_null(bs);
}

/* Reference: scan the whole text byte by byte; the first end position where a stop completes
 * wins, the longest stop among those ending there. Returns the output length or -1 if none. */
static long ref_stop(const char *t, const char *const *stops, int n, int *which) {
    size_t tl = strlen(t);
    for (size_t e = 1; e <= tl; e++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            size_t L = strlen(stops[i]);
            if (L <= e && (best < 0 || L > strlen(stops[best])) && memcmp(t + e - L, stops[i], L) == 0) best = i;
        }
        if (best >= 0) {
            *which = best;
            return (long)(e - strlen(stops[best]));
        }
    }
    return -1;
}

static void test_random_splits(void **state) {
    (void)state;
    const char *texts[] = {
        "the cat sat on the mat. STOP here",
        "ababababababcab",
        "no stop in this one \xe2\x82\xac\xe2\x82\xac",
        "aaaaaaaaaaaaaaaaab",
        "<|endoftext|> after",
        "x</tool_call>y",
    };
    const char *stops[] = {"STOP", "abc", "aab", "mat.", "<|endoftext|>", "</tool"};
    ll_stop *s = mk(stops, 6, NULL, 0, 0);
    ll_rng rng;
    ll_rng_seed(&rng, 11);
    char pieces_buf[64][64];
    const char *pieces[64];
    for (size_t t = 0; t < LL_ARRAY_LEN(texts); t++) {
        int which = -1;
        long want = ref_stop(texts[t], stops, 6, &which);
        size_t tl = strlen(texts[t]);
        for (int trial = 0; trial < 300; trial++) {
            int n = 0;
            size_t pos = 0;
            while (pos < tl) {
                size_t k = 1 + ll_rng_next(&rng) % 5;
                if (pos + k > tl) k = tl - pos;
                memcpy(pieces_buf[n], texts[t] + pos, k);
                pieces_buf[n][k] = 0;
                pieces[n] = pieces_buf[n];
                n++;
                pos += k;
            }
            ll_stop_reset(s);
            run_result r = run(s, pieces, n);
            if (want < 0) {
                assert_int_equal(r.reason, LL_STOP_NONE);
                assert_string_equal(r.text, texts[t]);
            } else {
                assert_int_equal(r.reason, LL_STOP_STRING);
                assert_int_equal(r.which, which);
                assert_int_equal(r.len, (size_t)want);
                assert_memory_equal(r.text, texts[t], (size_t)want);
            }
        }
    }
    ll_stop_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_stop_string),
        cmocka_unit_test(test_overlapping_prefix),
        cmocka_unit_test(test_multiple_stops),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_stop_ids_and_length),
        cmocka_unit_test(test_random_splits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
