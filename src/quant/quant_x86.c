/*
 * quant_x86.c — AVX2/FMA (and AVX-512 VNNI where it pays) kernels for the block formats,
 * selected at run time by quant_x86_install() with __builtin_cpu_supports. Each kernel is
 * compiled for its ISA with __attribute__((target)), so the library itself builds without
 * -march flags and runs on any x86-64; on other CPUs (or other architectures) the table stays
 * empty and quant_ref.c's scalar code runs.
 *
 * Decode (matrix-vector) uses integer dots against activations quantized once: K-quants against
 * Q8_K (maddubs: u8 codes x s8 activations -> s16 pairs, madd by the sub-block scale -> s32),
 * Q4_0/Q8_0 against Q8_0 (sign trick so maddubs sees |w| and sign-adjusted activations). The
 * K-quant mins and Q6_K's -32 offset are folded in with the activation block sums (bsums), so
 * the inner loops only handle unsigned codes. With AVX-512 VNNI, the K-quant decode dots use
 * vpdpbusd on 512-bit registers instead (see vnni_dotq_q4_K). All decode kernels prefetch the
 * weight stream ahead of use.
 *
 * Dequantization kernels compute exactly the scalar expressions (mul then sub, no FMA), so
 * they are bit-identical to the reference; the fp32 dots differ from it only by rounding
 * (summation order, FMA), the integer dots only by the order of the final fp32 sums.
 *
 * Quantization (`lilac convert`): Q4_K / Q5_K / Q6_K / Q8_0 weight rows, bit-identical to the
 * reference — the K-quant sub-block fits run one sub-block per lane (quant_x86_kfit.h, 8 lanes
 * on AVX2, 16 on AVX-512), see "quantization" below.
 */
#include "quant_internal.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <immintrin.h>

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define T_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* ------------------------------------------------------------------ helpers */

T_AVX2 static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

T_AVX2 static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* 8 bf16 -> 8 fp32 */
T_AVX2 static inline __m256 bf16x8(const uint16_t *p) {
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

/* Unpacked scales and mins of a Q4_K/Q5_K block (see quant_k4_scales), via 32-bit masks. */
static inline void k4_scales_fast(const uint8_t s[12], uint8_t sc[8], uint8_t mn[8]) {
    uint32_t u[3], o[4];
    memcpy(u, s, 12);
    o[0] = u[0] & 0x3f3f3f3fu;
    o[1] = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u);
    o[2] = u[1] & 0x3f3f3f3fu;
    o[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u);
    memcpy(sc, o, 8);
    memcpy(mn, o + 2, 8);
}

/* d*sc[j] and dmin*mn[j] as floats in memory, so each use is one broadcast load instead of a
 * scalar int->float conversion, multiply and broadcast (which dominated the fp32 dots). */
T_AVX2 static inline void k4_scale_floats(const ll_block_q4_K *b, float ds[8], float dm[8]) {
    uint8_t sc[8], mn[8];
    k4_scales_fast(b->scales, sc, mn);
    __m256 s = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc)));
    __m256 m = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn)));
    _mm256_storeu_ps(ds, _mm256_mul_ps(s, _mm256_set1_ps(h2f(b->d))));
    _mm256_storeu_ps(dm, _mm256_mul_ps(m, _mm256_set1_ps(h2f(b->dmin))));
}

/* d*scales[g] for the 16 Q6_K scale groups */
T_AVX2 static inline void q6_scale_floats(const ll_block_q6_K *b, float ds[16]) {
    __m128i s8 = _mm_loadu_si128((const __m128i *)b->scales);
    __m256 d = _mm256_set1_ps(h2f(b->d));
    _mm256_storeu_ps(ds, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), d));
    _mm256_storeu_ps(ds + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), d));
}

/* ------------------------------------------------------------------ K-quant code unpacking */

/* Q4_K codes of 64-element chunk c: elements 64c..64c+31 (lo), 64c+32..64c+63 (hi). */
T_AVX2 static inline void q4k_chunk(const ll_block_q4_K *b, int c, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
}

/* Q5_K: as Q4_K plus bit (2c) / (2c+1) of qh[l] as the 5th bit. */
T_AVX2 static inline void q5k_chunk(const ll_block_q5_K *b, __m256i qh, int c, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
    __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
    __m256i k1 = _mm256_set1_epi8((char)(1 << (2 * c))), k2 = _mm256_set1_epi8((char)(2 << (2 * c)));
    __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, k1), k1), b4);
    __m256i h2 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, k2), k2), b4);
    *lo = _mm256_or_si256(_mm256_and_si256(q, m4), h1);
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h2);
}

/* Q6_K unsigned codes (0..63) of half h: q[k] = elements 128h + 32k .. +31. */
T_AVX2 static inline void q6k_half(const ll_block_q6_K *b, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30);
    __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
    __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    /* 16-bit shifts leak bits across byte boundaries only into positions the masks clear */
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), m2));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), m2));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(hb, m2));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(hb, 2), m2));
}

/* pshufb masks: group G (32 elements) of a Q6_K block uses scales 2G (first 16) and 2G+1. */
static const uint8_t k_q6_scale_shuf[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},          {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},          {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},          {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
    {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15},
};

/* ------------------------------------------------------------------ integer dots (decode) */

/* Scales and mins of a Q4_K/Q5_K block as 8 int16 each: .sc in int16 lanes 0-7 of both
 * 128-bit halves (for pshufb broadcasts), .mn duplicated pairwise (mn0 mn0 mn1 mn1 ...) to
 * meet the 16 bsums in one madd. */
T_AVX2 static inline void k4_scale_vecs(const uint8_t s[12], __m256i *sc, __m256i *mn2) {
    uint32_t u[3];
    memcpy(u, s, 12);
    uint32_t s0 = u[0] & 0x3f3f3f3fu, s1 = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 2) & 0x30303030u);
    uint32_t m0 = u[1] & 0x3f3f3f3fu, m1 = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 2) & 0x30303030u);
    __m128i v = _mm_set_epi32((int)m1, (int)m0, (int)s1, (int)s0);
    *sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(v));
    __m128i m = _mm_unpackhi_epi8(v, v); /* mn0 mn0 mn1 mn1 ... as bytes */
    *mn2 = _mm256_cvtepu8_epi16(m);
}

/* pshufb masks selecting int16 lane j of a register into every int16 lane */
static const uint8_t k_bcast16[8][32] = {
#define B16(j) {2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1, \
                2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1,2*j,2*j+1}
    B16(0), B16(1), B16(2), B16(3), B16(4), B16(5), B16(6), B16(7),
#undef B16
};

/* Software prefetch of the weight stream: the hardware prefetchers alone left the decode
 * kernels well short of the streaming bandwidth (measured: Q4_K 6.3 -> 8.3 GB/s on one core). */
#ifndef PREFETCH_AHEAD
#define PREFETCH_AHEAD 640 /* bytes of the weight row to request ahead of use */
#endif

static inline void prefetch_ahead(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)p + PREFETCH_AHEAD + o, _MM_HINT_T0);
}

T_AVX2 static float avx2_dotq_q4_K(const void *row, const void *act, int64_t n) {
    const ll_block_q4_K *w = row;
    const ll_block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < n / LL_QK_K; b++) {
        _mm_prefetch((const char *)&w[b] + PREFETCH_AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)&w[b] + PREFETCH_AHEAD + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)&w[b] + PREFETCH_AHEAD + 128, _MM_HINT_T0);
        __m256i sc, mn2;
        k4_scale_vecs(w[b].scales, &sc, &mn2);
        float da = a[b].d;
        __m256i pm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[b].bsums), mn2);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(da * h2f(w[b].dmin)), _mm256_cvtepi32_ps(pm), accm);
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a[b].qs + 64 * c)));
            __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a[b].qs + 64 * c + 32)));
            __m256i c0 = _mm256_shuffle_epi8(sc, _mm256_loadu_si256((const __m256i *)k_bcast16[2 * c]));
            __m256i c1 = _mm256_shuffle_epi8(sc, _mm256_loadu_si256((const __m256i *)k_bcast16[2 * c + 1]));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, c0));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, c1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(da * h2f(w[b].d)), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
    }
    return hsum_ps(_mm256_sub_ps(acc, accm));
}

