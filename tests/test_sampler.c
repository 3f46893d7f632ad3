/* test_sampler.c — the sampler: exact candidate sets on small vocabularies, penalties, bias,
 * vocabulary masking, greedy ties, seeded reproducibility, sampled frequencies against the
 * softmax, agreement with a sort-based reference on random logits, log-probabilities, and a
 * full-size (248K) vocabulary without per-token allocation. */
#include "testutil.h"

#include <math.h>

#include "runtime/sampler.h"

#define BIG_VOCAB 248320

static ll_sampler *mk(ll_sampler_params p, int32_t n_logits, int32_t n_vocab) {
    ll_sampler *s = NULL;
    ll_status st = ll_sampler_new(&p, n_logits, n_vocab, &s);
    if (st != LL_OK) fail_msg("ll_sampler_new: %s", ll_errmsg());
    return s;
}

/* The distribution as a dense array prob[id] (0 for non-candidates). */
static void dist_dense(ll_sampler *s, const float *logits, int32_t nv, double *prob) {
    int32_t ids[4096];
    float pr[4096];
    int32_t n = 0;
    assert_int_equal(ll_sampler_dist(s, logits, ids, pr, 4096, &n), LL_OK);
    assert_true(n <= 4096);
    for (int32_t i = 0; i < nv; i++) prob[i] = 0.0;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        assert_true(ids[i] >= 0 && ids[i] < nv);
        assert_true(prob[ids[i]] == 0.0); /* no duplicates */
        prob[ids[i]] = pr[i];
        sum += pr[i];
    }
    assert_float_equal(sum, 1.0, 1e-5);
}

static void logits_from_probs(const double *p, int n, float *l) {
    for (int i = 0; i < n; i++) l[i] = (float)log(p[i]);
}

/* ---------------------------------------------------------------- exact sets */

static void test_greedy_ties_and_bias(void **state) {
    (void)state;
    ll_sampler_params p = ll_sampler_defaults();
    p.temperature = 0.0f;
    ll_sampler *s = mk(p, 6, 6);
    const float l[6] = {1.0f, 7.0f, 3.0f, 7.0f, -2.0f, 7.0f};
    int32_t id = -1;
    assert_int_equal(ll_sampler_sample(s, l, &id), LL_OK);
    assert_int_equal(id, 1); /* documented rule: lowest id among equal maxima */
    ll_sampler_free(s);
}

static void test_greedy_bias_exact(void **state) {
    (void)state;
    ll_sampler_params p = ll_sampler_defaults();
    p.temperature = 0.0f;
    ll_logit_bias b[2] = {{1, -INFINITY}, {4, 9.5f}};
    p.logit_bias = b;
    p.n_logit_bias = 2;
    ll_sampler *s = mk(p, 6, 6);
    const float l[6] = {1.0f, 7.0f, 3.0f, 7.0f, -2.0f, 7.0f};
    int32_t id;
    assert_int_equal(ll_sampler_sample(s, l, &id), LL_OK);
    assert_int_equal(id, 4); /* -2 + 9.5 = 7.5 beats 7 */
    ll_sampler_free(s);

    ll_logit_bias all[3] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}};
    p.logit_bias = all;
    p.n_logit_bias = 3;
    s = mk(p, 3, 3);
    assert_int_equal(ll_sampler_sample(s, l, &id), LL_ERR_INVALID); /* nothing left */
    ll_sampler_free(s);
}

static void test_top_k_exact(void **state) {
    (void)state;
    ll_sampler_params p = ll_sampler_defaults();
    p.top_k = 2;
    ll_sampler *s = mk(p, 5, 5);
    const float l[5] = {1.0f, 5.0f, 3.0f, 5.0f, 2.0f};
    double pr[5];
    dist_dense(s, l, 5, pr);
    assert_float_equal(pr[1], 0.5, 1e-6);
    assert_float_equal(pr[3], 0.5, 1e-6);
    assert_true(pr[0] == 0 && pr[2] == 0 && pr[4] == 0);
    ll_sampler_free(s);

    p.top_k = 1; /* tie at the boundary: the lower id is kept */
    s = mk(p, 5, 5);
    dist_dense(s, l, 5, pr);
    assert_float_equal(pr[1], 1.0, 1e-6);
    ll_sampler_free(s);

    p.top_k = 3;
    s = mk(p, 5, 5);
    dist_dense(s, l, 5, pr);
    double z = 2 * exp(5.0) + exp(3.0);
    assert_float_equal(pr[2], exp(3.0) / z, 1e-6);
    assert_float_equal(pr[1], exp(5.0) / z, 1e-6);
    assert_true(pr[0] == 0 && pr[4] == 0);
    ll_sampler_free(s);
}

