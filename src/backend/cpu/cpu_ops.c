/*
 * cpu_ops.c — CPU kernels for the qwen3_5_moe forward pass (fp32 reference numerics).
 * The math follows HF transformers' Qwen3_5Moe modeling code; see
 * shared/reference/qwen35-moe-spec.md for every equation referenced below (§ numbers).
 */
#include "cpu_ops.h"

#include <math.h>

/* ================================================================ activations */

typedef struct {
    cpu_act *a;
} act_job;

static void act_worker(void *ctx, int ith, int nth) {
    cpu_act *a = ((act_job *)ctx)->a;
    int64_t lo, hi;
    ll_split_range(a->T, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++)
        quant_quantize_act(a->wtype, a->x + t * a->ldx, a->buf + t * a->row, a->n);
}

void cpu_act_prepare(cpu_act *a, ll_pool *pool, const float *x, int32_t T, int32_t n, int64_t ldx, ll_type wtype,
                     uint8_t *buf, size_t cap) {
    a->x = x;
    a->ldx = ldx;
    a->T = T;
    a->n = n;
    a->wtype = wtype;
    a->type = quant_vec_dot_type(wtype);
    a->buf = NULL;
    a->row = 0;
    if (a->type == LL_TYPE_F32) return;
    a->row = quant_act_bytes(wtype, n);
    LL_ASSERT(a->row * (size_t)T <= cap);
    a->buf = buf;
    act_job j = {a};
    if (T > 1) ll_pool_run(pool, act_worker, &j);
    else act_worker(&j, 0, 1);
}

/* ================================================================ matmul */

typedef struct {
    const cpu_mm *mm;
    int n_mm;
    int64_t total_rows;
} mm_job;

/* Dot of weight row r of m with activation row t. */
static inline float mm_dot(const cpu_mm *m, int64_t r, int32_t t) {
    const cpu_act *a = m->act;
    const uint8_t *row = ll_mat_row(m->w, r);
    if (a->type == LL_TYPE_F32) return quant_dot_row(m->w->type, row, a->x + (int64_t)t * a->ldx, a->n);
    return quant_dot_row_q(m->w->type, row, a->buf + (size_t)t * a->row, a->n);
}

static void mm_worker(void *ctx, int ith, int nth) {
    mm_job *j = ctx;
    int64_t lo, hi;
    ll_split_range(j->total_rows, ith, nth, &lo, &hi);
    int64_t base = 0;
    for (int k = 0; k < j->n_mm && lo < hi; k++) {
        const cpu_mm *m = &j->mm[k];
        int64_t rows = m->w->rows;
        int64_t a = LL_MAX(lo, base), b = LL_MIN(hi, base + rows);
        if (a < b && m->n_tok == 1 && m->act->type != LL_TYPE_F32) {
            /* decode: one activation row against a run of weight rows, kernel chosen once */
            int32_t t = m->tok ? m->tok[0] : 0;
            quant_dot_rows_q(m->w->type, ll_mat_row(m->w, a - base), m->w->row_bytes, b - a,
                             m->act->buf + (size_t)t * m->act->row, m->act->n, m->y + (a - base));
        } else {
            for (int64_t r = a; r < b; r++) {
                int64_t rr = r - base;
                /* one weight row stays in L1 while it meets every token */
                for (int32_t i = 0; i < m->n_tok; i++) {
                    int32_t t = m->tok ? m->tok[i] : i;
                    m->y[i * m->ldy + rr] = mm_dot(m, rr, t);
                }
            }
        }
        base += rows;
    }
}

void cpu_matmul_batch(ll_pool *pool, const cpu_mm *mm, int n_mm) {
    mm_job j = {mm, n_mm, 0};
    for (int k = 0; k < n_mm; k++) {
        LL_ASSERT(mm[k].w->cols == mm[k].act->n);
        if (mm[k].n_tok > 0) j.total_rows += mm[k].w->rows;
    }
    if (j.total_rows == 0) return;
    ll_pool_run(pool, mm_worker, &j);
}

/* ================================================================ norms, rope */

void cpu_rmsnorm(float *y, const float *x, const float *g, int32_t T, int32_t n, float eps) {
    for (int32_t t = 0; t < T; t++) {
        const float *xt = x + (int64_t)t * n;
        float *yt = y + (int64_t)t * n;
        double ss = 0; /* double: the statistic is the one place cancellation-free sums matter */
        for (int32_t i = 0; i < n; i++) ss += (double)xt[i] * xt[i];
        float r = 1.0f / sqrtf((float)(ss / n) + eps);
        if (g) for (int32_t i = 0; i < n; i++) yt[i] = xt[i] * r * g[i];
        else for (int32_t i = 0; i < n; i++) yt[i] = xt[i] * r;
    }
}