T_AVX2 static float avx2_dotq_q5_K(const void *row, const void *act, int64_t n) {
    const ll_block_q5_K *w = row;
    const ll_block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK_K; b++) {
        prefetch_ahead(&w[b], sizeof(w[b]));
        __m256i sc, mn2;
        k4_scale_vecs(w[b].scales, &sc, &mn2);
        float d = a[b].d * h2f(w[b].d), dmin = a[b].d * h2f(w[b].dmin);
        __m256i pm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[b].bsums), mn2);
        accm = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(pm), accm);
        __m256i qh = _mm256_loadu_si256((const __m256i *)w[b].qh);
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            q5k_chunk(&w[b], qh, c, &lo, &hi);
            __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a[b].qs + 64 * c)));
            __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a[b].qs + 64 * c + 32)));
            __m256i c0 = _mm256_shuffle_epi8(sc, _mm256_loadu_si256((const __m256i *)k_bcast16[2 * c]));
            __m256i c1 = _mm256_shuffle_epi8(sc, _mm256_loadu_si256((const __m256i *)k_bcast16[2 * c + 1]));
            s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p0, c0));
            s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p1, c1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_add_epi32(s0, s1)), acc);
    }
    return hsum_ps(_mm256_sub_ps(acc, accm));
}

T_AVX2 static float avx2_dotq_q6_K(const void *row, const void *act, int64_t n) {
    const ll_block_q6_K *w = row;
    const ll_block_q8_K *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK_K; b++) {
        prefetch_ahead(&w[b], sizeof(w[b]));
        __m128i sc8 = _mm_loadu_si128((const __m128i *)w[b].scales);
        /* the -32 code offset: -32 * sum_g sc[g] * bsums[g] */
        __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[b].bsums), _mm256_cvtepi8_epi16(sc8));
        __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
        _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_half(&w[b], h, q);
            _Pragma("GCC unroll 8") for (int k = 0; k < 4; k++) {
                int g = 4 * h + k;
                __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(a[b].qs + 32 * g)));
                __m256i sv = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, _mm_loadu_si128((const __m128i *)k_q6_scale_shuf[g])));
                if (k & 1) s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(p, sv));
                else s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(p, sv));
            }
        }
        __m256i si = _mm256_sub_epi32(_mm256_add_epi32(s0, s1), _mm256_slli_epi32(off, 5));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(a[b].d * h2f(w[b].d)), _mm256_cvtepi32_ps(si), acc);
    }
    return hsum_ps(acc);
}

/* signed x signed 32-element dot -> 8 int32 partial sums */
T_AVX2 static inline __m256i dot_s8(__m256i x, __m256i y) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

T_AVX2 static float avx2_dotq_q8_0(const void *row, const void *act, int64_t n) {
    const ll_block_q8_0 *w = row, *a = act;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t nb = n / LL_QK8_0, b = 0;
    for (; b + 1 < nb; b += 2) {
        prefetch_ahead(&w[b], 2 * sizeof(w[b]));
        __m256i p0 = dot_s8(_mm256_loadu_si256((const __m256i *)w[b].qs), _mm256_loadu_si256((const __m256i *)a[b].qs));
        __m256i p1 = dot_s8(_mm256_loadu_si256((const __m256i *)w[b + 1].qs),
                            _mm256_loadu_si256((const __m256i *)a[b + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b + 1].d) * h2f(a[b + 1].d)), _mm256_cvtepi32_ps(p1), acc1);
    }
    for (; b < nb; b++) {
        __m256i p0 = dot_s8(_mm256_loadu_si256((const __m256i *)w[b].qs), _mm256_loadu_si256((const __m256i *)a[b].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p0), acc0);
    }
    return hsum_ps(_mm256_add_ps(acc0, acc1));
}

/* 32 Q4_0 codes as signed bytes (-8..7), in element order */
T_AVX2 static inline __m256i q4_0_codes(const ll_block_q4_0 *b) {
    __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    __m128i m4 = _mm_set1_epi8(0x0f);
    __m256i v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
}

T_AVX2 static float avx2_dotq_q4_0(const void *row, const void *act, int64_t n) {
    const ll_block_q4_0 *w = row;
    const ll_block_q8_0 *a = act;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK4_0; b++) {
        prefetch_ahead(&w[b], sizeof(w[b]));
        __m256i p = dot_s8(q4_0_codes(&w[b]), _mm256_loadu_si256((const __m256i *)a[b].qs));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d) * h2f(a[b].d)), _mm256_cvtepi32_ps(p), acc);
    }
    return hsum_ps(acc);
}

/* ------------------------------------------------------------------ fp32-activation dots */

T_AVX2 static float avx2_dot_f32(const void *row, const float *x, int64_t n) {
    const float *w = row;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += w[i] * x[i];
    return s;
}

T_AVX2 static float avx2_dot_bf16(const void *row, const float *x, int64_t n) {
    const uint16_t *w = row;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        prefetch_ahead(w + i, 64);
        a0 = _mm256_fmadd_ps(bf16x8(w + i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(bf16x8(w + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(bf16x8(w + i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(bf16x8(w + i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    float s = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += ll_bf16_to_f32(w[i]) * x[i];
    return s;
}

T_AVX2 static float avx2_dot_f16(const void *row, const float *x, int64_t n) {
    const uint16_t *w = row;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 8))), _mm256_loadu_ps(x + i + 8), a1);
    }
    float s = hsum_ps(_mm256_add_ps(a0, a1));
    for (; i < n; i++) s += h2f(w[i]) * x[i];
    return s;
}

/* sum over 32 elements of codes (signed bytes) times x, as 8 partial sums */
T_AVX2 static inline __m256 dot32_s8(__m256i q, const float *x, __m256 acc) {
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), _mm256_loadu_ps(x), acc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), _mm256_loadu_ps(x + 8), acc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), _mm256_loadu_ps(x + 16), acc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), _mm256_loadu_ps(x + 24), acc);
    return acc;
}

T_AVX2 static inline __m256 sum32(const float *x) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8)),
                         _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24)));
}

T_AVX2 static float avx2_dot_q8_0(const void *row, const float *x, int64_t n) {
    const ll_block_q8_0 *w = row;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK8_0; b++) {
        __m256 s = dot32_s8(_mm256_loadu_si256((const __m256i *)w[b].qs), x + 32 * b, _mm256_setzero_ps());
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d)), s, acc);
    }
    return hsum_ps(acc);
}

T_AVX2 static float avx2_dot_q4_0(const void *row, const float *x, int64_t n) {
    const ll_block_q4_0 *w = row;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK4_0; b++) {
        __m256 s = dot32_s8(q4_0_codes(&w[b]), x + 32 * b, _mm256_setzero_ps());
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(w[b].d)), s, acc);
    }
    return hsum_ps(acc);
}

/* K-quants with fp32 x: per sub-block of 32, (d*sc)*sum(q*x) - (dmin*mn)*sum(x). Codes < 128,
 * so the unsigned bytes can go through the signed widening. */
T_AVX2 static float avx2_dot_q4_K(const void *row, const float *x, int64_t n) {
    const ll_block_q4_K *w = row;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK_K; b++, x += LL_QK_K) {
        float ds[8], dm[8];
        k4_scale_floats(&w[b], ds, dm);
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            q4k_chunk(&w[b], c, &lo, &hi);
            __m256 s0 = dot32_s8(lo, x + 64 * c, _mm256_setzero_ps());
            __m256 s1 = dot32_s8(hi, x + 64 * c + 32, _mm256_setzero_ps());
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[2 * c]), s0, acc);
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[2 * c + 1]), s1, acc);
            acc = _mm256_fnmadd_ps(_mm256_broadcast_ss(&dm[2 * c]), sum32(x + 64 * c), acc);
            acc = _mm256_fnmadd_ps(_mm256_broadcast_ss(&dm[2 * c + 1]), sum32(x + 64 * c + 32), acc);
        }
    }
    return hsum_ps(acc);
}