static void test_top_p_exact(void **state) {
    (void)state;
    /* shuffled ids so that position and rank differ */
    const double probs[6] = {0.05, 0.2, 0.5, 0.1, 0.15, 0.0}; /* ranks: 2, 1, 4, 3, 0 */
    double pp[6];
    memcpy(pp, probs, sizeof(pp));
    pp[5] = 1e-9; /* practically zero but a candidate */
    float l[6];
    logits_from_probs(pp, 6, l);
    struct { float top_p; int keep[6]; } cases[] = {
        {0.45f, {0, 0, 1, 0, 0, 0}},  /* 0.5 reaches 0.45 alone */
        {0.69f, {0, 1, 1, 0, 0, 0}},  /* 0.5 < 0.69 <= 0.7 */
        {0.71f, {0, 1, 1, 0, 1, 0}},  /* 0.7 < 0.71 <= 0.85 */
        {0.86f, {0, 1, 1, 1, 1, 0}},  /* 0.85 < 0.86 <= 0.95 */
        {0.96f, {1, 1, 1, 1, 1, 0}},  /* 0.95 < 0.96 <= 1 - 1e-9 */
        {1.0f, {1, 1, 1, 1, 1, 1}},   /* off */
    };
    for (size_t c = 0; c < LL_ARRAY_LEN(cases); c++) {
        ll_sampler_params p = ll_sampler_defaults();
        p.top_p = cases[c].top_p;
        ll_sampler *s = mk(p, 6, 6);
        double pr[6];
        dist_dense(s, l, 6, pr);
        double kept = 0;
        for (int i = 0; i < 6; i++) kept += cases[c].keep[i] ? pp[i] : 0;
        for (int i = 0; i < 6; i++) {
            if (cases[c].keep[i]) assert_float_equal(pr[i], pp[i] / kept, 1e-5);
            else assert_true(pr[i] == 0.0);
        }
        ll_sampler_free(s);
    }
}

static void test_top_p_after_temperature_and_top_k(void **state) {
    (void)state;
    /* top-p works on the distribution left by temperature and top-k */
    const float l[4] = {2.0f, 1.0f, 0.0f, -1.0f};
    ll_sampler_params p = ll_sampler_defaults();
    p.temperature = 0.5f; /* logits 4, 2, 0, -2 */
    p.top_k = 3;
    p.top_p = 0.95f;
    ll_sampler *s = mk(p, 4, 4);
    double pr[4];
    dist_dense(s, l, 4, pr);
    double e[3] = {exp(4.0), exp(2.0), exp(0.0)}, z = e[0] + e[1] + e[2];
    /* after top-k: 0.8668, 0.1173, 0.0159 — 0.8668 + 0.1173 = 0.9841 >= 0.95 */
    assert_true(e[0] / z < 0.95 && (e[0] + e[1]) / z >= 0.95);
    assert_float_equal(pr[0], e[0] / (e[0] + e[1]), 1e-6);
    assert_float_equal(pr[1], e[1] / (e[0] + e[1]), 1e-6);
    assert_true(pr[2] == 0 && pr[3] == 0);
    ll_sampler_free(s);
}

