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
} quant_kernels;

enum { QUANT_SIMD_SCALAR = 0, QUANT_SIMD_AVX2 = 1, QUANT_SIMD_AVX512 = 2 };

/* Fills k with the best kernels this CPU supports up to max_level; returns the QUANT_SIMD_*
 * level installed. */
int quant_x86_install(quant_kernels *k, int max_level);

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