T_AVX2 static float avx2_dot_q5_K(const void *row, const float *x, int64_t n) {
    const ll_block_q5_K *w = row;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK_K; b++, x += LL_QK_K) {
        float ds[8], dm[8];
        k4_scale_floats((const ll_block_q4_K *)(const void *)&w[b], ds, dm); /* same head layout */
        __m256i qh = _mm256_loadu_si256((const __m256i *)w[b].qh);
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            q5k_chunk(&w[b], qh, c, &lo, &hi);
            __m256 s0 = dot32_s8(lo, x + 64 * c, _mm256_setzero_ps());
            __m256 s1 = dot32_s8(hi, x + 64 * c + 32, _mm256_setzero_ps());
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[2 * c]), s0, acc);
            acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[2 * c + 1]), s1, acc);
            acc = _mm256_fnmadd_ps(_mm256_broadcast_ss(&dm[2 * c]), sum32(x + 64 * c), acc);
            acc = _mm256_fnmadd_ps(_mm256_broadcast_ss(&dm[2 * c + 1]), sum32(x + 64 * c + 32), acc);
        }
    }
    return hsum_ps(acc);
}

/* sum over 16 signed-byte codes times x (one Q6_K scale group) */
T_AVX2 static inline __m256 dot16_s8(__m128i q, const float *x) {
    __m256 a = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), _mm256_loadu_ps(x));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), _mm256_loadu_ps(x + 8), a);
}

T_AVX2 static float avx2_dot_q6_K(const void *row, const float *x, int64_t n) {
    const ll_block_q6_K *w = row;
    __m256 acc = _mm256_setzero_ps();
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < n / LL_QK_K; b++, x += LL_QK_K) {
        float ds[16];
        q6_scale_floats(&w[b], ds);
        _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_half(&w[b], h, q);
            _Pragma("GCC unroll 8") for (int k = 0; k < 4; k++) {
                int g = 4 * h + k; /* elements 32g..32g+31, scales 2g and 2g+1 */
                __m256i s = _mm256_sub_epi8(q[k], k32);
                __m256 p0 = dot16_s8(_mm256_castsi256_si128(s), x + 32 * g);
                __m256 p1 = dot16_s8(_mm256_extracti128_si256(s, 1), x + 32 * g + 16);
                acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[2 * g]), p0, acc);
                acc = _mm256_fmadd_ps(_mm256_broadcast_ss(&ds[2 * g + 1]), p1, acc);
            }
        }
    }
    return hsum_ps(acc);
}

/* MLX: per group of 64, scale*sum(q*x) + bias*sum(x). */
T_AVX2 static float avx2_dot_mlx4(const void *row, const float *x, int64_t n) {
    const ll_block_mlx4 *w = row;
    __m256 acc = _mm256_setzero_ps();
    const __m128i m4 = _mm_set1_epi8(0x0f);
    for (int64_t b = 0; b < n / LL_QK_MLX; b++, x += LL_QK_MLX) {
        __m256 sq = _mm256_setzero_ps(), sx = _mm256_setzero_ps();
        for (int h = 0; h < 2; h++) { /* 16 bytes -> elements 32h..32h+31 */
            __m128i q = _mm_loadu_si128((const __m128i *)(w[b].qs + 16 * h));
            __m128i lo = _mm_and_si128(q, m4), hi = _mm_and_si128(_mm_srli_epi16(q, 4), m4);
            __m256i v = _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
            sq = dot32_s8(v, x + 32 * h, sq);
            sx = _mm256_add_ps(sx, sum32(x + 32 * h));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ll_bf16_to_f32(w[b].scale)), sq, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ll_bf16_to_f32(w[b].bias)), sx, acc);
    }
    return hsum_ps(acc);
}

T_AVX2 static float avx2_dot_mlx8(const void *row, const float *x, int64_t n) {
    const ll_block_mlx8 *w = row;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK_MLX; b++, x += LL_QK_MLX) {
        __m256 sq = _mm256_setzero_ps(), sx = _mm256_setzero_ps();
        for (int k = 0; k < 8; k++) {
            __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(w[b].qs + 8 * k)));
            __m256 xv = _mm256_loadu_ps(x + 8 * k);
            sq = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q), xv, sq);
            sx = _mm256_add_ps(sx, xv);
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ll_bf16_to_f32(w[b].scale)), sq, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(ll_bf16_to_f32(w[b].bias)), sx, acc);
    }
    return hsum_ps(acc);
}

/* ------------------------------------------------------------------ dequantize (prefill) */

/* y[0..32) = ds * q - dm for 32 codes (bytes < 128), computed as mul then sub like the
 * scalar code so results are bit-identical */
T_AVX2 static inline void store32_affine(__m256i q, float ds, float dm, float *y) {
    __m256 vd = _mm256_set1_ps(ds), vm = _mm256_set1_ps(dm);
    __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[k]));
        _mm256_storeu_ps(y + 8 * k, _mm256_sub_ps(_mm256_mul_ps(vd, v), vm));
    }
}

T_AVX2 static void avx2_dequant_q4_K(const void *src, float *y, int64_t n) {
    const ll_block_q4_K *w = src;
    for (int64_t b = 0; b < n / LL_QK_K; b++, y += LL_QK_K) {
        uint8_t sc[8], mn[8];
        k4_scales_fast(w[b].scales, sc, mn);
        float d = h2f(w[b].d), dmin = h2f(w[b].dmin);
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            q4k_chunk(&w[b], c, &lo, &hi);
            store32_affine(lo, d * sc[2 * c], dmin * mn[2 * c], y + 64 * c);
            store32_affine(hi, d * sc[2 * c + 1], dmin * mn[2 * c + 1], y + 64 * c + 32);
        }
    }
}

T_AVX2 static void avx2_dequant_q5_K(const void *src, float *y, int64_t n) {
    const ll_block_q5_K *w = src;
    for (int64_t b = 0; b < n / LL_QK_K; b++, y += LL_QK_K) {
        uint8_t sc[8], mn[8];
        k4_scales_fast(w[b].scales, sc, mn);
        float d = h2f(w[b].d), dmin = h2f(w[b].dmin);
        __m256i qh = _mm256_loadu_si256((const __m256i *)w[b].qh);
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            __m256i lo, hi;
            q5k_chunk(&w[b], qh, c, &lo, &hi);
            store32_affine(lo, d * sc[2 * c], dmin * mn[2 * c], y + 64 * c);
            store32_affine(hi, d * sc[2 * c + 1], dmin * mn[2 * c + 1], y + 64 * c + 32);
        }
    }
}

T_AVX2 static void avx2_dequant_q6_K(const void *src, float *y, int64_t n) {
    const ll_block_q6_K *w = src;
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < n / LL_QK_K; b++, y += LL_QK_K) {
        float d = h2f(w[b].d);
        _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_half(&w[b], h, q);
            _Pragma("GCC unroll 8") for (int k = 0; k < 4; k++) {
                int g = 4 * h + k;
                __m256i s = _mm256_sub_epi8(q[k], k32);
                __m128i parts[4] = {_mm256_castsi256_si128(s), _mm_srli_si128(_mm256_castsi256_si128(s), 8),
                                    _mm256_extracti128_si256(s, 1), _mm_srli_si128(_mm256_extracti128_si256(s, 1), 8)};
                for (int p = 0; p < 4; p++) { /* scalar order: (d * sc) * q */
                    __m256 ds = _mm256_set1_ps(d * (float)w[b].scales[2 * g + p / 2]);
                    __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[p]));
                    _mm256_storeu_ps(y + 32 * g + 8 * p, _mm256_mul_ps(ds, v));
                }
            }
        }
    }
}

T_AVX2 static void avx2_dequant_q8_0(const void *src, float *y, int64_t n) {
    const ll_block_q8_0 *w = src;
    for (int64_t b = 0; b < n / LL_QK8_0; b++, y += 32) {
        __m256 d = _mm256_set1_ps(h2f(w[b].d));
        for (int k = 0; k < 4; k++) {
            __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(w[b].qs + 8 * k))));
            _mm256_storeu_ps(y + 8 * k, _mm256_mul_ps(d, v));
        }
    }
}

T_AVX2 static void avx2_dequant_bf16(const void *src, float *y, int64_t n) {
    const uint16_t *w = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, bf16x8(w + i));
    for (; i < n; i++) y[i] = ll_bf16_to_f32(w[i]);
}

T_AVX2 static void avx2_dequant_f16(const void *src, float *y, int64_t n) {
    const uint16_t *w = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i))));
    for (; i < n; i++) y[i] = h2f(w[i]);
}

/* ------------------------------------------------------------------ AVX-512 VNNI (decode) */