static void test_min_p_exact(void **state) {
    (void)state;
    const double probs[5] = {0.1, 0.4, 0.2, 0.25, 0.05};
    float l[5];
    logits_from_probs(probs, 5, l);
    struct { float min_p; int keep[5]; } cases[] = {
        {0.49f, {0, 1, 1, 1, 0}}, /* threshold 0.196: keeps 0.4, 0.25, 0.2 */
        {0.51f, {0, 1, 0, 1, 0}}, /* threshold 0.204 */
        {0.2f, {1, 1, 1, 1, 0}},  /* threshold 0.08 */
        {1.0f, {0, 1, 0, 0, 0}},
    };
    for (size_t c = 0; c < LL_ARRAY_LEN(cases); c++) {
        ll_sampler_params p = ll_sampler_defaults();
        p.min_p = cases[c].min_p;
        ll_sampler *s = mk(p, 5, 5);
        double pr[5], kept = 0;
        dist_dense(s, l, 5, pr);
        for (int i = 0; i < 5; i++) kept += cases[c].keep[i] ? probs[i] : 0;
        for (int i = 0; i < 5; i++) {
            if (cases[c].keep[i]) assert_float_equal(pr[i], probs[i] / kept, 1e-5);
            else assert_true(pr[i] == 0.0);
        }
        ll_sampler_free(s);
    }
}

/* Reads back the processed logits (relative to token 0) from the T=1 distribution. */
static void processed_logits(ll_sampler *s, const float *l, int n, double *out) {
    double pr[16];
    dist_dense(s, l, n, pr);
    for (int i = 0; i < n; i++) out[i] = log(pr[i]) - log(pr[0]);
}

static void test_penalties_exact(void **state) {
    (void)state;
    const float l[8] = {0.5f, 2.0f, -1.0f, 1.0f, -0.5f, 3.0f, 0.25f, -2.0f};
    ll_sampler_params p = ll_sampler_defaults();
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    ll_sampler *s = mk(p, 8, 8);
    const int32_t prompt[3] = {1, 2, 1};  /* repetition only */
    assert_int_equal(ll_sampler_set_prompt(s, prompt, 3), LL_OK);
    ll_sampler_accept(s, 3); /* generated: 3 twice, 4 once, 2 once */
    ll_sampler_accept(s, 3);
    ll_sampler_accept(s, 4);
    ll_sampler_accept(s, 2);
    double expect[8];
    for (int i = 0; i < 8; i++) expect[i] = l[i];
    expect[1] = 2.0 / 2;                      /* prompt, positive: divided */
    expect[2] = -1.0 * 2 - (1 * 0.25 + 0.5);  /* prompt+generated, negative: multiplied, then penalised */
    expect[3] = 1.0 / 2 - (2 * 0.25 + 0.5);
    expect[4] = -0.5 * 2 - (1 * 0.25 + 0.5);
    double got[8];
    processed_logits(s, l, 8, got);
    for (int i = 0; i < 8; i++) assert_float_equal(got[i], expect[i] - expect[0], 1e-5);

    /* a new prompt replaces the old one for the repetition penalty; generated counts stay */
    const int32_t prompt2[1] = {7};
    assert_int_equal(ll_sampler_set_prompt(s, prompt2, 1), LL_OK);
    expect[1] = 2.0;
    expect[7] = -2.0 * 2;
    processed_logits(s, l, 8, got);
    for (int i = 0; i < 8; i++) assert_float_equal(got[i], expect[i] - expect[0], 1e-5);

    /* reset forgets everything */
    ll_sampler_reset(s, 1);
    processed_logits(s, l, 8, got);
    for (int i = 0; i < 8; i++) assert_float_equal(got[i], (double)l[i] - l[0], 1e-5);

    int32_t bad = 8;
    assert_int_equal(ll_sampler_set_prompt(s, &bad, 1), LL_ERR_INVALID);
    ll_sampler_free(s);
}

static void test_penalty_changes_greedy(void **state) {
    (void)state;
    ll_sampler_params p = ll_sampler_defaults();
    p.temperature = 0.0f;
    p.frequency_penalty = 1.0f;
    ll_sampler *s = mk(p, 3, 3);
    const float l[3] = {2.5f, 2.0f, 0.0f};
    int32_t seq[6];
    for (int i = 0; i < 6; i++) {
        assert_int_equal(ll_sampler_sample(s, l, &seq[i]), LL_OK);
        ll_sampler_accept(s, seq[i]);
    }
    /* compute the expectation directly rather than by hand */
    int32_t cnt[3] = {0, 0, 0};
    for (int i = 0; i < 6; i++) {
        int32_t best = 0;
        for (int j = 1; j < 3; j++)
            if (l[j] - cnt[j] > l[best] - cnt[best]) best = j;
        assert_int_equal(seq[i], best);
        cnt[best]++;
    }
    assert_int_equal(seq[0], 0);
    assert_int_equal(seq[1], 1);
    ll_sampler_free(s);
}

