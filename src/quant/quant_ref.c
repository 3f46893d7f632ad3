/*
 * quant_ref.c — scalar reference implementation of the block formats (dequantize, dot,
 * quantize, the pre-quantized-activation dot) and the public entry points, which dispatch to
 * the SIMD kernels that quant_init() selected (quant_x86.c) unless quant_force_scalar(1).
 *
 * Formats follow llama.cpp's ggml-common.h layouts; the formulas were checked against the
 * `gguf` package's numpy dequantizers (tests/py/test_quant_gguf.py cross-checks them).
 *
 * K-quant quantization (our own method, see quant_fit_affine / quant_fit_symmetric):
 *   every sub-block (32 elements for Q4_K/Q5_K, 16 for Q6_K) gets a scale (and for Q4_K/Q5_K a
 *   non-negative min) chosen by a search over candidate scales range/c: a grid of 7 values of c
 *   around nmax (step 0.34), then the best one's two neighbours at step 0.17 (9 rounding passes;
 *   llama.cpp's make_qkx2_quants tries 21 on a 0.1 grid, as this file did before — the coarse
 *   grid with refinement measured within 0.15 % of its RMSE at 40 % of the cost; Q6_K: 5 + 2
 *   passes, step 0.5). For each
 *   candidate the integer codes are rounded and the scale/min refitted by least squares,
 *   keeping the candidate with the smallest squared error (of that fit on the candidate's own
 *   codes, as make_qkx2_quants scores it; in fp32 on data normalised by the range, compared
 *   cross-multiplied). The per-sub-block scales and mins are then quantized to 6 bits
 *   (Q4_K/Q5_K) or int8 (Q6_K) against fp16-rounded super-block scales, and the codes are
 *   re-rounded with the final scales.
 *   The fits are written so that quant_x86.c can run them one sub-block per SIMD lane and
 *   produce the same bytes (see "K-quant fits" below); `lilac convert` uses those.
 *   Measured RMSE / RMS(signal) on N(0,1) data (tests/test_quant.c checks bounds):
 *   Q4_K 0.072, Q5_K 0.036, Q6_K 0.017, Q4_0 0.087, Q8_0 0.0054, Q8_K 0.0070, MLX4 0.090,
 *   MLX8 0.0054 (64 blocks of 256; the fits use unweighted squared error;
 *   `build/bench/quant_speed --rmse` measures the K-quants on 4096 blocks).
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdatomic.h>

#include "quant_internal.h"

/* ------------------------------------------------------------------ dispatch state */

static quant_kernels g_simd;   /* what this CPU supports (quant_x86_install) */
static quant_kernels g_active; /* g_simd, or all NULL while quant_force_scalar(1) */
static int64_t g_blk[LL_TYPE_COUNT_]; /* elements per block of the types handled here, else 0 */
static int g_level = QUANT_SIMD_SCALAR;
static int g_force_scalar;
static atomic_int g_ready;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void init_once(void) {
    static const ll_type handled[] = {LL_TYPE_F32,  LL_TYPE_F16,  LL_TYPE_BF16, LL_TYPE_Q4_0, LL_TYPE_Q8_0, LL_TYPE_Q4_K,
                                      LL_TYPE_Q5_K, LL_TYPE_Q6_K, LL_TYPE_Q8_K, LL_TYPE_MLX4, LL_TYPE_MLX8};
    for (size_t i = 0; i < LL_ARRAY_LEN(handled); i++) {
        int64_t b = quant_block_elems(handled[i]);
        LL_ASSERT((b & (b - 1)) == 0); /* row_ok() tests divisibility with a mask */
        g_blk[handled[i]] = b;
    }
    /* LILAC_NO_AVX512=1 keeps the AVX2 kernels (for benchmarks and comparisons) */
    const char *no512 = getenv("LILAC_NO_AVX512");
    g_level = quant_x86_install(&g_simd, no512 && *no512 && *no512 != '0' ? QUANT_SIMD_AVX2 : QUANT_SIMD_AVX512);
    g_active = g_simd;
    atomic_store_explicit(&g_ready, 1, memory_order_release);
}

void quant_init(void) { pthread_once(&g_once, init_once); }

void quant_force_scalar(int on) {
    quant_init();
    g_force_scalar = on;
    if (on) memset(&g_active, 0, sizeof(g_active));
    else g_active = g_simd;
}

int quant_force_simd(const char *name) {
    quant_init();
    int want = !name ? QUANT_SIMD_AVX512
               : !strcmp(name, "avx512") ? QUANT_SIMD_AVX512
               : !strcmp(name, "avx2")   ? QUANT_SIMD_AVX2
               : !strcmp(name, "scalar") ? QUANT_SIMD_SCALAR
                                         : -1;
    if (want < 0) return -1;
    memset(&g_simd, 0, sizeof(g_simd));
    g_level = quant_x86_install(&g_simd, want);
    if (!g_force_scalar) g_active = g_simd;
    return name && g_level != want ? -1 : 0;
}