void cpu_rope_neox(float *x, int32_t n_heads, int32_t hd, int32_t n_rot, float theta, int64_t pos) {
    int32_t half = n_rot / 2;
    /* HF: inv_freq = 1 / theta^(arange(0, R, 2) / R) in fp32; angle = pos * inv_freq in fp32 */
    for (int32_t i = 0; i < half; i++) {
        float inv = 1.0f / powf(theta, (float)(2 * i) / (float)n_rot);
        float ang = (float)pos * inv;
        float c = cosf(ang), s = sinf(ang);
        for (int32_t h = 0; h < n_heads; h++) {
            float *v = x + (int64_t)h * hd;
            float a = v[i], b = v[i + half];
            v[i] = a * c - b * s;
            v[i + half] = b * c + a * s;
        }
    }
}

/* ================================================================ attention (§4) */

typedef struct {
    float *out;
    const float *q, *kc, *vc;
    int64_t q_tok_stride, q_head_stride, pos0;
    int32_t T, NH, NKV, HD;
    float *scratch;
} attn_job;

static void attn_worker(void *ctx, int ith, int nth) {
    attn_job *j = ctx;
    int64_t n_ctx = j->pos0 + j->T;
    float *sc = j->scratch + (int64_t)ith * n_ctx;
    int64_t lo, hi;
    ll_split_range((int64_t)j->T * j->NH, ith, nth, &lo, &hi);
    const int32_t group = j->NH / j->NKV, kvdim = j->NKV * j->HD;
    const float scale = 1.0f / sqrtf((float)j->HD);
    for (int64_t w = lo; w < hi; w++) {
        int32_t t = (int32_t)(w / j->NH), h = (int32_t)(w % j->NH);
        int32_t kvh = h / group; /* GQA: q head h uses kv head h / (NH/NKV) */
        const float *q = j->q + t * j->q_tok_stride + h * j->q_head_stride;
        int64_t n = j->pos0 + t + 1; /* causal: keys 0..pos */
        float mx = -INFINITY;
        for (int64_t p = 0; p < n; p++) {
            const float *k = j->kc + p * kvdim + (int64_t)kvh * j->HD;
            float s = 0;
            for (int32_t d = 0; d < j->HD; d++) s += q[d] * k[d];
            sc[p] = s * scale;
            if (sc[p] > mx) mx = sc[p];
        }
        float sum = 0;
        for (int64_t p = 0; p < n; p++) { sc[p] = expf(sc[p] - mx); sum += sc[p]; }
        float inv = 1.0f / sum;
        float *o = j->out + (int64_t)t * j->NH * j->HD + (int64_t)h * j->HD;
        for (int32_t d = 0; d < j->HD; d++) o[d] = 0;
        for (int64_t p = 0; p < n; p++) {
            const float *v = j->vc + p * kvdim + (int64_t)kvh * j->HD;
            float pw = sc[p] * inv;
            for (int32_t d = 0; d < j->HD; d++) o[d] += pw * v[d];
        }
    }
}

void cpu_attention(ll_pool *pool, float *out, const float *q, int64_t q_tok_stride, int64_t q_head_stride,
                   const float *kc, const float *vc, int32_t T, int64_t pos0, int32_t NH, int32_t NKV,
                   int32_t HD, float *scratch) {
    attn_job j = {out, q, kc, vc, q_tok_stride, q_head_stride, pos0, T, NH, NKV, HD, scratch};
    ll_pool_run(pool, attn_worker, &j);
}

/* ================================================================ conv (§5.2) */

