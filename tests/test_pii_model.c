/*
 * test_pii_model.c — the PII encoder against the pii-tiny golden outputs (transformers
 * Qwen3Model(is_causal=False) + linear heads, float32): hidden states, token logits and the
 * sensitivity logit to 1e-3, Viterbi tags exactly; Viterbi constraints on random logits; bad input.
 */
#include <math.h>

#include "testutil.h"
#include "privacy/pii_model.h"

static pii_model g_model;
static st_file g_gold;
static int g_loaded;

static void load_all(void) {
    if (g_loaded) return;
    const char *dir = tu_shared_path("fixtures/pii-tiny");
    ll_status st = pii_model_load(&g_model, dir, NULL, 2);
    if (st) fail_msg("load: %s", ll_errmsg());
    st = st_open(&g_gold, tu_shared_path("fixtures/pii-tiny/golden.safetensors"));
    if (st) fail_msg("golden: %s", ll_errmsg());
    g_loaded = 1;
}

static const ll_tensor *gold(const char *c, const char *what) {
    char name[64];
    snprintf(name, sizeof(name), "%s.%s", c, what);
    const ll_tensor *t = st_find(&g_gold, name);
    assert_non_null(t);
    return t;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static void check_case(const char *c) {
    load_all();
    const ll_tensor *tok = gold(c, "tokens");
    int T = (int)tok->shape[0];
    const int H = g_model.hidden;
    float *hidden = malloc(sizeof(float) * (size_t)T * H);
    float *logits = malloc(sizeof(float) * (size_t)T * PII_N_LABELS);
    int32_t *tags = malloc(sizeof(int32_t) * (size_t)T);
    float sens = 0;
    assert_int_equal(pii_model_forward(&g_model, tok->data, T, hidden, logits, &sens), LL_OK);
    double dh = max_abs_diff(hidden, gold(c, "hidden")->data, (size_t)T * H);
    double dl = max_abs_diff(logits, gold(c, "token_logits")->data, (size_t)T * PII_N_LABELS);
    double ds = fabs(sens - ((const float *)gold(c, "sensitivity_logit")->data)[0]);
    print_message("%s: T=%d max|dhidden|=%.2e max|dlogits|=%.2e |dsens|=%.2e\n", c, T, dh, dl, ds);
    assert_true(dh <= 1e-3);
    assert_true(dl <= 1e-3);
    assert_true(ds <= 1e-3);
    /* Viterbi on the golden logits must give the golden tags exactly; and on ours too */
    const int32_t *want = gold(c, "viterbi_tags")->data;
    assert_int_equal(pii_viterbi(gold(c, "token_logits")->data, T, g_model.b_bias, g_model.e_bias, tags), LL_OK);
    int nspan = 0;
    for (int t = 0; t < T; t++) {
        assert_int_equal(tags[t], want[t]);
        nspan += tags[t] != 0;
    }
    assert_int_equal(pii_viterbi(logits, T, g_model.b_bias, g_model.e_bias, tags), LL_OK);
    for (int t = 0; t < T; t++) assert_int_equal(tags[t], want[t]);
    print_message("%s: %d non-O tags\n", c, nspan);
    free(hidden);
    free(logits);
    free(tags);
}

static void test_golden_case0(void **s) { (void)s; check_case("case0"); }
static void test_golden_case1(void **s) { (void)s; check_case("case1"); }

static void test_config_values(void **s) {
    (void)s;
    load_all();
    assert_int_equal(g_model.vocab, 512);
    assert_int_equal(g_model.n_layers, 2);
    assert_int_equal(g_model.n_kv, 2);
    assert_true(fabsf(g_model.b_bias - 0.25f) < 1e-6f);
    assert_true(fabsf(g_model.e_bias + 0.5f) < 1e-6f);
}

/* Every decoded path obeys the BIOES grammar, whatever the logits. */
static void test_viterbi_constraints(void **s) {
    (void)s;
    enum { T = 300 };
    static float lg[T * PII_N_LABELS];
    int32_t tags[T];
    uint32_t r = 12345;
    for (int rep = 0; rep < 20; rep++) {
        for (int i = 0; i < T * PII_N_LABELS; i++) {
            r = r * 1664525u + 1013904223u;
            lg[i] = (float)((r >> 8) % 2000) / 100.0f - 10.0f;
        }
        assert_int_equal(pii_viterbi(lg, T, rep * 0.3f - 3.0f, 1.5f - rep * 0.2f, tags), LL_OK);
        int open = -1; /* category of an open B/I, or -1 */
        for (int t = 0; t < T; t++) {
            int k = pii_tag_kind(tags[t]), c = pii_tag_cat(tags[t]);
            if (open < 0) assert_true(tags[t] == 0 || k == PII_TAG_B || k == PII_TAG_S);
            else assert_true((k == PII_TAG_I || k == PII_TAG_E) && c == open);
            open = (k == PII_TAG_B || k == PII_TAG_I) ? c : -1;
        }
        assert_int_equal(open, -1);
    }
    /* a strong b_bias turns a lone confident S into B..E when the next token likes E */
    float two[2 * PII_N_LABELS];
    for (int i = 0; i < 2 * PII_N_LABELS; i++) two[i] = 0;
    two[4] = 5;                      /* S-person at 0 */
    two[PII_N_LABELS + 0] = 5;       /* O at 1 */
    two[PII_N_LABELS + 3] = 4.9f;    /* E-person at 1 */
    assert_int_equal(pii_viterbi(two, 2, 0, 0, tags), LL_OK);
    assert_int_equal(tags[0], 4);
    assert_int_equal(tags[1], 0);
    assert_int_equal(pii_viterbi(two, 2, 10.0f, 0, tags), LL_OK);
    assert_int_equal(tags[0], 1);
    assert_int_equal(tags[1], 3);
}

static void test_bad_input(void **s) {
    (void)s;
    load_all();
    int32_t bad[3] = {1, 512, 3};
    float lg[3 * PII_N_LABELS];
    assert_int_equal(pii_model_forward(&g_model, bad, 3, NULL, lg, NULL), LL_ERR_INVALID);
    assert_non_null(strstr(ll_errmsg(), "position 1"));
    assert_int_equal(pii_model_forward(&g_model, bad, 0, NULL, lg, NULL), LL_ERR_INVALID);
    pii_model m2;
    assert_int_not_equal(pii_model_load(&m2, "/nonexistent-dir", NULL, 1), LL_OK);
    /* a directory without the weights */
    const char *d = tu_tmpdir();
    char p[256];
    snprintf(p, sizeof(p), "%s/config.json", d);
    const char *cfg = "{\"model_type\":\"pii_masking\",\"backbone\":{\"vocab_size\":4}}";
    tu_write_file(p, cfg, strlen(cfg));
    assert_int_equal(pii_model_load(&m2, d, NULL, 1), LL_ERR_FORMAT);
    assert_non_null(strstr(ll_errmsg(), "hidden_size"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_case0),
        cmocka_unit_test(test_golden_case1),
        cmocka_unit_test(test_config_values),
        cmocka_unit_test(test_viterbi_constraints),
        cmocka_unit_test(test_bad_input),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (g_loaded) {
        pii_model_free(&g_model);
        st_close(&g_gold);
    }
    return rc;
}