const char *quant_simd_name(void) {
    quant_init();
    if (g_force_scalar) return "scalar";
    return g_level == QUANT_SIMD_AVX512 ? "avx512" : g_level == QUANT_SIMD_AVX2 ? "avx2" : "scalar";
}

/* The active kernel table; cheap enough for once-per-row calls (one load after init). */
static inline const quant_kernels *kern(void) {
    if (!atomic_load_explicit(&g_ready, memory_order_acquire)) quant_init();
    return &g_active;
}

/* 1 if t is a type this file handles and n a whole number of its blocks. */
static inline int row_ok(ll_type t, int64_t n) {
    if ((unsigned)t >= LL_TYPE_COUNT_) return 0;
    int64_t b = g_blk[t];
    return b > 0 && n >= 0 && (n & (b - 1)) == 0;
}

/* ------------------------------------------------------------------ helpers */

static inline float f16(uint16_t h) { return ll_f16_to_f32(h); }

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Round to nearest, ties to even (the default rounding mode). */
static inline int rnd(float v) { return (int)lrintf(v); }

/* ------------------------------------------------------------------ dequantize */

static void dq_q4_0(const ll_block_q4_0 *b, float *y) {
    float d = f16(b->d);
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((b->qs[j] & 0xf) - 8);
        y[j + 16] = d * (float)((b->qs[j] >> 4) - 8);
    }
}

static void dq_q8_0(const ll_block_q8_0 *b, float *y) {
    float d = f16(b->d);
    for (int j = 0; j < 32; j++) y[j] = d * (float)b->qs[j];
}