/* Q4_K with 512-bit vpdpbusd. One 64-element chunk per zmm: the chunk's 32 code bytes are
 * broadcast to both halves and the upper half shifted by 4, giving [low nibbles | high
 * nibbles] = [sub-block 2c | sub-block 2c+1], which lines up with 64 consecutive activation
 * bytes. vpdpbusd leaves int32 sums of 4 products (|v| <= 4*15*127, so they fit int16); two
 * chunks are packed to int16 and multiplied by their sub-block scales with one vpmaddwd. */

/* The 12-byte scale field unpacked in vector registers: bytes 0-7 = scales, 8-15 = mins (the
 * 32-bit lane formulas of k4_scales_fast, done per lane; avoids GPR <-> vector transfers).
 * Reads 16 bytes at s: the 4 after the field are the block's first code bytes. */
T_VNNI static inline __m128i k4_scales_vec(const uint8_t *s) {
    __m128i v = _mm_loadu_si128((const __m128i *)s);                      /* u0 u1 u2 .. */
    __m128i x = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_set_epi32(4, 0, 0, 0));
    x = _mm_and_si128(x, _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f)); /* u0 u2 u1 u2>>4 */
    __m128i y = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2); /* u0 u0 u1 u1, >> 2 */
    y = _mm_and_si128(y, _mm_set_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm_or_si128(x, y);
}

/* pshufb masks turning the bytes of k4_scales_vec into int16 lanes (0x80 zeroes a byte):
 * the scale pattern of k_vnni_q4k_scale_shuf, and the pairwise-duplicated mins for bsums */
static const uint8_t k_vnni_q4k_sc16[2][64] = {
#define Z4(i) i, 0x80, i, 0x80, i, 0x80, i, 0x80
    {Z4(0), Z4(2), Z4(0), Z4(2), Z4(1), Z4(3), Z4(1), Z4(3)},
    {Z4(4), Z4(6), Z4(4), Z4(6), Z4(5), Z4(7), Z4(5), Z4(7)},
#undef Z4
};
static const uint8_t k_vnni_q4k_mn16[32] = {8,  0x80, 8,  0x80, 9,  0x80, 9,  0x80, 10, 0x80, 10,
                                            0x80, 11, 0x80, 11, 0x80, 12, 0x80, 12, 0x80, 13, 0x80,
                                            13, 0x80, 14, 0x80, 14, 0x80, 15, 0x80, 15, 0x80};

T_VNNI static float vnni_dotq_q4_K(const void *row, const void *act, int64_t n) {
    const ll_block_q4_K *w = row;
    const ll_block_q8_K *a = act;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i shuf01 = _mm512_loadu_si512((const void *)k_vnni_q4k_sc16[0]);
    const __m512i shuf23 = _mm512_loadu_si512((const void *)k_vnni_q4k_sc16[1]);
    const __m256i shufmn = _mm256_loadu_si256((const __m256i *)k_vnni_q4k_mn16);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK_K; b++) {
        prefetch_ahead(&w[b], sizeof(w[b]));
        __m128i scm = k4_scales_vec(w[b].scales);
        /* d and dmin are adjacent fp16s: convert both at once and scale by the activation's d */
        uint32_t ddm;
        memcpy(&ddm, &w[b].d, 4);
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)ddm)), _mm_set1_ps(a[b].d));
        __m256i mn2 = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(scm), shufmn);
        __m256i pm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[b].bsums), mn2);
        accm = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(dd), _mm256_set1_epi32(1)),
                               _mm256_cvtepi32_ps(pm), accm);
        __m512i p[4];
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * c)));
            v = _mm512_and_si512(_mm512_mask_srli_epi16(v, (__mmask32)0xffff0000u, v, 4), m4);
            p[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v, _mm512_loadu_si512((const void *)(a[b].qs + 64 * c)));
        }
        __m512i sc512 = _mm512_broadcast_i32x4(scm);
        __m512i s01 = _mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), _mm512_shuffle_epi8(sc512, shuf01));
        __m512i s23 = _mm512_madd_epi16(_mm512_packs_epi32(p[2], p[3]), _mm512_shuffle_epi8(sc512, shuf23));
        acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(dd), _mm512_cvtepi32_ps(_mm512_add_epi32(s01, s23)), acc);
    }
    return _mm512_reduce_add_ps(acc) - hsum_ps(accm);
}

/* Q5_K: the Q4_K scheme plus the 5th bit, tested straight out of the 32 qh bytes broadcast to
 * both halves (bit 2c for the low-nibble half, bit 2c+1 for the high) and added as 16 under
 * a byte mask. |lane| <= 4*31*127 still fits int16. */
static const uint8_t k_vnni_q5k_bits[4][64] = {
#define H32(v) v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v, v
    {H32(1), H32(2)}, {H32(4), H32(8)}, {H32(16), H32(32)}, {H32(64), H32(128)},
#undef H32
};

T_VNNI static float vnni_dotq_q5_K(const void *row, const void *act, int64_t n) {
    const ll_block_q5_K *w = row;
    const ll_block_q8_K *a = act;
    const __m512i m4 = _mm512_set1_epi8(0x0f), b16 = _mm512_set1_epi8(0x10);
    const __m512i shuf01 = _mm512_loadu_si512((const void *)k_vnni_q4k_sc16[0]);
    const __m512i shuf23 = _mm512_loadu_si512((const void *)k_vnni_q4k_sc16[1]);
    const __m256i shufmn = _mm256_loadu_si256((const __m256i *)k_vnni_q4k_mn16);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK_K; b++) {
        prefetch_ahead(&w[b], sizeof(w[b]));
        __m128i scm = k4_scales_vec(w[b].scales);
        /* d and dmin are adjacent fp16s: convert both at once and scale by the activation's d */
        uint32_t ddm;
        memcpy(&ddm, &w[b].d, 4);
        __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)ddm)), _mm_set1_ps(a[b].d));
        __m256i mn2 = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(scm), shufmn);
        __m256i pm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[b].bsums), mn2);
        accm = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(dd), _mm256_set1_epi32(1)),
                               _mm256_cvtepi32_ps(pm), accm);
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)w[b].qh));
        __m512i p[4];
        _Pragma("GCC unroll 8") for (int c = 0; c < 4; c++) {
            __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[b].qs + 32 * c)));
            v = _mm512_and_si512(_mm512_mask_srli_epi16(v, (__mmask32)0xffff0000u, v, 4), m4);
            __mmask64 hb = _mm512_test_epi8_mask(qh, _mm512_loadu_si512((const void *)k_vnni_q5k_bits[c]));
            v = _mm512_mask_add_epi8(v, hb, v, b16);
            p[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), v, _mm512_loadu_si512((const void *)(a[b].qs + 64 * c)));
        }
        __m512i sc512 = _mm512_broadcast_i32x4(scm);
        __m512i s01 = _mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), _mm512_shuffle_epi8(sc512, shuf01));
        __m512i s23 = _mm512_madd_epi16(_mm512_packs_epi32(p[2], p[3]), _mm512_shuffle_epi8(sc512, shuf23));
        acc = _mm512_fmadd_ps(_mm512_broadcastss_ps(dd), _mm512_cvtepi32_ps(_mm512_add_epi32(s01, s23)), acc);
    }
    return _mm512_reduce_add_ps(acc) - hsum_ps(accm);
}

/* Q6_K with 512-bit vpdpbusd. Per half (128 elements): the 64 ql bytes in one zmm give, by
 * low nibbles, codes of elements 0..63 and, by high nibbles, 64..127, matching 64 consecutive
 * activation bytes each; the 2 high bits come from the 32 qh bytes broadcast to both halves
 * and shifted per half. Each 128-bit lane of a vpdpbusd result covers 16 elements = one scale;
 * |lane| <= 4*63*127 fits int16, so two results are packed and scaled with one vpmaddwd.
 * The -32 code offset is applied once per block through the activation block sums. */
static const uint16_t k_vnni_q6k_scale_idx[2][32] = {
    {0, 0, 0, 0, 4, 4, 4, 4, 1, 1, 1, 1, 5, 5, 5, 5, 2, 2, 2, 2, 6, 6, 6, 6, 3, 3, 3, 3, 7, 7, 7, 7},
    {8, 8, 8, 8, 12, 12, 12, 12, 9, 9, 9, 9, 13, 13, 13, 13, 10, 10, 10, 10, 14, 14, 14, 14, 11, 11, 11, 11, 15, 15, 15, 15},
};
static const uint16_t k_vnni_q6k_shl[32] = {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
                                            2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};
static const uint16_t k_vnni_q6k_shr[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                            2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};