void cpu_conv_silu(float *y, const float *x, float *win, const float *w, int32_t T, int32_t C, int32_t K) {
    /* input at relative time s (s < 0 from the window, oldest first) */
    for (int32_t t = 0; t < T; t++) {
        for (int32_t c = 0; c < C; c++) {
            const float *wc = w + (int64_t)c * K;
            float acc = 0;
            for (int32_t j = 0; j < K; j++) {
                int32_t s = t - (K - 1) + j;
                float v = s >= 0 ? x[(int64_t)s * C + c] : win[(int64_t)(K - 1 + s) * C + c];
                acc += wc[j] * v;
            }
            y[(int64_t)t * C + c] = cpu_silu(acc);
        }
    }
    /* new window = last K-1 inputs of (old window ++ x) */
    for (int32_t i = 0; i < K - 1; i++) {
        int32_t s = T - (K - 1) + i; /* relative time of window slot i */
        float *dst = win + (int64_t)i * C;
        if (s >= 0) memcpy(dst, x + (int64_t)s * C, sizeof(float) * (size_t)C);
        else memmove(dst, win + (int64_t)(K - 1 + s) * C, sizeof(float) * (size_t)C);
    }
}

/* ================================================================ Gated DeltaNet (§5.4-5.6) */

#define GDN_C 64

size_t cpu_gdn_scratch_floats(int32_t DK, int32_t DV) {
    /* q,k [C][DK] normalised; v [C][DV]; beta, gamma [C]; A [C][C]; U [C][DV]; W [C][DK];
     * Vnew [C][DV]; row scratch [DV] */
    return (size_t)GDN_C * (2 * DK + DV) + 2 * GDN_C + GDN_C * GDN_C + (size_t)GDN_C * DV + (size_t)GDN_C * DK +
           (size_t)GDN_C * DV + DV + 64;
}

typedef struct {
    float *o;
    const float *qkv, *beta, *g;
    float *S;
    int32_t T, HK, HV, DK, DV, v_tiled, chunked;
    float *scratch;
} gdn_job;

/* L2-normalises src[n] into dst, times `scale` (fp32, eps 1e-6 inside the rsqrt, as FLA/HF). */
static inline void l2norm_scaled(float *dst, const float *src, int32_t n, float scale) {
    float ss = 0;
    for (int32_t i = 0; i < n; i++) ss += src[i] * src[i];
    float r = scale / sqrtf(ss + 1e-6f);
    for (int32_t i = 0; i < n; i++) dst[i] = src[i] * r;
}

/* Token-by-token recurrence (§5.5) for head h over T tokens. */
static void gdn_head_recurrent(const gdn_job *j, int32_t h, float *scr) {
    const int32_t DK = j->DK, DV = j->DV, conv_dim = 2 * j->HK * DK + j->HV * DV;
    const int32_t kh = j->v_tiled ? h % j->HK : h / (j->HV / j->HK);
    float *S = j->S + (int64_t)h * DK * DV; /* [DK][DV] */
    float *q = scr, *k = q + DK, *u = k + DK;
    const float qscale = 1.0f / sqrtf((float)DK);
    for (int32_t t = 0; t < j->T; t++) {
        const float *row = j->qkv + (int64_t)t * conv_dim;
        l2norm_scaled(q, row + (int64_t)kh * DK, DK, qscale);
        l2norm_scaled(k, row + (int64_t)j->HK * DK + (int64_t)kh * DK, DK, 1.0f);
        const float *v = row + 2 * (int64_t)j->HK * DK + (int64_t)h * DV;
        float beta = j->beta[(int64_t)t * j->HV + h];
        float alpha = expf(j->g[(int64_t)t * j->HV + h]);
        /* 1. decay, 2. read u = S^T k with the decayed state */
        for (int32_t c = 0; c < DV; c++) u[c] = 0;
        for (int32_t i = 0; i < DK; i++) {
            float *Si = S + (int64_t)i * DV;
            float ki = k[i];
            for (int32_t c = 0; c < DV; c++) { Si[c] *= alpha; u[c] += Si[c] * ki; }
        }
        /* 3. delta = beta (v - u); 4. S += k delta^T; 5. o = S^T q */
        for (int32_t c = 0; c < DV; c++) u[c] = beta * (v[c] - u[c]);
        float *o = j->o + (int64_t)t * j->HV * DV + (int64_t)h * DV;
        for (int32_t c = 0; c < DV; c++) o[c] = 0;
        for (int32_t i = 0; i < DK; i++) {
            float *Si = S + (int64_t)i * DV;
            float ki = k[i], qi = q[i];
            for (int32_t c = 0; c < DV; c++) { Si[c] += ki * u[c]; o[c] += Si[c] * qi; }
        }
    }
}