static void dq_q4_K(const ll_block_q4_K *b, float *y) {
    uint8_t sc[8], mn[8];
    quant_k4_scales(b->scales, sc, mn);
    float d = f16(b->d), dmin = f16(b->dmin);
    for (int c = 0; c < 4; c++) { /* 64 elements: low nibbles, then high nibbles of 32 bytes */
        const uint8_t *q = b->qs + 32 * c;
        float d1 = d * sc[2 * c], m1 = dmin * mn[2 * c];
        float d2 = d * sc[2 * c + 1], m2 = dmin * mn[2 * c + 1];
        for (int l = 0; l < 32; l++) {
            y[64 * c + l] = d1 * (float)(q[l] & 0xf) - m1;
            y[64 * c + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

static void dq_q5_K(const ll_block_q5_K *b, float *y) {
    uint8_t sc[8], mn[8];
    quant_k4_scales(b->scales, sc, mn);
    float d = f16(b->d), dmin = f16(b->dmin);
    for (int c = 0; c < 4; c++) { /* element 32*g+l takes bit g of qh[l] as its 5th bit */
        const uint8_t *q = b->qs + 32 * c;
        float d1 = d * sc[2 * c], m1 = dmin * mn[2 * c];
        float d2 = d * sc[2 * c + 1], m2 = dmin * mn[2 * c + 1];
        for (int l = 0; l < 32; l++) {
            int h1 = (b->qh[l] >> (2 * c)) & 1, h2 = (b->qh[l] >> (2 * c + 1)) & 1;
            y[64 * c + l] = d1 * (float)((q[l] & 0xf) | (h1 << 4)) - m1;
            y[64 * c + 32 + l] = d2 * (float)((q[l] >> 4) | (h2 << 4)) - m2;
        }
    }
}

/* Q6_K element i of a half h (128 elements each): i = 32*g + l, g in 0..3:
 * low 4 bits from ql[64h + l + 32*(g&1)] (low nibble for g<2, high for g>=2),
 * high 2 bits from qh[32h + l] bits 2g..2g+1; scale index 8h + 2g + l/16. */
static inline int q6_code(const ll_block_q6_K *b, int i) {
    int h = i / 128, r = i % 128, g = r / 32, l = r % 32;
    uint8_t lo = b->ql[64 * h + l + 32 * (g & 1)];
    int q = (g < 2 ? lo & 0xf : lo >> 4) | (((b->qh[32 * h + l] >> (2 * g)) & 3) << 4);
    return q - 32;
}

static void dq_q6_K(const ll_block_q6_K *b, float *y) {
    float d = f16(b->d);
    for (int i = 0; i < 256; i++) y[i] = d * (float)b->scales[i / 16] * (float)q6_code(b, i);
}

static void dq_q8_K(const ll_block_q8_K *b, float *y) {
    for (int j = 0; j < 256; j++) y[j] = b->d * (float)b->qs[j];
}

static void dq_mlx4(const ll_block_mlx4 *b, float *y) {
    float s = ll_bf16_to_f32(b->scale), z = ll_bf16_to_f32(b->bias);
    for (int j = 0; j < 32; j++) {
        y[2 * j] = s * (float)(b->qs[j] & 0xf) + z;
        y[2 * j + 1] = s * (float)(b->qs[j] >> 4) + z;
    }
}

static void dq_mlx8(const ll_block_mlx8 *b, float *y) {
    float s = ll_bf16_to_f32(b->scale), z = ll_bf16_to_f32(b->bias);
    for (int j = 0; j < 64; j++) y[j] = s * (float)b->qs[j] + z;
}

/* Dequantizes one block (quant_block_elems(t) elements). */
static void dq_block(ll_type t, const void *blk, float *y) {
    switch (t) {
    case LL_TYPE_Q4_0: dq_q4_0(blk, y); break;
    case LL_TYPE_Q8_0: dq_q8_0(blk, y); break;
    case LL_TYPE_Q4_K: dq_q4_K(blk, y); break;
    case LL_TYPE_Q5_K: dq_q5_K(blk, y); break;
    case LL_TYPE_Q6_K: dq_q6_K(blk, y); break;
    case LL_TYPE_Q8_K: dq_q8_K(blk, y); break;
    case LL_TYPE_MLX4: dq_mlx4(blk, y); break;
    case LL_TYPE_MLX8: dq_mlx8(blk, y); break;
    default: LL_ABORT("quant: no block dequantizer for type %s", quant_type_name(t));
    }
}

static int is_plain_float(ll_type t) { return t == LL_TYPE_F32 || t == LL_TYPE_F16 || t == LL_TYPE_BF16; }

static void ref_dequant_row(ll_type t, const void *src, float *dst, int64_t n) {
    switch (t) {
    case LL_TYPE_F32: memcpy(dst, src, (size_t)n * sizeof(float)); return;
    case LL_TYPE_F16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = f16(h[i]);
        return;
    }
    case LL_TYPE_BF16: {
        const uint16_t *h = src;
        for (int64_t i = 0; i < n; i++) dst[i] = ll_bf16_to_f32(h[i]);
        return;
    }
    default: break;
    }
    int64_t qk = quant_block_elems(t);
    size_t bb = quant_block_bytes(t);
    const uint8_t *p = src;
    for (int64_t i = 0; i < n / qk; i++) dq_block(t, p + (size_t)i * bb, dst + i * qk);
}

void quant_dequant_row(ll_type t, const void *src, float *dst, int64_t n) {
    const quant_kernels *k = kern();
    LL_ASSERT(row_ok(t, n));
    if (k->dequant[t]) { k->dequant[t](src, dst, n); return; }
    ref_dequant_row(t, src, dst, n);
}

/* ------------------------------------------------------------------ dot with fp32 x */

/* Reference: dequantize block by block, accumulate each block in fp32 and the row in double. */
static float ref_dot_row(ll_type t, const void *row, const float *x, int64_t n) {
    double acc = 0;
    if (is_plain_float(t)) {
        for (int64_t i0 = 0; i0 < n; i0 += 256) {
            float y[256], s = 0;
            int64_t m = LL_MIN(256, n - i0);
            if (t == LL_TYPE_F32) memcpy(y, (const float *)row + i0, (size_t)m * sizeof(float));
            else ref_dequant_row(t, (const uint16_t *)row + i0, y, m);
            for (int64_t i = 0; i < m; i++) s += y[i] * x[i0 + i];
            acc += s;
        }
        return (float)acc;
    }
    int64_t qk = quant_block_elems(t);
    size_t bb = quant_block_bytes(t);
    const uint8_t *p = row;
    for (int64_t b = 0; b < n / qk; b++) {
        float y[256], s = 0;
        dq_block(t, p + (size_t)b * bb, y);
        for (int64_t i = 0; i < qk; i++) s += y[i] * x[b * qk + i];
        acc += s;
    }
    return (float)acc;
}

float quant_dot_row(ll_type t, const void *row, const float *x, int64_t n) {
    const quant_kernels *k = kern();
    LL_ASSERT(row_ok(t, n));
    if (k->dot[t]) return k->dot[t](row, x, n);
    return ref_dot_row(t, row, x, n);
}

/* ------------------------------------------------------------------ quantize */

/* Q8_0 (byte-exact with llama.cpp's reference and gguf's numpy quantizer):
 * d = amax/127, q = round-half-away(x/d). */
static void qz_q8_0(const float *x, ll_block_q8_0 *b) {
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    b->d = ll_f32_to_f16(d);
    for (int j = 0; j < 32; j++) {
        /* |r| <= 127 unless 1/d overflowed (a subnormal d): then clamp, and 0 * inf -> 0 */
        float r = roundf(x[j] * id);
        b->qs[j] = (int8_t)(r != r ? 0.0f : quant_maxf(quant_minf(r, 127.0f), -127.0f));
    }
}

/* Q4_0 (byte-exact with llama.cpp's reference and gguf's numpy quantizer): the element of
 * largest magnitude maps to code 0 (value -8*d), d = max/-8, q = min(15, trunc(x/d + 8.5)). */
static void qz_q4_0(const float *x, ll_block_q4_0 *b) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    float d = max / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    b->d = ll_f32_to_f16(d);
    for (int j = 0; j < 16; j++) {
        int q0 = LL_MIN(15, (int)(int8_t)(x[j] * id + 8.5f));
        int q1 = LL_MIN(15, (int)(int8_t)(x[j + 16] * id + 8.5f));
        b->qs[j] = (uint8_t)(q0 | (q1 << 4));
    }
}

/*
 * K-quant fits. Every step below is written as a fixed sequence of single-precision IEEE
 * operations per sub-block, so that quant_x86.c can run one sub-block per SIMD lane and write
 * the same bytes (tests/test_quant.c checks it): min/max as quant_minf/quant_maxf (the
 * semantics of minps/maxps), rounding of bounded values by quant_rint_clamp or by one fmaf
 * against QUANT_MAGIC (vfmadd), no other FMA (the build uses -ffp-contract=off; fmaf is exact
 * by definition, so the scalar and vector FMA agree), and every order-dependent sum (of q*x, of
 * x) split into four partial sums over i % 4, combined as (p0 + p1) + (p2 + p3). The sums of
 * codes and of squared codes are exact in fp32 (at most 32 terms of at most 32²), so their
 * order is free.
 */

/* Four partial sums by element index i % 4, combined in a fixed order (see above). */
static inline float sum4(const float p[4]) { return (p[0] + p[1]) + (p[2] + p[3]); }

/* One candidate of the affine search: the codes q = min(rint(v * c), nmax) of the normalised
 * sub-block v = (x - lo) / range (in [0, 1]), rounded by one FMA against QUANT_MAGIC, and their
 * sums sq = sum(q), sqq = sum(q^2) (exact: small integers) and sqx = sum(q * u) over the centred
 * u = (x - mean) / range (four partial sums, FMA). The clamp is skipped where it provably cannot
 * act (c <= nmax + 0.25: v * c < nmax + 0.5 even after rounding), as the SIMD code skips it. */
static inline void quant_affine_pass(const float *v, const float *u, float c, float top, int clamp, float *sq,
                                     float *sqq, float *sqx) {
    float a = 0, aa = 0, p[4] = {0};
    for (int i = 0; i < 32; i++) {
        float t = fmaf(v[i], c, QUANT_MAGIC);
        if (clamp) t = quant_minf(t, top);
        float q = t - QUANT_MAGIC;
        a += q;
        aa += q * q;
        p[i & 3] = fmaf(q, u[i], p[i & 3]);
    }
    *sq = a, *sqq = aa, *sqx = sum4(p);
}

/* The running best of the affine search. A candidate's least-squares fit u ~ su * q + bu has the
 * error sum(u^2) - sum(u)^2 / 32 - num^2 / (32 det), num = 32 sqx - sq su_sum, det = 32 sqq - sq^2,
 * so the best candidate has the largest num^2 / det; compared cross-multiplied (no division),
 * and only with num > 0 (a positive scale) and det > 0 (not all codes equal). The normalisation
 * by the range keeps every product far from overflow and underflow. */
typedef struct { float g, det, num, sq, sqq, sqx, c; } quant_affine_best;

static inline void quant_affine_score(quant_affine_best *b, float c, float sq, float sqq, float sqx, float su) {
    float det = 32.0f * sqq - sq * sq, num = 32.0f * sqx - sq * su, g = num * num;
    if (det > 0 && num > 0 && g * b->det > b->g * det) *b = (quant_affine_best){g, det, num, sq, sqq, sqx, c};
}

/* Fits x[0..32) ~ s*q - m with q in [0, nmax], s >= 0, m >= 0 (the Q4_K / Q5_K sub-block
 * model), minimising the squared error: a grid of 2 QUANT_FIT_HALF + 1 candidate scales
 * range / c around range / nmax, then the best one's two neighbours at half the step; each
 * rounds the codes and is scored by the least-squares refit of (s, m) to them (as llama.cpp's
 * make_qkx2_quants scores its candidates). If that fit's min comes out negative, the codes are
 * refitted with m = 0. Returns s and writes *m_out. */
static float quant_fit_affine(const float *x, int nmax, float *m_out) {
    const float nm = (float)nmax, top = nm + QUANT_MAGIC;
    float lo = 0, hi = x[0], px[4] = {0};
    for (int i = 0; i < 32; i++) {
        lo = quant_minf(x[i], lo);
        hi = quant_maxf(x[i], hi);
        px[i & 3] += x[i];
    }
    if (hi <= lo) { *m_out = -lo; return 0; } /* constant block at <= 0 */
    float mean = sum4(px) * (1.0f / 32.0f), range = hi - lo, ir = 1.0f / range;
    float u[32], v[32], pu[4] = {0}; /* [32] centred and [32] zero-based, both divided by the range */
    for (int i = 0; i < 32; i++) {
        u[i] = (x[i] - mean) * ir;
        v[i] = (x[i] - lo) * ir;
        pu[i & 3] += u[i];
    }
    float su = sum4(pu), sq, sqq, sqx;
    quant_affine_best best = {0, 1.0f, 0, 0, 0, 0, nm};
    for (int k = -QUANT_FIT_HALF; k <= QUANT_FIT_HALF; k++) {
        float c = quant_fit_cand(nmax, k);
        quant_affine_pass(v, u, c, top, c > nm + 0.25f, &sq, &sqq, &sqx);
        quant_affine_score(&best, c, sq, sqq, sqx, su);
    }
    const float c1 = best.c, h = 0.5f * QUANT_FIT_STEP;
    for (int r = -1; r <= 1; r += 2) {
        float c = r < 0 ? c1 - h : c1 + h;
        quant_affine_pass(v, u, c, top, 1, &sq, &sqq, &sqx);
        quant_affine_score(&best, c, sq, sqq, sqx, su);
    }
    /* back to x: s = su' * range, b = bu * range + mean */
    float sn = best.num / best.det, s = sn * range, b = ((su - sn * best.sq) * (1.0f / 32.0f)) * range + mean;
    if (b > 0) { /* the min must stay >= 0: refit s alone, sum(q x) = range sqx + mean sq */
        b = 0;
        s = best.sqq > 0 ? (range * best.sqx + mean * best.sq) / best.sqq : 0;
    }
    if (!(best.g > 0 && s > 0)) { s = range / nm; b = lo; } /* no usable candidate: plain min/max */
    *m_out = -b;
    return s;
}

/* Fits x[0..16) ~ s*q with q in [-nmax, nmax-1] (Q6_K's sub-block model); s may be negative so
 * that the largest magnitude can use the extra negative code. On y = -x / max (|y| <= 1, the
 * largest-magnitude element at -1): codes q = clamp(rint(c y)) for a grid of 5 candidates
 * c = nmax + QUANT_SYM_STEP k and the best one's two neighbours at half the step (7 passes: with
 * 64 levels the coarser grid measured the same RMSE as 21 candidates at step 0.1); for a least-squares s the error is sum(y^2) - sqy^2 / sqq, so
 * the largest sqy^2 / sqq wins (compared cross-multiplied). The upper clamp always acts (c y
 * reaches c >= nmax - 1 at y = 1 when the sign allows), the lower one only for c > nmax + 0.25. */
static inline void quant_sym_pass(const float *y, float c, float top, float bot, int clamp_lo, float *sqq,
                                  float *sqx) {
    float aa = 0, p[4] = {0};
    for (int i = 0; i < 16; i++) {
        float t = quant_minf(fmaf(y[i], c, QUANT_MAGIC), top);
        if (clamp_lo) t = quant_maxf(t, bot);
        float q = t - QUANT_MAGIC;
        aa += q * q;
        p[i & 3] = fmaf(q, y[i], p[i & 3]);
    }
    *sqq = aa, *sqx = sum4(p);
}

typedef struct { float g, sqq, sqx, c; } quant_sym_best;

static inline void quant_sym_score(quant_sym_best *b, float c, float sqq, float sqx) {
    float g = sqx * sqx;
    if (sqq > 0 && g * b->sqq > b->g * sqq) *b = (quant_sym_best){g, sqq, sqx, c};
}

static float quant_fit_symmetric(const float *x, int nmax) {
    float amax = 0, max = 0;
    for (int i = 0; i < 16; i++)
        if (fabsf(x[i]) > amax) { amax = fabsf(x[i]); max = x[i]; }
    if (amax == 0) return 0;
    const float nm = (float)nmax, top = (nm - 1.0f) + QUANT_MAGIC, bot = QUANT_MAGIC - nm, inv = -1.0f / max;
    float y[16], sqq, sqx; /* [16] */
    for (int i = 0; i < 16; i++) y[i] = x[i] * inv;
    quant_sym_best best = {-1.0f, 1.0f, 0, nm};
    for (int k = -QUANT_SYM_HALF; k <= QUANT_SYM_HALF; k++) {
        float c = quant_sym_cand(nmax, k);
        quant_sym_pass(y, c, top, bot, c > nm + 0.25f, &sqq, &sqx);
        quant_sym_score(&best, c, sqq, sqx);
    }
    const float c1 = best.c, h = 0.5f * QUANT_SYM_STEP;
    for (int r = -1; r <= 1; r += 2) {
        float c = r < 0 ? c1 - h : c1 + h;
        quant_sym_pass(y, c, top, bot, 1, &sqq, &sqx);
        quant_sym_score(&best, c, sqq, sqx);
    }
    /* s for x = -max * y; 0 / 1 where no candidate had a code */
    return (best.sqx / best.sqq) * -max;
}

void quant_k4_pack_scales(const float s[8], const float m[8], uint16_t *d_out, uint16_t *dmin_out, uint8_t scales[12],
                          float ds[8], float dm[8]) {
    float smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) { smax = quant_maxf(s[j], smax); mmax = quant_maxf(m[j], mmax); }
    *d_out = ll_f32_to_f16(smax / 63.0f);
    *dmin_out = ll_f32_to_f16(mmax / 63.0f);
    float d = f16(*d_out), dmin = f16(*dmin_out);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0 ? quant_rint_clamp(s[j] / d, 0, 63) : 0);
        mn[j] = (uint8_t)(dmin > 0 ? quant_rint_clamp(m[j] / dmin, 0, 63) : 0);
        ds[j] = d * (float)sc[j];
        dm[j] = dmin * (float)mn[j];
    }
    for (int j = 0; j < 4; j++) { /* inverse of quant_k4_scales */
        scales[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        scales[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        scales[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | ((mn[j + 4] & 0xf) << 4));
    }
}

void quant_q6_pack_scales(const float s[16], ll_block_q6_K *b, float ds[16]) {
    float smax = 0, sabs = 0;
    for (int j = 0; j < 16; j++)
        if (fabsf(s[j]) > sabs) { sabs = fabsf(s[j]); smax = s[j]; }
    /* the largest |scale| maps to int8 -128, as the codes do with -32 */
    b->d = ll_f32_to_f16(smax / -128.0f);
    float d = f16(b->d);
    for (int j = 0; j < 16; j++) {
        b->scales[j] = (int8_t)(d != 0 ? quant_rint_clamp(s[j] / d, -128, 127) : 0);
        ds[j] = d * (float)b->scales[j];
    }
}

/* Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fits 8 sub-blocks of 32, quantizes their
 * scales/mins to 6 bits, then writes the final codes into q[256]. */
static void qz_k4_common(const float *x, int nmax, uint16_t *d, uint16_t *dmin, uint8_t scales[12], uint8_t q[256]) {
    float s[8], m[8], ds[8], dm[8];
    for (int j = 0; j < 8; j++) s[j] = quant_fit_affine(x + 32 * j, nmax, &m[j]);
    quant_k4_pack_scales(s, m, d, dmin, scales, ds, dm);
    for (int j = 0; j < 8; j++)
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = (uint8_t)(ds[j] > 0 ? quant_rint_clamp((x[32 * j + l] + dm[j]) * quant_recip(ds[j]), 0, (float)nmax) : 0);
}

static void qz_q4_K(const float *x, ll_block_q4_K *b) {
    uint8_t q[256];
    qz_k4_common(x, 15, &b->d, &b->dmin, b->scales, q);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b->qs[32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
}

static void qz_q5_K(const float *x, ll_block_q5_K *b) {
    uint8_t q[256];
    qz_k4_common(x, 31, &b->d, &b->dmin, b->scales, q);
    memset(b->qh, 0, sizeof(b->qh));
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            int q1 = q[64 * c + l], q2 = q[64 * c + 32 + l];
            b->qs[32 * c + l] = (uint8_t)((q1 & 0xf) | ((q2 & 0xf) << 4));
            b->qh[l] |= (uint8_t)(((q1 >> 4) << (2 * c)) | ((q2 >> 4) << (2 * c + 1)));
        }
}

static void qz_q6_K(const float *x, ll_block_q6_K *b) {
    float s[16], ds[16];
    for (int j = 0; j < 16; j++) s[j] = quant_fit_symmetric(x + 16 * j, 32);
    quant_q6_pack_scales(s, b, ds);
    memset(b->ql, 0, sizeof(b->ql));
    memset(b->qh, 0, sizeof(b->qh));
    for (int i = 0; i < 256; i++) {
        float dsi = ds[i / 16];
        int q = (dsi != 0 ? quant_rint_clamp(x[i] * quant_recip(dsi), -32, 31) : 0) + 32;
        int h = i / 128, r = i % 128, g = r / 32, l = r % 32;
        b->ql[64 * h + l + 32 * (g & 1)] |= (uint8_t)((q & 0xf) << (g < 2 ? 0 : 4));
        b->qh[32 * h + l] |= (uint8_t)((q >> 4) << (2 * g));
    }
}

/* Q8_K (activations): symmetric, d = amax/127 in fp32, plus per-16 sums of the codes. */
static void qz_q8_K(const float *x, ll_block_q8_K *b) {
    float amax = 0;
    for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, id = d != 0 ? 127.0f / amax : 0.0f;
    b->d = d;
    for (int j = 0; j < 256; j++) b->qs[j] = (int8_t)clampi(rnd(x[j] * id), -127, 127);
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += b->qs[16 * g + l];
        b->bsums[g] = (int16_t)s;
    }
}