static void test_vocab_mask(void **state) {
    (void)state;
    /* 8 logits, but the tokenizer has 5 tokens: padded rows are never candidates */
    const float l[8] = {0.0f, 1.0f, 0.5f, -1.0f, 0.2f, 50.0f, 60.0f, NAN};
    ll_sampler_params p = ll_sampler_defaults();
    p.seed = 3;
    ll_sampler *s = mk(p, 8, 5);
    for (int i = 0; i < 2000; i++) {
        int32_t id;
        assert_int_equal(ll_sampler_sample(s, l, &id), LL_OK);
        assert_true(id >= 0 && id < 5);
    }
    ll_logprobs lp;
    assert_int_equal(ll_sampler_logprobs(s, l, 1, 3, &lp), LL_OK);
    assert_int_equal(lp.top[0].id, 1);
    assert_int_equal(ll_sampler_logprobs(s, l, 5, 3, &lp), LL_ERR_INVALID);
    ll_sampler_free(s);
    p.temperature = 0.0f;
    s = mk(p, 8, 5);
    int32_t id;
    assert_int_equal(ll_sampler_sample(s, l, &id), LL_OK);
    assert_int_equal(id, 1);
    ll_sampler_free(s);
}

/* ---------------------------------------------------------------- randomness */

static void test_seed_reproducible(void **state) {
    (void)state;
    float l[50];
    for (int i = 0; i < 50; i++) l[i] = (float)sin(i * 1.7) * 2.0f;
    ll_sampler_params p = ll_sampler_defaults();
    p.temperature = 0.9f;
    p.top_p = 0.9f;
    p.seed = 1234;
    int32_t a[300], b[300], c[300];
    ll_sampler *s = mk(p, 50, 50);
    for (int i = 0; i < 300; i++) assert_int_equal(ll_sampler_sample(s, l, &a[i]), LL_OK);
    ll_sampler_reset(s, 1234); /* reset gives the same stream again */
    for (int i = 0; i < 300; i++) assert_int_equal(ll_sampler_sample(s, l, &b[i]), LL_OK);
    ll_sampler_free(s);
    assert_memory_equal(a, b, sizeof(a));
    p.seed = 1235;
    s = mk(p, 50, 50);
    for (int i = 0; i < 300; i++) assert_int_equal(ll_sampler_sample(s, l, &c[i]), LL_OK);
    ll_sampler_free(s);
    assert_memory_not_equal(a, c, sizeof(a));

    /* the PRNG itself: same seed, same stream; values spread over [0, 1) */
    ll_rng r1, r2;
    ll_rng_seed(&r1, 42);
    ll_rng_seed(&r2, 42);
    double mean = 0;
    for (int i = 0; i < 10000; i++) {
        assert_true(ll_rng_next(&r1) == ll_rng_next(&r2));
        double u = ll_rng_uniform(&r1);
        (void)ll_rng_uniform(&r2);
        assert_true(u >= 0.0 && u < 1.0);
        mean += u / 10000;
    }
    assert_float_equal(mean, 0.5, 0.02);
}

/* Sampled frequencies against the exact distribution: every bin within 5 standard deviations. */
static void check_frequencies(ll_sampler_params p, const float *l, int nv, int n_draws) {
    ll_sampler *s = mk(p, nv, nv);
    double want[64];
    dist_dense(s, l, nv, want);
    int cnt[64] = {0};
    for (int i = 0; i < n_draws; i++) {
        int32_t id;
        assert_int_equal(ll_sampler_sample(s, l, &id), LL_OK);
        cnt[id]++;
    }
    for (int i = 0; i < nv; i++) {
        double f = (double)cnt[i] / n_draws;
        double sd = sqrt(want[i] * (1 - want[i]) / n_draws);
        if (want[i] == 0.0) assert_int_equal(cnt[i], 0);
        else if (fabs(f - want[i]) > 5 * sd + 1e-9)
            fail_msg("token %d: frequency %.5f, probability %.5f (sd %.5f)", i, f, want[i], sd);
    }
    ll_sampler_free(s);
}

