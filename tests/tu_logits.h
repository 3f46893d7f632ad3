/*
 * tu_logits.h — logits of a whole model on the CPU backend, and how far two sets of logits are
 * apart (top-1 agreement, mean KL), for the cmocka programs that check a model against a
 * reference (test_convert, test_quantized). Include after testutil.h.
 */
#ifndef LILAC_TU_LOGITS_H
#define LILAC_TU_LOGITS_H

#include <math.h>

#include "backend/backend.h"

/* [T, n_vocab] logits of tok[0..T) from a fresh sequence (malloc'ed; the caller frees). */
static inline float *tu_run_logits(const qwen_model *m, const int32_t *tok, int32_t T) {
    ll_backend_params bp = {.n_threads = 2};
    ll_backend *be;
    ll_seq *s;
    if (cpu_backend_new(m, &bp, &be) != LL_OK) fail_msg("%s", ll_errmsg());
    assert_int_equal(be->v->seq_new(be, T, &s), LL_OK);
    float *lg = malloc(sizeof(float) * (size_t)T * (size_t)m->hp.n_vocab);
    assert_non_null(lg);
    assert_int_equal(be->v->forward(be, s, tok, T, LL_LOGITS_ALL, lg), LL_OK);
    be->v->seq_free(be, s);
    ll_backend_free(be);
    return lg;
}

static inline void tu_softmax_d(const float *x, double *p, int64_t n) {
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < n; i++) mx = fmax(mx, x[i]);
    for (int64_t i = 0; i < n; i++) sum += (p[i] = exp(x[i] - mx));
    for (int64_t i = 0; i < n; i++) p[i] /= sum;
}

/* Top-1 agreement and mean KL(ref || x) over T rows of V logits (in double, ref's softmax first). */
static inline void tu_compare_logits(const float *ref, const float *x, int32_t T, int32_t V, double *top1, double *mkl) {
    double *p = malloc(sizeof(double) * (size_t)V), *q = malloc(sizeof(double) * (size_t)V), kl = 0;
    assert_true(p && q);
    int agree = 0;
    for (int32_t t = 0; t < T; t++) {
        const float *a = ref + (int64_t)t * V, *b = x + (int64_t)t * V;
        int32_t ia = 0, ib = 0;
        for (int32_t v = 1; v < V; v++) {
            if (a[v] > a[ia]) ia = v;
            if (b[v] > b[ib]) ib = v;
        }
        agree += ia == ib;
        tu_softmax_d(a, p, V);
        tu_softmax_d(b, q, V);
        for (int32_t v = 0; v < V; v++)
            if (p[v] > 0) kl += p[v] * (log(p[v]) - log(fmax(q[v], 1e-300)));
    }
    *top1 = (double)agree / T;
    *mkl = kl / T;
    free(p);
    free(q);
}

#endif