/* MLX affine (mx.quantize, mode "affine"): scale = (max - min) / (2^bits - 1), bias = min,
 * q = round((w - bias) / scale). bias and scale are rounded to bf16 first so the codes are
 * chosen against the values that will be stored. */
static void qz_mlx(const float *x, int nmax, uint16_t *scale, uint16_t *bias, uint8_t *q) {
    float lo = x[0], hi = x[0];
    for (int j = 1; j < 64; j++) { lo = fminf(lo, x[j]); hi = fmaxf(hi, x[j]); }
    uint16_t bh = ll_f32_to_bf16(lo);
    float bv = ll_bf16_to_f32(bh);
    uint16_t sh = ll_f32_to_bf16((hi - bv) / (float)nmax);
    float sv = ll_bf16_to_f32(sh);
    *scale = sh;
    *bias = bh;
    for (int j = 0; j < 64; j++) q[j] = (uint8_t)(sv > 0 ? clampi(rnd((x[j] - bv) / sv), 0, nmax) : 0);
}

static void qz_mlx4(const float *x, ll_block_mlx4 *b) {
    uint8_t q[64];
    qz_mlx(x, 15, &b->scale, &b->bias, q);
    for (int j = 0; j < 32; j++) b->qs[j] = (uint8_t)(q[2 * j] | (q[2 * j + 1] << 4));
}