static void test_sampled_frequencies(void **state) {
    (void)state;
    const float l[8] = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, 1.5f, -3.0f, 0.7f};
    ll_sampler_params p = ll_sampler_defaults();
    p.seed = 7;
    /* plain softmax: check the dist itself against a direct computation first */
    ll_sampler *s = mk(p, 8, 8);
    double pr[8], z = 0;
    dist_dense(s, l, 8, pr);
    for (int i = 0; i < 8; i++) z += exp(l[i]);
    for (int i = 0; i < 8; i++) assert_float_equal(pr[i], exp(l[i]) / z, 1e-6);
    ll_sampler_free(s);
    check_frequencies(p, l, 8, 200000);
    p.temperature = 0.6f;
    p.top_k = 5;
    check_frequencies(p, l, 8, 100000);
    p.top_k = 0;
    p.top_p = 0.8f;
    check_frequencies(p, l, 8, 100000);
    p.top_p = 1.0f;
    p.min_p = 0.1f;
    p.temperature = 1.3f;
    check_frequencies(p, l, 8, 100000);
}

/* ---------------------------------------------------------------- against a sort-based reference */

typedef struct { double l; int id; } ref_c;
static int ref_cmp(const void *a, const void *b) {
    const ref_c *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return x->id - y->id;
}

/* Straightforward implementation of the documented pipeline (no penalties) with a full sort. */
static void ref_dist(const float *l, int nv, float t, int k, float top_p, float min_p, double *prob) {
    static ref_c c[4096];
    for (int i = 0; i < nv; i++) c[i] = (ref_c){(float)(l[i] / t), i};
    qsort(c, (size_t)nv, sizeof(ref_c), ref_cmp);
    int n = (k > 0 && k < nv) ? k : nv;
    double e[4096], z = 0;
    for (int i = 0; i < n; i++) z += (e[i] = exp(c[i].l - c[0].l));
    if (top_p < 1.0f) {
        double acc = 0;
        int m = 0;
        while (m < n) {
            acc += e[m++];
            if (acc >= (double)top_p * z) break;
        }
        n = m;
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!(min_p > 0 && e[i] < (double)min_p)) c[m] = c[i], e[m++] = e[i];
    n = m;
    z = 0;
    for (int i = 0; i < n; i++) z += e[i];
    for (int i = 0; i < nv; i++) prob[i] = 0;
    for (int i = 0; i < n; i++) prob[c[i].id] = e[i] / z;
}

static void test_matches_reference(void **state) {
    (void)state;
    enum { NV = 3000 };
    static float l[NV];
    static double want[NV], got[NV];
    ll_rng r;
    ll_rng_seed(&r, 99);
    const float temps[] = {0.3f, 0.7f, 1.0f, 2.0f};
    const int ks[] = {0, 1, 7, 40, 2999, 5000};
    const float ps[] = {1.0f, 0.3f, 0.9f, 0.999f};
    const float mps[] = {0.0f, 0.05f, 0.5f};
    int trial = 0;
    for (size_t a = 0; a < LL_ARRAY_LEN(temps); a++)
        for (size_t b = 0; b < LL_ARRAY_LEN(ks); b++)
            for (size_t c = 0; c < LL_ARRAY_LEN(ps); c++)
                for (size_t d = 0; d < LL_ARRAY_LEN(mps); d++, trial++) {
                    /* logits rounded to 1/8 so that many are exactly equal: ties must be resolved
                     * by id exactly as the reference does */
                    for (int i = 0; i < NV; i++)
                        l[i] = roundf((float)(ll_rng_uniform(&r) * 12.0 - 6.0) * 8.0f) / 8.0f;
                    ll_sampler_params p = ll_sampler_defaults();
                    p.temperature = temps[a];
                    p.top_k = ks[b];
                    p.top_p = ps[c];
                    p.min_p = mps[d];
                    ll_sampler *s = mk(p, NV, NV);
                    dist_dense(s, l, NV, got);
                    ref_dist(l, NV, temps[a], ks[b], ps[c], mps[d], want);
                    for (int i = 0; i < NV; i++) {
                        if ((want[i] == 0) != (got[i] == 0))
                            fail_msg("trial %d (T %g k %d p %g minp %g): token %d kept %d, reference %d", trial,
                                     temps[a], ks[b], ps[c], mps[d], i, got[i] != 0, want[i] != 0);
                        assert_float_equal(got[i], want[i], 1e-5 + 1e-4 * want[i]);
                    }
                    ll_sampler_free(s);
                }
}