T_VNNI static float vnni_dotq_q6_K(const void *row, const void *act, int64_t n) {
    const ll_block_q6_K *w = row;
    const ll_block_q8_K *a = act;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    const __m512i shl = _mm512_loadu_si512((const void *)k_vnni_q6k_shl);
    const __m512i shr = _mm512_loadu_si512((const void *)k_vnni_q6k_shr);
    const __m512i idx0 = _mm512_loadu_si512((const void *)k_vnni_q6k_scale_idx[0]);
    const __m512i idx1 = _mm512_loadu_si512((const void *)k_vnni_q6k_scale_idx[1]);
    __m512 acc = _mm512_setzero_ps();
    __m256 acco = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK_K; b++) {
        prefetch_ahead(&w[b], sizeof(w[b]));
        float d = a[b].d * h2f(w[b].d);
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[b].scales));
        __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a[b].bsums), sc16);
        acco = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(off), acco);
        __m512i p[4];
        _Pragma("GCC unroll 8") for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512((const void *)(w[b].ql + 64 * h));
            __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w[b].qh + 32 * h)));
            __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
            __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                          _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
            p[2 * h] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q01, _mm512_loadu_si512((const void *)(a[b].qs + 128 * h)));
            p[2 * h + 1] =
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), q23, _mm512_loadu_si512((const void *)(a[b].qs + 128 * h + 64)));
        }
        __m512i sc512 = _mm512_castsi256_si512(sc16);
        __m512i s01 = _mm512_madd_epi16(_mm512_packs_epi32(p[0], p[1]), _mm512_permutexvar_epi16(idx0, sc512));
        __m512i s23 = _mm512_madd_epi16(_mm512_packs_epi32(p[2], p[3]), _mm512_permutexvar_epi16(idx1, sc512));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_add_epi32(s01, s23)), acc);
    }
    return _mm512_reduce_add_ps(acc) - 32.0f * hsum_ps(acco);
}

/* ------------------------------------------------------------------ AVX-512 fp32-activation dots */

/* 16 signed bytes -> 16 floats. (512-bit K-quant fp32 dots measured no faster than AVX2's:
 * the int->float conversions then compete for two ports instead of three.) */
T_VNNI static inline __m512 s8x16_ps(__m128i q) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)); }

T_VNNI static float avx512_dot_q8_0(const void *row, const float *x, int64_t n) {
    const ll_block_q8_0 *w = row;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / LL_QK8_0; b++, x += 32) {
        __m512 s = _mm512_fmadd_ps(s8x16_ps(_mm_loadu_si128((const __m128i *)w[b].qs)), _mm512_loadu_ps(x),
                                   _mm512_mul_ps(s8x16_ps(_mm_loadu_si128((const __m128i *)(w[b].qs + 16))),
                                                 _mm512_loadu_ps(x + 16)));
        acc = _mm512_fmadd_ps(_mm512_set1_ps(h2f(w[b].d)), s, acc);
    }
    return _mm512_reduce_add_ps(acc);
}

T_VNNI static float avx512_dot_bf16(const void *row, const float *x, int64_t n) {
    const uint16_t *w = row;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        prefetch_ahead(w + i, 64);
        __m512 w0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(w + i))), 16));
        __m512 w1 = _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(w + i + 16))), 16));
        a0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), a0);
        a1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), a1);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    for (; i < n; i++) s += ll_bf16_to_f32(w[i]) * x[i];
    return s;
}

/* ------------------------------------------------------------------ quantization (lilac convert)
 *
 * Weight-row quantizers for Q4_K, Q5_K, Q6_K (sub-block fits in quant_x86_kfit.h, one sub-block
 * per lane) and Q8_0, bit-identical to quant_ref.c: the fits repeat the reference's operations
 * lane by lane, the super-block scales repeat quant_k4_pack_scales / quant_q6_pack_scales on
 * vectors, and the codes are the same element-wise IEEE products and roundings.
 * AVX-512 fits 16 sub-blocks at a time (two Q4_K/Q5_K blocks, or one Q6_K block).
 */

#define T_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

/* dst row k (k < 8, stride ds) = column k of the 8x8 tile at src (rows of stride ss). */
T_AVX2 static inline void tr8x8(const float *src, size_t ss, float *dst, size_t ds) {
    __m256 r[8], t[8], u[8];
    for (int k = 0; k < 8; k++) r[k] = _mm256_loadu_ps(src + k * ss);
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee);
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee);
    }
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_ps(dst + k * ds, _mm256_permute2f128_ps(u[k], u[k + 4], 0x20));
        _mm256_storeu_ps(dst + (k + 4) * ds, _mm256_permute2f128_ps(u[k], u[k + 4], 0x31));
    }
}

/* xt[i * w + off + j] = x[32 j + i]: the 8 sub-blocks of 32 of a K4 block, one per lane */
T_AVX2 static inline void k4_transpose(const float *x, float *xt, int w, int off) {
    for (int i0 = 0; i0 < 32; i0 += 8) tr8x8(x + i0, 32, xt + i0 * w + off, (size_t)w);
}

/* xt[i * w + off + j] = x[16 (j0 + j) + i] for j < 8: 8 of the 16 Q6_K sub-blocks of 16 */
T_AVX2 static inline void q6_transpose(const float *x, int j0, float *xt, int w, int off) {
    for (int i0 = 0; i0 < 16; i0 += 8) tr8x8(x + 16 * j0 + i0, 16, xt + i0 * w + off, (size_t)w);
}

/* 32 rounded codes as bytes: quant_rint_clamp(v[e] * id, lo, hi) + add, for the 32 floats at
 * x, where v = x + dm (K4) or x (Q6_K: id0 for the first 16, id1 for the rest), id = 1 / ds. */
T_AVX2 static inline __m256i codes32(const float *x, __m256 dm, __m256 id0, __m256 id1, __m256 lo, __m256 hi, __m256i add) {
    __m256i c[4];
    for (int k = 0; k < 4; k++) {
        __m256 v = _mm256_mul_ps(_mm256_add_ps(_mm256_loadu_ps(x + 8 * k), dm), k < 2 ? id0 : id1);
        v = _mm256_max_ps(_mm256_min_ps(v, hi), lo);
        c[k] = _mm256_add_epi32(_mm256_cvtps_epi32(v), add); /* round to nearest even (MXCSR default), as the reference */
    }
    __m256i p = _mm256_packus_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* The largest of 8 floats, NaN and values <= 0 counted as +0: the reference's fold
 * m = quant_maxf(v[j], m) from m = 0, which is order-free once those lanes are +0. */
T_AVX2 static inline float hmax_pos(__m256 v) {
    v = _mm256_max_ps(v, _mm256_setzero_ps()); /* v > 0 ? v : +0 (NaN -> +0) */
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    return _mm_cvtss_f32(_mm_max_ss(a, _mm_movehdup_ps(a)));
}

/* quant_rint_clamp on 8 lanes: clamp (minps, maxps as quant_minf / quant_maxf), round by the
 * magic constant, convert (exact: whole numbers) */
T_AVX2 static inline __m256i rint_clamp8(__m256 v, float lo, float hi) {
    const __m256 magic = _mm256_set1_ps(QUANT_MAGIC);
    v = _mm256_max_ps(_mm256_min_ps(v, _mm256_set1_ps(hi)), _mm256_set1_ps(lo));
    return _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(v, magic), magic));
}

/* ll_f32_to_f16 / ll_f16_to_f32 by F16C for the super-block scales: IEEE round-to-nearest-even
 * both, so equal to base.c's for every non-NaN value (the scales here never are NaN: the
 * maxima drop NaN lanes). */
T_AVX2 static inline uint16_t f32_to_f16_nn(float f) {
    return (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), 0);
}

/* quant_k4_pack_scales (quant_ref.c) with the 16 divisions and roundings on vectors; the same
 * operations, so the same bytes. */
