/*
 * quant_internal.h — shared between the scalar reference (quant_ref.c) and the SIMD paths
 * (quant_x86.c): the kernel table that quant_init() fills, and small helpers. Not public.
 */
#ifndef LILAC_QUANT_INTERNAL_H
#define LILAC_QUANT_INTERNAL_H

#include "quant.h"

typedef void (*quant_dequant_fn)(const void *src, float *dst, int64_t n);
typedef float (*quant_dot_fn)(const void *row, const float *x, int64_t n);
typedef float (*quant_dotq_fn)(const void *row, const void *act, int64_t n);
typedef void (*quant_quant_fn)(const float *src, void *dst, int64_t n);

/* Per-type fast kernels; a NULL entry falls back to the scalar reference. */
typedef struct quant_kernels {
    quant_dequant_fn dequant[LL_TYPE_COUNT_];
    quant_dot_fn dot[LL_TYPE_COUNT_];   /* fp32 activations */
    quant_dotq_fn dot_q[LL_TYPE_COUNT_]; /* pre-quantized activations (Q8_K / Q8_0) */
    quant_quant_fn quant_act[LL_TYPE_COUNT_]; /* indexed by the activation type (Q8_K, Q8_0) */
    quant_quant_fn quant[LL_TYPE_COUNT_];     /* weight rows; bit-identical to the reference */
} quant_kernels;

enum { QUANT_SIMD_SCALAR = 0, QUANT_SIMD_AVX2 = 1, QUANT_SIMD_AVX512 = 2 };

/* Fills k with the best kernels this CPU supports up to max_level; returns the QUANT_SIMD_*
 * level installed. */
int quant_x86_install(quant_kernels *k, int max_level);

/* ---- K-quant quantization, shared by quant_ref.c and quant_x86.c so both write the same bytes ---- */

/* min / max with the semantics of x86 minps / maxps: the second operand unless the first is
 * strictly smaller / larger (so NaN and -0 / +0 ties resolve the same in scalar and SIMD code). */
static inline float quant_minf(float a, float b) { return a < b ? a : b; }
static inline float quant_maxf(float a, float b) { return a > b ? a : b; }

/* v clamped to [lo, hi] (whole numbers, |.| < 2^22; NaN goes to hi), then rounded to nearest
 * even by adding and subtracting 1.5 * 2^23 — exact in fp32, equal to cvtps2dq's rounding. */
static inline int quant_rint_clamp(float v, float lo, float hi) {
    v = quant_maxf(quant_minf(v, hi), lo);
    return (int)((v + 12582912.0f) - 12582912.0f);
}

/* 1.5 * 2^23: fmaf(a, b, QUANT_MAGIC) - QUANT_MAGIC is a*b rounded once to the nearest integer
 * (ties to even) whenever |a*b| < 2^22, one FMA instead of a multiply, a rounding and a convert. */
#define QUANT_MAGIC 12582912.0f

/* The K-quant scale searches (quant_fit_affine / quant_fit_symmetric in quant_ref.c, vectorized in
 * quant_x86_kfit.h): candidate code ranges c = nmax + QUANT_FIT_STEP * k for |k| <= QUANT_FIT_HALF
 * (scale = range / c), then the best one's neighbours c -+ QUANT_FIT_STEP / 2. */
#define QUANT_FIT_HALF 3
#define QUANT_FIT_STEP 0.34f
static inline float quant_fit_cand(int nmax, int k) { return (float)nmax + QUANT_FIT_STEP * (float)k; }
/* The same for Q6_K's symmetric fit (64 levels: a coarser search costs less there) */
#define QUANT_SYM_HALF 2
#define QUANT_SYM_STEP 0.5f
static inline float quant_sym_cand(int nmax, int k) { return (float)nmax + QUANT_SYM_STEP * (float)k; }

/* Q4_K / Q5_K: quantizes the 8 sub-block fits (scales s[j] >= 0, mins m[j] >= 0) to 6 bits
 * against fp16 super-block scales d = max(s)/63, dmin = max(m)/63; writes d, dmin, the packed
 * 12-byte field, and ds[j] = d*sc[j], dm[j] = dmin*mn[j], which the codes are rounded against:
 * q = ds > 0 ? quant_rint_clamp((x + dm) * quant_recip(ds), 0, nmax) : 0. */
void quant_k4_pack_scales(const float s[8], const float m[8], uint16_t *d, uint16_t *dmin, uint8_t scales[12],
                          float ds[8], float dm[8]);
/* 1 / ds where ds != 0, else 0: the codes are rounded from products with it (one multiply per
 * element rather than a division) */
static inline float quant_recip(float ds) { return ds != 0 ? 1.0f / ds : 0.0f; }
/* Q6_K: int8 scales of the 16 sub-block fits against fp16 d = s_maxabs/-128; writes b->d,
 * b->scales and ds[j] = d*scales[j]; codes: q = (ds != 0 ? quant_rint_clamp(x * quant_recip(ds), -32, 31) : 0) + 32. */
void quant_q6_pack_scales(const float s[16], ll_block_q6_K *b, float ds[16]);

/* Unpacks the 12-byte K-quant scale field into 8 six-bit scales and 8 six-bit mins. */
static inline void quant_k4_scales(const uint8_t s[12], uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0xf) | ((s[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

#endif
