/*
 * cpu_ops.h — CPU kernels of the qwen3_5_moe forward pass. Each is a pure function of pointers
 * and shapes; the ones that take an ll_pool split their work across its threads. The forward
 * pass in cpu_backend.c sequences them. All math is fp32 (the reference path).
 *
 * Shape letters as in qwen35.h; T = tokens in the current chunk.
 */
#ifndef LILAC_CPU_OPS_H
#define LILAC_CPU_OPS_H

#include <math.h>

#include "base/threadpool.h"
#include "model/qwen35.h"

/* ---- activations quantized for a weight type's dot product (see quant_vec_dot_type) ---- */
typedef struct cpu_act {
    const float *x;      /* [T, ldx] fp32 source, n used per row */
    int64_t ldx;
    int32_t T, n;
    ll_type wtype;       /* weight type the activation is prepared for */
    ll_type type;        /* its vec-dot type; LL_TYPE_F32: rows point into x, else quantized in buf */
    uint8_t *buf;        /* [T, row] quantized rows (borrowed scratch) */
    size_t row;          /* bytes per quantized row */
} cpu_act;

/* Quantizes x[T, n] (row stride ldx) for weights of type wtype into scratch `buf` (capacity
 * checked by assert). */
void cpu_act_prepare(cpu_act *a, ll_pool *pool, const float *x, int32_t T, int32_t n, int64_t ldx, ll_type wtype,
                     uint8_t *buf, size_t cap);
/* Bytes per row that cpu_act_prepare may need for any weight type (an upper bound). */
static inline size_t cpu_act_row_bound(int64_t n) { return (size_t)n * 2 + 512; }

/* One matrix product in a batch of products run in a single parallel region:
 * y[i * ldy + r] = dot(W[r, :], act row tok[i]) for r in [0, W.rows), i in [0, n_tok). */
typedef struct cpu_mm {
    const ll_mat *w;
    const cpu_act *act;
    const int32_t *tok;  /* [n_tok] activation rows; NULL = 0..n_tok-1 */
    int32_t n_tok;
    float *y;
    int64_t ldy;
} cpu_mm;

/* Runs all products, splitting the total rows evenly across the pool's threads. */
void cpu_matmul_batch(ll_pool *pool, const cpu_mm *mm, int n_mm);

/* y[T, n] = rmsnorm(x[T, n]) * g[n] (g may be NULL: no gain). y may alias x. */
void cpu_rmsnorm(float *y, const float *x, const float *g, int32_t T, int32_t n, float eps);

/* NeoX rotary embedding on the first n_rot dims of each of n_heads heads of x[n_heads, hd]
 * at absolute position pos. */
void cpu_rope_neox(float *x, int32_t n_heads, int32_t hd, int32_t n_rot, float theta, int64_t pos);

/* Causal attention for T query tokens at positions pos0..pos0+T-1 over a cache holding
 * positions 0..pos0+T-1. q: [T][NH][q_stride-strided rows of HD]; k/v cache rows [pos][NKV*HD].
 * out[T][NH*HD]. scratch: n_threads * (pos0+T) floats. */
void cpu_attention(ll_pool *pool, float *out, const float *q, int64_t q_tok_stride, int64_t q_head_stride,
                   const float *kc, const float *vc, int32_t T, int64_t pos0, int32_t NH, int32_t NKV,
                   int32_t HD, float *scratch);

/* Gated DeltaNet core for one sequence chunk. Inputs after conv+SiLU:
 *   qkv[T][conv_dim] (q | k | v), beta[T][HV], g[T][HV] (log-decay <= 0).
 * State S[HV][DK][DV] is updated in place. Output o[T][HV*DV].
 * chunked != 0 uses the chunked (C = 64) WY form, else the token-by-token recurrence; both are
 * exact implementations of the same rule (tests compare them).
 * scratch: n_threads * cpu_gdn_scratch_floats(DK, DV) floats. */
void cpu_gdn(ll_pool *pool, float *o, const float *qkv, const float *beta, const float *g, float *S,
             int32_t T, int32_t HK, int32_t HV, int32_t DK, int32_t DV, int v_tiled, int chunked,
             float *scratch);
size_t cpu_gdn_scratch_floats(int32_t DK, int32_t DV);

/* Causal depthwise conv (kernel K) + SiLU over x[T][C] with the K-1 previous inputs in
 * win[K-1][C] (oldest first); writes y[T][C] and updates win to the last K-1 inputs. */
void cpu_conv_silu(float *y, const float *x, float *win, const float *w, int32_t T, int32_t C, int32_t K);

/* Streams `bytes` of memory on every pool thread (best of 5) and reports GB/s: the read-bandwidth
 * reference that CPU decode figures are divided by. */
ll_status cpu_measure_read_bw(ll_pool *pool, size_t bytes, double *gbps);

static inline float cpu_silu(float x) { return x / (1.0f + expf(-x)); }
static inline float cpu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float cpu_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

#endif