static inline float dotf(const float *a, const float *b, int32_t n) {
    float s = 0;
    for (int32_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Chunked WY form (§5.6) for head h, chunks of up to 64 tokens carrying S across chunks.
 * A partial last chunk is handled directly (equivalent to HF's zero padding: padded rows have
 * beta = 0 and g = 0 and never influence earlier rows). */
static void gdn_head_chunked(const gdn_job *j, int32_t h, float *scr) {
    const int32_t DK = j->DK, DV = j->DV, C = GDN_C, conv_dim = 2 * j->HK * DK + j->HV * DV;
    const int32_t kh = j->v_tiled ? h % j->HK : h / (j->HV / j->HK);
    float *S = j->S + (int64_t)h * DK * DV;
    float *Q = scr;                   /* [C][DK] q̂ (scaled) */
    float *Kn = Q + C * DK;           /* [C][DK] k̂ */
    float *Vv = Kn + C * DK;          /* [C][DV] v */
    float *bet = Vv + C * DV;         /* [C] */
    float *gam = bet + C;             /* [C] cumulative log-decay */
    float *A = gam + C;               /* [C][C] */
    float *U = A + C * C;             /* [C][DV] */
    float *W = U + C * DV;            /* [C][DK] */
    float *Vn = W + C * DK;           /* [C][DV] */
    const float qscale = 1.0f / sqrtf((float)DK);

    for (int32_t t0 = 0; t0 < j->T; t0 += C) {
        const int32_t c = LL_MIN(C, j->T - t0);
        float acc = 0;
        for (int32_t r = 0; r < c; r++) {
            const float *row = j->qkv + (int64_t)(t0 + r) * conv_dim;
            l2norm_scaled(Q + r * DK, row + (int64_t)kh * DK, DK, qscale);
            l2norm_scaled(Kn + r * DK, row + (int64_t)j->HK * DK + (int64_t)kh * DK, DK, 1.0f);
            memcpy(Vv + r * DV, row + 2 * (int64_t)j->HK * DK + (int64_t)h * DV, sizeof(float) * (size_t)DV);
            bet[r] = j->beta[(int64_t)(t0 + r) * j->HV + h];
            acc += j->g[(int64_t)(t0 + r) * j->HV + h];
            gam[r] = acc;
        }
        /* A[i][j] = beta_i (k_i . k_j) exp(gam_i - gam_j), strictly lower (j < i) */
        for (int32_t i = 0; i < c; i++)
            for (int32_t jj = 0; jj < i; jj++)
                A[i * C + jj] = bet[i] * dotf(Kn + i * DK, Kn + jj * DK, DK) * expf(gam[i] - gam[jj]);
        /* U = (I + A)^-1 (diag(beta) V), W = (I + A)^-1 (diag(beta exp(gam)) K): forward substitution */
        for (int32_t i = 0; i < c; i++) {
            float *Ui = U + i * DV, *Wi = W + i * DK;
            float eg = expf(gam[i]);
            for (int32_t d = 0; d < DV; d++) Ui[d] = bet[i] * Vv[i * DV + d];
            for (int32_t d = 0; d < DK; d++) Wi[d] = bet[i] * eg * Kn[i * DK + d];
            for (int32_t jj = 0; jj < i; jj++) {
                float a = A[i * C + jj];
                const float *Uj = U + jj * DV, *Wj = W + jj * DK;
                for (int32_t d = 0; d < DV; d++) Ui[d] -= a * Uj[d];
                for (int32_t d = 0; d < DK; d++) Wi[d] -= a * Wj[d];
            }
        }
        /* Vnew = U - W S */
        for (int32_t i = 0; i < c; i++) {
            float *vn = Vn + i * DV;
            memcpy(vn, U + i * DV, sizeof(float) * (size_t)DV);
            const float *Wi = W + i * DK;
            for (int32_t kk = 0; kk < DK; kk++) {
                const float *Sk = S + (int64_t)kk * DV;
                float w = Wi[kk];
                for (int32_t d = 0; d < DV; d++) vn[d] -= w * Sk[d];
            }
        }
        /* O_i = exp(gam_i) q_i^T S + sum_{j<=i} (q_i . k_j) exp(gam_i - gam_j) Vnew_j */
        for (int32_t i = 0; i < c; i++) {
            float *o = j->o + (int64_t)(t0 + i) * j->HV * DV + (int64_t)h * DV;
            const float *qi = Q + i * DK;
            float eg = expf(gam[i]);
            for (int32_t d = 0; d < DV; d++) o[d] = 0;
            for (int32_t kk = 0; kk < DK; kk++) {
                const float *Sk = S + (int64_t)kk * DV;
                float w = qi[kk] * eg;
                for (int32_t d = 0; d < DV; d++) o[d] += w * Sk[d];
            }
            for (int32_t jj = 0; jj <= i; jj++) {
                float p = dotf(qi, Kn + jj * DK, DK) * expf(gam[i] - gam[jj]);
                const float *vn = Vn + jj * DV;
                for (int32_t d = 0; d < DV; d++) o[d] += p * vn[d];
            }
        }
        /* S = exp(gam_last) S + sum_r exp(gam_last - gam_r) k_r Vnew_r^T */
        float gl = gam[c - 1], el = expf(gl);
        for (int32_t kk = 0; kk < DK; kk++) {
            float *Sk = S + (int64_t)kk * DV;
            for (int32_t d = 0; d < DV; d++) Sk[d] *= el;
            for (int32_t r = 0; r < c; r++) {
                float w = Kn[r * DK + kk] * expf(gl - gam[r]);
                const float *vn = Vn + r * DV;
                for (int32_t d = 0; d < DV; d++) Sk[d] += w * vn[d];
            }
        }
    }
}

static void gdn_worker(void *ctx, int ith, int nth) {
    gdn_job *j = ctx;
    float *scr = j->scratch + (size_t)ith * cpu_gdn_scratch_floats(j->DK, j->DV);
    int64_t lo, hi;
    ll_split_range(j->HV, ith, nth, &lo, &hi);
    for (int64_t h = lo; h < hi; h++) {
        if (j->chunked) gdn_head_chunked(j, (int32_t)h, scr);
        else gdn_head_recurrent(j, (int32_t)h, scr);
    }
}

void cpu_gdn(ll_pool *pool, float *o, const float *qkv, const float *beta, const float *g, float *S,
             int32_t T, int32_t HK, int32_t HV, int32_t DK, int32_t DV, int v_tiled, int chunked,
             float *scratch) {
    gdn_job j = {o, qkv, beta, g, S, T, HK, HV, DK, DV, v_tiled, chunked, scratch};
    ll_pool_run(pool, gdn_worker, &j);
}

/* ================================================================ read bandwidth probe */

#include <immintrin.h>

typedef struct {
    const uint8_t *buf;
    size_t bytes;
    uint64_t *sums;
    int avx2;
} bw_job;

/* Integer adds of 32-byte loads, 4 independent chains: bound by loads, not by the adder. */
__attribute__((target("avx2"))) static uint64_t bw_sum_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    uint64_t o[4];
    _mm256_storeu_si256((__m256i *)o, _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    return o[0] + o[1] + o[2] + o[3];
}

static uint64_t bw_sum_scalar(const uint8_t *p, size_t n) {
    uint64_t a[8] = {0};
    for (size_t i = 0; i + 64 <= n; i += 64)
        for (int k = 0; k < 8; k++) {
            uint64_t v;
            memcpy(&v, p + i + 8 * k, 8);
            a[k] += v;
        }
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

static void bw_worker(void *ctx, int ith, int nth) {
    bw_job *j = ctx;
    int64_t lo, hi;
    ll_split_range((int64_t)(j->bytes / 4096), ith, nth, &lo, &hi); /* page-aligned shares */
    const uint8_t *p = j->buf + lo * 4096;
    size_t n = (size_t)(hi - lo) * 4096;
    j->sums[ith] = j->avx2 ? bw_sum_avx2(p, n) : bw_sum_scalar(p, n);
}

ll_status cpu_measure_read_bw(ll_pool *pool, size_t bytes, double *gbps) {
    bytes &= ~(size_t)4095;
    uint8_t *buf = ll_malloc_aligned(bytes);
    uint64_t *sums = ll_calloc((size_t)ll_pool_size(pool), sizeof(uint64_t));
    if (!buf || !sums) { ll_free_aligned(buf); ll_free(sums); return ll_err(LL_ERR_OOM, "bandwidth probe: out of memory"); }
    for (size_t i = 0; i < bytes; i++) buf[i] = (uint8_t)i; /* touch every page before timing */
    __builtin_cpu_init();
    bw_job j = {buf, bytes, sums, __builtin_cpu_supports("avx2")};
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = ll_time_sec();
        ll_pool_run(pool, bw_worker, &j);
        double dt = ll_time_sec() - t0;
        if (dt < best) best = dt;
    }
    *gbps = (double)bytes / best / 1e9;
    ll_free_aligned(buf);
    ll_free(sums);
    return LL_OK;
}