/* ---------------------------------------------------------------- logprobs */

static void test_logprobs(void **state) {
    (void)state;
    const float l[7] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, -INFINITY, 1.0f};
    ll_sampler_params p = ll_sampler_defaults();
    ll_sampler *s = mk(p, 7, 7);
    double z = 0;
    for (int i = 0; i < 7; i++) z += exp(l[i]);
    ll_logprobs lp;
    assert_int_equal(ll_sampler_logprobs(s, l, 4, 4, &lp), LL_OK);
    assert_int_equal(lp.chosen.id, 4);
    assert_float_equal(lp.chosen.logprob, 2.0 - log(z), 1e-5);
    assert_int_equal(lp.n_top, 4);
    const int order[4] = {1, 3, 4, 6}; /* tie 1/3 by id */
    for (int i = 0; i < 4; i++) {
        assert_int_equal(lp.top[i].id, order[i]);
        assert_float_equal(lp.top[i].logprob, l[order[i]] - log(z), 1e-5);
    }
    assert_int_equal(ll_sampler_logprobs(s, l, 5, 0, &lp), LL_OK);
    assert_int_equal(lp.n_top, 0);
    assert_true(lp.chosen.logprob == -INFINITY);
    assert_int_equal(ll_sampler_logprobs(s, l, 0, 7, &lp), LL_OK); /* more than candidates is fine */
    assert_int_equal(lp.n_top, 7);
    assert_int_equal(lp.top[6].id, 5);
    assert_int_equal(ll_sampler_logprobs(s, l, 0, LL_SAMPLER_MAX_TOP_LOGPROBS + 1, &lp), LL_ERR_INVALID);
    /* logprobs ignore temperature, bias and penalties: the raw model distribution */
    ll_sampler_free(s);
    p.temperature = 0.2f;
    p.repetition_penalty = 3.0f;
    s = mk(p, 7, 7);
    ll_sampler_accept(s, 1);
    ll_logprobs lp2;
    assert_int_equal(ll_sampler_logprobs(s, l, 4, 4, &lp2), LL_OK);
    assert_float_equal(lp2.chosen.logprob, 2.0 - log(z), 1e-5);
    ll_sampler_free(s);
}

/* ---------------------------------------------------------------- parameters */

static void test_invalid_params(void **state) {
    (void)state;
    ll_sampler *s = NULL;
    ll_sampler_params p;
#define BAD(stmt, word)                                                      \
    do {                                                                     \
        p = ll_sampler_defaults();                                           \
        stmt;                                                                \
        assert_int_equal(ll_sampler_new(&p, 10, 10, &s), LL_ERR_INVALID);    \
        assert_null(s);                                                      \
        assert_non_null(strstr(ll_errmsg(), word));                          \
    } while (0)
    BAD(p.temperature = -0.1f, "temperature");
    BAD(p.temperature = NAN, "temperature");
    BAD(p.top_p = 0.0f, "top_p");
    BAD(p.top_p = 1.5f, "top_p");
    BAD(p.min_p = -0.5f, "min_p");
    BAD(p.repetition_penalty = 0.0f, "repetition_penalty");
    BAD(p.presence_penalty = INFINITY, "presence_penalty");
    BAD(p.frequency_penalty = NAN, "frequency_penalty");
    ll_logit_bias b = {10, 1.0f};
    BAD((p.logit_bias = &b, p.n_logit_bias = 1), "logit_bias");
    ll_logit_bias bn = {3, NAN};
    BAD((p.logit_bias = &bn, p.n_logit_bias = 1), "logit_bias");
#undef BAD
    p = ll_sampler_defaults();
    assert_int_equal(ll_sampler_new(&p, 4, 5, &s), LL_ERR_INVALID);
    /* NaN logits are reported, not sampled */
    s = mk(p, 3, 3);
    const float l[3] = {0.0f, NAN, 1.0f};
    int32_t id;
    assert_int_equal(ll_sampler_sample(s, l, &id), LL_ERR_INVALID);
    assert_non_null(strstr(ll_errmsg(), "NaN"));
    ll_sampler_free(s);
    /* the bias array is copied: the caller's may go away */
    ll_logit_bias tmp = {2, -INFINITY};
    p.logit_bias = &tmp;
    p.n_logit_bias = 1;
    p.temperature = 0;
    s = mk(p, 3, 3);
    tmp.bias = 0.0f;
    const float l2[3] = {0.0f, 0.5f, 1.0f};
    assert_int_equal(ll_sampler_sample(s, l2, &id), LL_OK);
    assert_int_equal(id, 1);
    ll_sampler_free(s);
}