T_AVX2 static inline void k4_pack_scales(const float s[8], const float m[8], uint16_t *d_out, uint16_t *dmin_out,
                                         uint8_t scales[12], float ds[8], float dm[8]) {
    __m256 vs = _mm256_loadu_ps(s), vm = _mm256_loadu_ps(m);
    *d_out = f32_to_f16_nn(hmax_pos(vs) / 63.0f);
    *dmin_out = f32_to_f16_nn(hmax_pos(vm) / 63.0f);
    float d = h2f(*d_out), dmin = h2f(*dmin_out);
    __m256i isc = _mm256_setzero_si256(), imn = _mm256_setzero_si256();
    if (d > 0) isc = rint_clamp8(_mm256_div_ps(vs, _mm256_set1_ps(d)), 0.0f, 63.0f);
    if (dmin > 0) imn = rint_clamp8(_mm256_div_ps(vm, _mm256_set1_ps(dmin)), 0.0f, 63.0f);
    _mm256_storeu_ps(ds, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isc)));
    _mm256_storeu_ps(dm, _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(imn)));
    int32_t sc[8], mn[8];
    _mm256_storeu_si256((__m256i *)sc, isc);
    _mm256_storeu_si256((__m256i *)mn, imn);
    for (int j = 0; j < 4; j++) { /* inverse of quant_k4_scales */
        scales[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        scales[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        scales[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | ((mn[j + 4] & 0xf) << 4));
    }
}

/* quant_q6_pack_scales on vectors: the first scale of largest magnitude (NaN never wins), its
 * fp16 d, then the 16 int8 scales. */
T_AVX2 static inline void q6_pack_scales(const float s[16], ll_block_q6_K *b, float ds[16]) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v0 = _mm256_loadu_ps(s), v1 = _mm256_loadu_ps(s + 8);
    __m256 a0 = _mm256_andnot_ps(sign, v0), a1 = _mm256_andnot_ps(sign, v1);
    float amax = LL_MAX(hmax_pos(a0), hmax_pos(a1)); /* NaN lanes count as 0, as they never win */
    float smax = 0;
    if (amax > 0) {
        __m256 m = _mm256_set1_ps(amax);
        unsigned bits = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a0, m, _CMP_EQ_OQ)) |
                        ((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(a1, m, _CMP_EQ_OQ)) << 8);
        smax = s[__builtin_ctz(bits)];
    }
    b->d = f32_to_f16_nn(smax / -128.0f);
    float d = h2f(b->d);
    __m256i q0 = _mm256_setzero_si256(), q1 = _mm256_setzero_si256();
    if (d != 0) {
        __m256 vd = _mm256_set1_ps(d);
        q0 = rint_clamp8(_mm256_div_ps(v0, vd), -128.0f, 127.0f);
        q1 = rint_clamp8(_mm256_div_ps(v1, vd), -128.0f, 127.0f);
    }
    _mm256_storeu_ps(ds, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(q0)));
    _mm256_storeu_ps(ds + 8, _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(q1)));
    __m128i p = _mm_packs_epi16(_mm_packs_epi32(_mm256_castsi256_si128(q0), _mm256_extracti128_si256(q0, 1)),
                                _mm_packs_epi32(_mm256_castsi256_si128(q1), _mm256_extracti128_si256(q1, 1)));
    _mm_storeu_si128((__m128i *)b->scales, p);
}

/* Codes of one K4 block after its fits: q[256] (bytes 0..nmax), and the scale field. */
T_AVX2 static inline void k4_finish(const float *x, const float s[8], const float m[8], int nmax, uint16_t *d, uint16_t *dmin,
                                    uint8_t scales[12], uint8_t q[256]) {
    float ds[8], dm[8];
    k4_pack_scales(s, m, d, dmin, scales, ds, dm);
    const __m256 lo = _mm256_setzero_ps(), hi = _mm256_set1_ps((float)nmax);
    for (int j = 0; j < 8; j++) {
        __m256i c = _mm256_setzero_si256();
        if (ds[j] > 0) {
            __m256 vid = _mm256_set1_ps(quant_recip(ds[j]));
            c = codes32(x + 32 * j, _mm256_set1_ps(dm[j]), vid, vid, lo, hi, _mm256_setzero_si256());
        }
        _mm256_storeu_si256((__m256i *)(q + 32 * j), c);
    }
}

T_AVX2 static inline void q4k_pack(const uint8_t q[256], ll_block_q4_K *b) {
    for (int c = 0; c < 4; c++) { /* codes <= 15: the 16-bit shift cannot carry across bytes */
        __m256i lo = _mm256_loadu_si256((const __m256i *)(q + 64 * c)), hi = _mm256_loadu_si256((const __m256i *)(q + 64 * c + 32));
        _mm256_storeu_si256((__m256i *)(b->qs + 32 * c), _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)));
    }
}

T_AVX2 static inline void q5k_pack(const uint8_t q[256], ll_block_q5_K *b) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i qh = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        __m256i lo = _mm256_loadu_si256((const __m256i *)(q + 64 * c)), hi = _mm256_loadu_si256((const __m256i *)(q + 64 * c + 32));
        _mm256_storeu_si256((__m256i *)(b->qs + 32 * c),
                            _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_slli_epi16(_mm256_and_si256(hi, m4), 4)));
        /* bit 4 of each code (0x10) -> bit 2c / 2c+1 of qh */
        __m256i h1 = _mm256_min_epu8(_mm256_and_si256(lo, _mm256_set1_epi8(0x10)), _mm256_set1_epi8(1));
        __m256i h2 = _mm256_min_epu8(_mm256_and_si256(hi, _mm256_set1_epi8(0x10)), _mm256_set1_epi8(1));
        __m256i bits = _mm256_or_si256(h1, _mm256_add_epi8(h2, h2));
        for (int k = 0; k < 2 * c; k++) bits = _mm256_add_epi8(bits, bits); /* << 2c within bytes */
        qh = _mm256_or_si256(qh, bits);
    }
    _mm256_storeu_si256((__m256i *)b->qh, qh);
}

/* Q6_K packing of the 256 codes (0..63, bytes; q[g] = elements 32g .. 32g + 31) into ql / qh. */
T_AVX2 static inline void q6k_pack(const __m256i q[8], ll_block_q6_K *b) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x03);
    for (int h = 0; h < 2; h++) { /* element 128h + 32g + l: ql[64h + l + 32(g&1)] nibble g/2, qh[32h + l] bits 2g */
        const __m256i *Q = q + 4 * h;
        __m256i l0 = _mm256_or_si256(_mm256_and_si256(Q[0], m4), _mm256_slli_epi16(_mm256_and_si256(Q[2], m4), 4));
        __m256i l1 = _mm256_or_si256(_mm256_and_si256(Q[1], m4), _mm256_slli_epi16(_mm256_and_si256(Q[3], m4), 4));
        __m256i hb = _mm256_and_si256(_mm256_srli_epi16(Q[0], 4), m2);
        hb = _mm256_or_si256(hb, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(Q[1], 4), m2), 2));
        hb = _mm256_or_si256(hb, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(Q[2], 4), m2), 4));
        hb = _mm256_or_si256(hb, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(Q[3], 4), m2), 6));
        _mm256_storeu_si256((__m256i *)(b->ql + 64 * h), l0);
        _mm256_storeu_si256((__m256i *)(b->ql + 64 * h + 32), l1);
        _mm256_storeu_si256((__m256i *)(b->qh + 32 * h), hb);
    }
}

/* The 32 codes of elements 32g .. 32g + 31 where one of their two scales is 0: code 32 for that
 * half, as the reference (rare: kept simple). */
T_AVX2 static inline __m256i q6k_codes_slow(const float *x, const float ds[16], int g) {
    uint8_t t[32];
    for (int l = 0; l < 32; l++) {
        float d = ds[2 * g + l / 16];
        t[l] = (uint8_t)((d != 0 ? quant_rint_clamp(x[32 * g + l] * quant_recip(d), -32, 31) : 0) + 32);
    }
    return _mm256_loadu_si256((const __m256i *)t);
}

/* Q6_K codes (0..63) and packing after the 16 fits. */
T_AVX2 static inline void q6k_finish(const float *x, const float s[16], ll_block_q6_K *b) {
    float ds[16];
    q6_pack_scales(s, b, ds);
    const __m256 lo = _mm256_set1_ps(-32.0f), hi = _mm256_set1_ps(31.0f), zero = _mm256_setzero_ps();
    const __m256i add = _mm256_set1_epi32(32);
    __m256i q[8];
    for (int g = 0; g < 8; g++) { /* 32 elements, scale groups 2g and 2g+1 */
        if (ds[2 * g] != 0 && ds[2 * g + 1] != 0)
            q[g] = codes32(x + 32 * g, zero, _mm256_set1_ps(quant_recip(ds[2 * g])), _mm256_set1_ps(quant_recip(ds[2 * g + 1])), lo,
                           hi, add);
        else q[g] = q6k_codes_slow(x, ds, g);
    }
    q6k_pack(q, b);
}