static void qz_mlx8(const float *x, ll_block_mlx8 *b) { qz_mlx(x, 255, &b->scale, &b->bias, b->qs); }

size_t quant_quantize_row(ll_type t, const float *src, void *dst, int64_t n) {
    const quant_kernels *k = kern();
    LL_ASSERT(row_ok(t, n));
    size_t bytes = quant_row_bytes(t, n);
    switch (t) {
    case LL_TYPE_F32: memcpy(dst, src, bytes); return bytes;
    case LL_TYPE_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = ll_f32_to_f16(src[i]);
        return bytes;
    case LL_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = ll_f32_to_bf16(src[i]);
        return bytes;
    default: break;
    }
    if (k->quant[t]) { /* SIMD kernels: the same bytes (tests/test_quant.c) */
        k->quant[t](src, dst, n);
        return bytes;
    }
    int64_t qk = quant_block_elems(t);
    size_t bb = quant_block_bytes(t);
    uint8_t *p = dst;
    for (int64_t i = 0; i < n / qk; i++) {
        const float *x = src + i * qk;
        void *b = p + (size_t)i * bb;
        switch (t) {
        case LL_TYPE_Q4_0: qz_q4_0(x, b); break;
        case LL_TYPE_Q8_0: qz_q8_0(x, b); break;
        case LL_TYPE_Q4_K: qz_q4_K(x, b); break;
        case LL_TYPE_Q5_K: qz_q5_K(x, b); break;
        case LL_TYPE_Q6_K: qz_q6_K(x, b); break;
        case LL_TYPE_Q8_K: qz_q8_K(x, b); break;
        case LL_TYPE_MLX4: qz_mlx4(x, b); break;
        case LL_TYPE_MLX8: qz_mlx8(x, b); break;
        default: LL_ABORT("quant: cannot quantize to %s", quant_type_name(t));
        }
    }
    return bytes;
}

