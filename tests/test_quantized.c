/*
 * test_quantized.c — quality of the quantized formats on a whole model: the `small` fixture
 * (every matrix dimension a multiple of 256) re-quantized in memory to each weight type, run on
 * the CPU backend over the 300-token golden prompt, against the unquantized (BF16-valued, fp32
 * computed) logits. Reports top-1 agreement and mean KL(p_ref || p_quant) per position.
 *
 * Thresholds (documented in docs/quality.md) leave about 2x margin over what was measured when
 * the test was written; a broken block format or dot product fails them by orders of magnitude.
 */
#include "testutil.h"
#include "tu_logits.h"

#include <math.h>

#include "backend/backend.h"

typedef struct {
    const char *fixture;
    ll_type type;
    double min_top1, max_kl;
} qcase;

static const qcase cases[] = {
    /* tiny is F32: BF16/F16 are real conversions there (its 128-wide rows rule out K-quants) */
    {"tiny", LL_TYPE_BF16, 0.95, 0.02},  {"tiny", LL_TYPE_F16, 0.99, 1e-3},  {"tiny", LL_TYPE_Q8_0, 0.75, 0.20},
    /* small is BF16 with 256-multiple dimensions: every block format applies */
    {"small", LL_TYPE_Q8_0, 0.93, 0.015}, {"small", LL_TYPE_MLX8, 0.93, 0.015}, {"small", LL_TYPE_Q6_K, 0.80, 0.08},
    {"small", LL_TYPE_Q5_K, 0.68, 0.20},  {"small", LL_TYPE_Q4_K, 0.52, 0.55},  {"small", LL_TYPE_Q4_0, 0.45, 0.75},
    {"small", LL_TYPE_MLX4, 0.45, 0.75},
};

static void test_quantized_quality(void **st) {
    (void)st;
    double kl_of[LL_TYPE_COUNT_] = {0};
    qwen_model *m = NULL;
    float *ref = NULL;
    const char *loaded = "";
    const int32_t T = 300;
    int32_t tok[300];
    for (size_t c = 0; c < LL_ARRAY_LEN(cases); c++) {
        if (strcmp(loaded, cases[c].fixture)) { /* load the fixture and its unquantized logits */
            qwen_model_free(m);
            free(ref);
            char rel[64];
            snprintf(rel, sizeof(rel), "fixtures/%s", cases[c].fixture);
            if (qwen_model_load(tu_shared_path(rel), &m) != LL_OK) fail_msg("%s", ll_errmsg());
            loaded = cases[c].fixture;
            uint32_t x = 12345; /* a fixed pseudo-random prompt */
            for (int32_t i = 0; i < T; i++) { x = x * 1664525u + 1013904223u; tok[i] = (int32_t)((x >> 8) % (uint32_t)(m->hp.n_vocab - 16)); }
            ref = tu_run_logits(m, tok, T);
        }
        const int32_t V = m->hp.n_vocab;
        qwen_model *mq;
        if (qwen_model_requantize(m, cases[c].type, &mq) != LL_OK) fail_msg("%s", ll_errmsg());
        float *lg = tu_run_logits(mq, tok, T);
        double top1, mkl;
        tu_compare_logits(ref, lg, T, V, &top1, &mkl);
        if (!strcmp(loaded, "small")) kl_of[cases[c].type] = mkl;
        print_message("%-5s %-5s %5.2f MiB weights  top-1 agreement %.4f  mean KL %.5f\n", loaded,
                      quant_type_name(cases[c].type), (double)mq->weight_bytes / (1 << 20), top1, mkl);
        free(lg);
        qwen_model_free(mq);
        if (getenv("QMEASURE")) continue;
        if (!(top1 >= cases[c].min_top1 && mkl <= cases[c].max_kl))
            fail_msg("%s %s: top-1 %.4f (min %.2f), KL %.5f (max %.3g)", loaded, quant_type_name(cases[c].type), top1,
                     cases[c].min_top1, mkl, cases[c].max_kl);
    }
    /* more bits must mean less divergence */
    assert_true(kl_of[LL_TYPE_Q8_0] < kl_of[LL_TYPE_Q6_K]);
    assert_true(kl_of[LL_TYPE_Q6_K] < kl_of[LL_TYPE_Q5_K]);
    assert_true(kl_of[LL_TYPE_Q5_K] < kl_of[LL_TYPE_Q4_K]);
    assert_true(kl_of[LL_TYPE_Q4_K] < kl_of[LL_TYPE_Q4_0]);
    free(ref);
    qwen_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_quantized_quality)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