/* ---- the fits, 8 lanes (AVX2) */
#define KF_W 8
#define KF_FN(name) T_AVX2 static void avx2_##name
#define VF __m256
#define VM __m256
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(f) _mm256_set1_ps(f)
#define V_LOAD(p) _mm256_load_ps(p)
#define V_STORE(p, v) _mm256_store_ps(p, v)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_DIV(a, b) _mm256_div_ps(a, b)
#define V_MIN(a, b) _mm256_min_ps(a, b) /* a < b ? a : b, as quant_minf */
#define V_MAX(a, b) _mm256_max_ps(a, b) /* a > b ? a : b, as quant_maxf */
#define V_TRUNC(v) _mm256_cvtepi32_ps(_mm256_cvttps_epi32(v)) /* (float)(int)v */
#define V_ABS(v) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v)
#define V_NEG(v) _mm256_xor_ps(v, _mm256_set1_ps(-0.0f))
#define V_LT(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define V_GT(a, b) _mm256_cmp_ps(a, b, _CMP_GT_OQ)
#define V_LE(a, b) _mm256_cmp_ps(a, b, _CMP_LE_OQ)
#define V_EQ(a, b) _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
#define V_NLE(a, b) _mm256_cmp_ps(a, b, _CMP_NLE_UQ) /* !(a <= b) */
#define V_SEL(m, yes, no) _mm256_blendv_ps(no, yes, m)
#define V_MAND(a, b) _mm256_and_ps(a, b)
#define V_ANY(m) (_mm256_movemask_ps(m) != 0)
#include "quant_x86_kfit.h"

/* ---- the fits, 16 lanes (AVX-512) */
#define KF_W 16
#define KF_FN(name) T_AVX512 static void avx512_##name
#define VF __m512
#define VM __mmask16
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(f) _mm512_set1_ps(f)
#define V_LOAD(p) _mm512_load_ps(p)
#define V_STORE(p, v) _mm512_store_ps(p, v)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_SUB(a, b) _mm512_sub_ps(a, b)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_DIV(a, b) _mm512_div_ps(a, b)
#define V_MIN(a, b) _mm512_min_ps(a, b)
#define V_MAX(a, b) _mm512_max_ps(a, b)
#define V_TRUNC(v) _mm512_cvtepi32_ps(_mm512_cvttps_epi32(v))
#define V_ABS(v) _mm512_abs_ps(v)
#define V_NEG(v) _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u)))
#define V_LT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define V_GT(a, b) _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ)
#define V_LE(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ)
#define V_EQ(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define V_NLE(a, b) _mm512_cmp_ps_mask(a, b, _CMP_NLE_UQ)
#define V_SEL(m, yes, no) _mm512_mask_blend_ps(m, no, yes)
#define V_MAND(a, b) ((VM)((a) & (b)))
#define V_ANY(m) ((m) != 0)
#include "quant_x86_kfit.h"

/* ---- row drivers */

T_AVX2 static void avx2_quant_q4_K(const float *src, void *dst, int64_t n) {
    float xt[32 * 8] __attribute__((aligned(32))), s[8] __attribute__((aligned(32))), m[8] __attribute__((aligned(32)));
    uint8_t q[256];
    ll_block_q4_K *b = dst;
    for (int64_t i = 0; i < n / LL_QK_K; i++, src += LL_QK_K) {
        k4_transpose(src, xt, 8, 0);
        avx2_fit_affine(xt, 15, s, m);
        k4_finish(src, s, m, 15, &b[i].d, &b[i].dmin, b[i].scales, q);
        q4k_pack(q, &b[i]);
    }
}

T_AVX2 static void avx2_quant_q5_K(const float *src, void *dst, int64_t n) {
    float xt[32 * 8] __attribute__((aligned(32))), s[8] __attribute__((aligned(32))), m[8] __attribute__((aligned(32)));
    uint8_t q[256];
    ll_block_q5_K *b = dst;
    for (int64_t i = 0; i < n / LL_QK_K; i++, src += LL_QK_K) {
        k4_transpose(src, xt, 8, 0);
        avx2_fit_affine(xt, 31, s, m);
        k4_finish(src, s, m, 31, &b[i].d, &b[i].dmin, b[i].scales, q);
        q5k_pack(q, &b[i]);
    }
}

T_AVX2 static void avx2_quant_q6_K(const float *src, void *dst, int64_t n) {
    float xt[16 * 8] __attribute__((aligned(32))), s[16] __attribute__((aligned(32)));
    ll_block_q6_K *b = dst;
    for (int64_t i = 0; i < n / LL_QK_K; i++, src += LL_QK_K) {
        for (int h = 0; h < 2; h++) {
            q6_transpose(src, 8 * h, xt, 8, 0);
            avx2_fit_symmetric(xt, 32, s + 8 * h);
        }
        q6k_finish(src, s, &b[i]);
    }
}

/* 16 rounded codes as bytes, quant_rint_clamp((x + dm) * id, lo, hi) + add, on one 16-lane
 * vector (cvtps2dq rounds to nearest even, as the magic constant does, on the clamped value). */
T_AVX512 static inline __m128i codes16_512(const float *x, float dm, float id, float lo, float hi, int add) {
    __m512 v = _mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(x), _mm512_set1_ps(dm)), _mm512_set1_ps(id));
    v = _mm512_max_ps(_mm512_min_ps(v, _mm512_set1_ps(hi)), _mm512_set1_ps(lo));
    return _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), _mm512_set1_epi32(add)));
}

/* k4_finish with 16 lanes: a sub-block of 32 is two vectors. */
T_AVX512 static inline void k4_finish512(const float *x, const float s[8], const float m[8], int nmax, uint16_t *d, uint16_t *dmin,
                                         uint8_t scales[12], uint8_t q[256]) {
    float ds[8], dm[8];
    k4_pack_scales(s, m, d, dmin, scales, ds, dm);
    for (int j = 0; j < 8; j++) {
        __m128i c0 = _mm_setzero_si128(), c1 = _mm_setzero_si128();
        if (ds[j] > 0) {
            float id = quant_recip(ds[j]);
            c0 = codes16_512(x + 32 * j, dm[j], id, 0.0f, (float)nmax, 0);
            c1 = codes16_512(x + 32 * j + 16, dm[j], id, 0.0f, (float)nmax, 0);
        }
        _mm_storeu_si128((__m128i *)(q + 32 * j), c0);
        _mm_storeu_si128((__m128i *)(q + 32 * j + 16), c1);
    }
}

/* q6k_finish with 16 lanes: one vector per scale group. */
T_AVX512 static inline void q6k_finish512(const float *x, const float s[16], ll_block_q6_K *b) {
    float ds[16];
    q6_pack_scales(s, b, ds);
    __m256i q[8];
    for (int g = 0; g < 8; g++) {
        if (ds[2 * g] != 0 && ds[2 * g + 1] != 0) {
            __m128i c0 = codes16_512(x + 32 * g, 0.0f, quant_recip(ds[2 * g]), -32.0f, 31.0f, 32);
            __m128i c1 = codes16_512(x + 32 * g + 16, 0.0f, quant_recip(ds[2 * g + 1]), -32.0f, 31.0f, 32);
            q[g] = _mm256_inserti128_si256(_mm256_castsi128_si256(c0), c1, 1);
        } else q[g] = q6k_codes_slow(x, ds, g);
    }
    q6k_pack(q, b);
}