/* ------------------------------------------------------------------ pre-quantized activations */

ll_type quant_vec_dot_type(ll_type t) {
    switch (t) {
    case LL_TYPE_Q4_K: case LL_TYPE_Q5_K: case LL_TYPE_Q6_K: return LL_TYPE_Q8_K;
    case LL_TYPE_Q4_0: case LL_TYPE_Q8_0: return LL_TYPE_Q8_0;
    default: return LL_TYPE_F32;
    }
}

size_t quant_act_bytes(ll_type t, int64_t n) { return quant_row_bytes(quant_vec_dot_type(t), n); }

void quant_quantize_act(ll_type t, const float *x, void *act, int64_t n) {
    const quant_kernels *k = kern();
    ll_type at = quant_vec_dot_type(t);
    LL_ASSERT(row_ok(t, n) && row_ok(at, n));
    if (k->quant_act[at]) { k->quant_act[at](x, act, n); return; }
    quant_quantize_row(at, x, act, n);
}

static float ref_dotq_q4_0(const ll_block_q4_0 *w, const ll_block_q8_0 *a, int64_t nb) {
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += ((w[b].qs[j] & 0xf) - 8) * a[b].qs[j] + ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + 16];
        acc += f16(w[b].d) * f16(a[b].d) * (float)s;
    }
    return acc;
}