/* ---------------------------------------------------------------- full-size vocabulary */

static void test_big_vocab_no_alloc(void **state) {
    (void)state;
    float *l = malloc(BIG_VOCAB * sizeof(float));
    assert_non_null(l);
    ll_rng r;
    ll_rng_seed(&r, 5);
    for (int i = 0; i < BIG_VOCAB; i++) {
        /* a peaked head plus a long flat tail, like a language model */
        double u = ll_rng_uniform(&r);
        l[i] = (float)(-4.0 * log(-log(u + 1e-12) + 1e-12));
        if (i % 9973 == 0) l[i] += 12.0f;
    }
    struct { float t; int k; float p; float mp; } cfg[] = {
        {0.7f, 20, 0.95f, 0.0f}, {1.0f, 0, 0.95f, 0.0f}, {0.6f, 0, 1.0f, 0.05f}, {1.0f, 0, 1.0f, 0.0f},
        {1.5f, 0, 0.999f, 0.0f},
    };
    for (size_t c = 0; c < LL_ARRAY_LEN(cfg); c++) {
        ll_sampler_params p = ll_sampler_defaults();
        p.temperature = cfg[c].t;
        p.top_k = cfg[c].k;
        p.top_p = cfg[c].p;
        p.min_p = cfg[c].mp;
        p.repetition_penalty = 1.1f;
        p.seed = c;
        ll_sampler *s = mk(p, BIG_VOCAB + 128, BIG_VOCAB);
        const int steps = 30;
        ll_alloc_fail_after(0); /* any allocation from here on fails, so would the sampler */
        double t0 = ll_time_sec();
        for (int i = 0; i < steps; i++) {
            int32_t id;
            ll_status st = ll_sampler_sample(s, l, &id);
            if (st != LL_OK) {
                ll_alloc_fail_after(-1);
                fail_msg("sample: %s", ll_errmsg());
            }
            assert_true(id >= 0 && id < BIG_VOCAB);
            ll_sampler_accept(s, id);
        }
        double ms = (ll_time_sec() - t0) * 1000.0 / steps;
        ll_alloc_fail_after(-1);
        print_message("V=%d T=%.1f k=%d p=%.3f min_p=%.2f: %.2f ms/token\n", BIG_VOCAB, cfg[c].t, cfg[c].k,
                      cfg[c].p, cfg[c].mp, ms);
        assert_true(ms < 200.0); /* a full sort costs far more; generous for sanitizer builds */
        ll_sampler_free(s);
    }
    free(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_ties_and_bias),
        cmocka_unit_test(test_greedy_bias_exact),
        cmocka_unit_test(test_top_k_exact),
        cmocka_unit_test(test_top_p_exact),
        cmocka_unit_test(test_top_p_after_temperature_and_top_k),
        cmocka_unit_test(test_min_p_exact),
        cmocka_unit_test(test_penalties_exact),
        cmocka_unit_test(test_penalty_changes_greedy),
        cmocka_unit_test(test_vocab_mask),
        cmocka_unit_test(test_seed_reproducible),
        cmocka_unit_test(test_sampled_frequencies),
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_invalid_params),
        cmocka_unit_test(test_big_vocab_no_alloc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