/* Two K4 blocks per 16-lane fit; an odd last block goes through the 8-lane fit. */
T_AVX512 static void avx512_quant_k4(const float *src, uint8_t *dst, int64_t n, int nmax, size_t bb) {
    float xt[32 * 16] __attribute__((aligned(64))), s[16] __attribute__((aligned(64))), m[16] __attribute__((aligned(64)));
    uint8_t q[256];
    int64_t nb = n / LL_QK_K, i = 0;
    for (; i + 2 <= nb; i += 2) {
        const float *x = src + i * LL_QK_K;
        k4_transpose(x, xt, 16, 0);
        k4_transpose(x + LL_QK_K, xt, 16, 8);
        avx512_fit_affine(xt, nmax, s, m);
        for (int h = 0; h < 2; h++) {
            const float *xh = x + h * LL_QK_K;
            if (nmax == 15) {
                ll_block_q4_K *b = (ll_block_q4_K *)(dst + (size_t)(i + h) * bb);
                k4_finish512(xh, s + 8 * h, m + 8 * h, nmax, &b->d, &b->dmin, b->scales, q);
                q4k_pack(q, b);
            } else {
                ll_block_q5_K *b = (ll_block_q5_K *)(dst + (size_t)(i + h) * bb);
                k4_finish512(xh, s + 8 * h, m + 8 * h, nmax, &b->d, &b->dmin, b->scales, q);
                q5k_pack(q, b);
            }
        }
    }
    if (i < nb) {
        if (nmax == 15) avx2_quant_q4_K(src + i * LL_QK_K, dst + (size_t)i * bb, LL_QK_K);
        else avx2_quant_q5_K(src + i * LL_QK_K, dst + (size_t)i * bb, LL_QK_K);
    }
}

T_AVX512 static void avx512_quant_q4_K(const float *src, void *dst, int64_t n) { avx512_quant_k4(src, dst, n, 15, sizeof(ll_block_q4_K)); }
T_AVX512 static void avx512_quant_q5_K(const float *src, void *dst, int64_t n) { avx512_quant_k4(src, dst, n, 31, sizeof(ll_block_q5_K)); }

T_AVX512 static void avx512_quant_q6_K(const float *src, void *dst, int64_t n) {
    float xt[16 * 16] __attribute__((aligned(64))), s[16] __attribute__((aligned(64)));
    ll_block_q6_K *b = dst;
    for (int64_t i = 0; i < n / LL_QK_K; i++, src += LL_QK_K) {
        q6_transpose(src, 0, xt, 16, 0);
        q6_transpose(src, 8, xt, 16, 8);
        avx512_fit_symmetric(xt, 32, s);
        q6k_finish512(src, s, &b[i]);
    }
}

/* Q8_0 as quant_ref.c's qz_q8_0: d = amax/127 (max is order-free), q = roundf(x * (1/d)),
 * roundf (half away from zero) built exactly from trunc and the exact remainder. */
T_AVX2 static void avx2_quant_q8_0(const float *src, void *dst, int64_t n) {
    ll_block_q8_0 *b = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f), halfv = _mm256_set1_ps(0.5f), onev = _mm256_set1_ps(1.0f);
    for (int64_t i = 0; i < n / LL_QK8_0; i++, src += LL_QK8_0) {
        __m256 v[4], am = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(src + 8 * k);
            am = _mm256_max_ps(_mm256_andnot_ps(sign, v[k]), am); /* NaN -> am, as fmaxf skips it */
        }
        __m128 a = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        a = _mm_max_ps(a, _mm_movehl_ps(a, a));
        a = _mm_max_ss(a, _mm_movehdup_ps(a));
        float amax = _mm_cvtss_f32(a), d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
        b[i].d = ll_f32_to_f16(d);
        __m256i c[4];
        for (int k = 0; k < 4; k++) {
            __m256 y = _mm256_mul_ps(v[k], _mm256_set1_ps(id));
            __m256 t = _mm256_round_ps(y, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            __m256 fr = _mm256_andnot_ps(sign, _mm256_sub_ps(y, t)); /* |y - trunc(y)|, exact */
            __m256 step = _mm256_and_ps(_mm256_cmp_ps(fr, halfv, _CMP_GE_OQ), _mm256_or_ps(onev, _mm256_and_ps(sign, y)));
            __m256 r = _mm256_add_ps(t, step);
            r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q)); /* NaN -> 0, then clamp, as the reference */
            c[k] = _mm256_cvttps_epi32(_mm256_max_ps(_mm256_min_ps(r, _mm256_set1_ps(127.0f)), _mm256_set1_ps(-127.0f)));
        }
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)b[i].qs, p);
    }
}

/* ------------------------------------------------------------------ install */

#define FP32_ACT(name) \
    static float avx2_dotq_##name(const void *row, const void *act, int64_t n) { return avx2_dot_##name(row, act, n); }
FP32_ACT(f32)
FP32_ACT(bf16)
FP32_ACT(f16)
FP32_ACT(mlx4)
FP32_ACT(mlx8)
static float avx512_dotq_bf16(const void *row, const void *act, int64_t n) { return avx512_dot_bf16(row, act, n); }

/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports has no "f16c". */
static int cpu_has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29) & 1;
}

int quant_x86_install(quant_kernels *k, int max_level) {
    __builtin_cpu_init();
    if (max_level < QUANT_SIMD_AVX2) return QUANT_SIMD_SCALAR;
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())) return QUANT_SIMD_SCALAR;
    k->dot_q[LL_TYPE_Q4_K] = avx2_dotq_q4_K;
    k->dot_q[LL_TYPE_Q5_K] = avx2_dotq_q5_K;
    k->dot_q[LL_TYPE_Q6_K] = avx2_dotq_q6_K;
    k->dot_q[LL_TYPE_Q8_0] = avx2_dotq_q8_0;
    k->dot_q[LL_TYPE_Q4_0] = avx2_dotq_q4_0;
    k->dot[LL_TYPE_F32] = avx2_dot_f32;
    k->dot[LL_TYPE_BF16] = avx2_dot_bf16;
    k->dot[LL_TYPE_F16] = avx2_dot_f16;
    k->dot[LL_TYPE_Q8_0] = avx2_dot_q8_0;
    k->dot[LL_TYPE_Q4_0] = avx2_dot_q4_0;
    k->dot[LL_TYPE_Q4_K] = avx2_dot_q4_K;
    k->dot[LL_TYPE_Q5_K] = avx2_dot_q5_K;
    k->dot[LL_TYPE_Q6_K] = avx2_dot_q6_K;
    k->dot[LL_TYPE_MLX4] = avx2_dot_mlx4;
    k->dot[LL_TYPE_MLX8] = avx2_dot_mlx8;
    k->dequant[LL_TYPE_Q4_K] = avx2_dequant_q4_K;
    k->dequant[LL_TYPE_Q5_K] = avx2_dequant_q5_K;
    k->dequant[LL_TYPE_Q6_K] = avx2_dequant_q6_K;
    k->dequant[LL_TYPE_Q8_0] = avx2_dequant_q8_0;
    k->dequant[LL_TYPE_BF16] = avx2_dequant_bf16;
    k->dequant[LL_TYPE_F16] = avx2_dequant_f16;
    /* float rows take fp32 activations: their dot_q is the plain dot */
    k->dot_q[LL_TYPE_F32] = avx2_dotq_f32;
    k->dot_q[LL_TYPE_BF16] = avx2_dotq_bf16;
    k->dot_q[LL_TYPE_F16] = avx2_dotq_f16;
    k->dot_q[LL_TYPE_MLX4] = avx2_dotq_mlx4;
    k->dot_q[LL_TYPE_MLX8] = avx2_dotq_mlx8;
    k->quant[LL_TYPE_Q4_K] = avx2_quant_q4_K;
    k->quant[LL_TYPE_Q5_K] = avx2_quant_q5_K;
    k->quant[LL_TYPE_Q6_K] = avx2_quant_q6_K;
    k->quant[LL_TYPE_Q8_0] = avx2_quant_q8_0;
    if (max_level >= QUANT_SIMD_AVX512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
        k->dot_q[LL_TYPE_Q4_K] = vnni_dotq_q4_K;
        k->dot_q[LL_TYPE_Q6_K] = vnni_dotq_q6_K;
        k->dot_q[LL_TYPE_Q5_K] = vnni_dotq_q5_K;
        k->dot[LL_TYPE_Q8_0] = avx512_dot_q8_0;
        k->dot[LL_TYPE_BF16] = avx512_dot_bf16;
        k->dot_q[LL_TYPE_BF16] = avx512_dotq_bf16;
        k->quant[LL_TYPE_Q4_K] = avx512_quant_q4_K;
        k->quant[LL_TYPE_Q5_K] = avx512_quant_q5_K;
        k->quant[LL_TYPE_Q6_K] = avx512_quant_q6_K;
        return QUANT_SIMD_AVX512;
    }
    return QUANT_SIMD_AVX2;
}

#else /* not x86 */

int quant_x86_install(quant_kernels *k, int max_level) {
    (void)k;
    (void)max_level;
    return QUANT_SIMD_SCALAR;
}

#endif