static float ref_dotq_q8_0(const ll_block_q8_0 *w, const ll_block_q8_0 *a, int64_t nb) {
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        int s = 0;
        for (int j = 0; j < 32; j++) s += w[b].qs[j] * a[b].qs[j];
        acc += f16(w[b].d) * f16(a[b].d) * (float)s;
    }
    return acc;
}

/* Q4_K/Q5_K · Q8_K = sum_j d*sc_j*sum(q*a) - dmin*m_j*sum(a), sum(a) from the bsums. */
static float ref_dotq_q4_K(const ll_block_q4_K *w, const ll_block_q8_K *a, int64_t nb) {
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t sc[8], mn[8];
        quant_k4_scales(w[b].scales, sc, mn);
        int sq = 0, sm = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = w[b].qs + 32 * (j / 2);
            int s = 0;
            for (int l = 0; l < 32; l++) s += ((j & 1) ? q[l] >> 4 : q[l] & 0xf) * a[b].qs[32 * j + l];
            sq += sc[j] * s;
            sm += mn[j] * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        }
        acc += a[b].d * (f16(w[b].d) * (float)sq - f16(w[b].dmin) * (float)sm);
    }
    return acc;
}

static float ref_dotq_q5_K(const ll_block_q5_K *w, const ll_block_q8_K *a, int64_t nb) {
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t sc[8], mn[8];
        quant_k4_scales(w[b].scales, sc, mn);
        int sq = 0, sm = 0;
        for (int j = 0; j < 8; j++) {
            const uint8_t *q = w[b].qs + 32 * (j / 2);
            int s = 0;
            for (int l = 0; l < 32; l++) {
                int v = ((j & 1) ? q[l] >> 4 : q[l] & 0xf) | (((w[b].qh[l] >> j) & 1) << 4);
                s += v * a[b].qs[32 * j + l];
            }
            sq += sc[j] * s;
            sm += mn[j] * (a[b].bsums[2 * j] + a[b].bsums[2 * j + 1]);
        }
        acc += a[b].d * (f16(w[b].d) * (float)sq - f16(w[b].dmin) * (float)sm);
    }
    return acc;
}

static float ref_dotq_q6_K(const ll_block_q6_K *w, const ll_block_q8_K *a, int64_t nb) {
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        int sq = 0;
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += q6_code(&w[b], 16 * g + l) * a[b].qs[16 * g + l];
            sq += w[b].scales[g] * s;
        }
        acc += a[b].d * f16(w[b].d) * (float)sq;
    }
    return acc;
}

static float ref_dot_row_q(ll_type t, const void *row, const void *act, int64_t n) {
    switch (t) {
    case LL_TYPE_Q4_0: return ref_dotq_q4_0(row, act, n / LL_QK4_0);
    case LL_TYPE_Q8_0: return ref_dotq_q8_0(row, act, n / LL_QK8_0);
    case LL_TYPE_Q4_K: return ref_dotq_q4_K(row, act, n / LL_QK_K);
    case LL_TYPE_Q5_K: return ref_dotq_q5_K(row, act, n / LL_QK_K);
    case LL_TYPE_Q6_K: return ref_dotq_q6_K(row, act, n / LL_QK_K);
    default: return quant_dot_row(t, row, act, n); /* F32 activations */
    }
}

float quant_dot_row_q(ll_type t, const void *row, const void *act, int64_t n) {
    const quant_kernels *k = kern();
    LL_ASSERT(row_ok(t, n));
    if (k->dot_q[t]) return k->dot_q[t](row, act, n);
    return ref_dot_row_q(t, row, act, n);
}

void quant_dot_rows_q(ll_type t, const void *rows, size_t row_stride, int64_t nrows, const void *act, int64_t n,
                      float *y) {
    const quant_kernels *k = kern();
    LL_ASSERT(row_ok(t, n) && nrows >= 0);
    const uint8_t *p = rows;
    quant_dotq_fn f = k->dot_q[t];
    if (f)
        for (int64_t r = 0; r < nrows; r++) y[r] = f(p + (size_t)r * row_stride, act, n);
    else
        for (int64_t r = 0; r < nrows; r++) y[r] = ref_dot_row_q(t, p + (size_t)r * row_stride, act, n);
}
