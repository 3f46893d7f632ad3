/*
 * quant.h — tensor element types and block formats: sizes, dequantize, dot product against fp32
 * activations, and quantize.
 *
 * Layout conventions. A matrix is stored row-major as [rows, cols] (PyTorch's [out, in]); blocks
 * run along a row (the `cols` / `in` dimension), so a row of n elements occupies
 * quant_row_bytes(type, n) bytes and n must be a multiple of quant_block_elems(type).
 *
 * The ggml-family formats (F32 … Q6_K, BF16) use llama.cpp's exact block layouts and the type
 * numbers of GGUF's ggml_type, so a GGUF tensor's type id maps 1:1. MLX affine types are lilac's
 * own repacked blocks (see below); their numbers are outside ggml's range.
 */
#ifndef LILAC_QUANT_H
#define LILAC_QUANT_H

#include "../base/base.h"

typedef enum ll_type {
    LL_TYPE_F32 = 0,
    LL_TYPE_F16 = 1,
    LL_TYPE_Q4_0 = 2,  /* 32 elems: f16 d; 16 B nibbles          -> 18 B */
    LL_TYPE_Q8_0 = 8,  /* 32 elems: f16 d; 32 x int8              -> 34 B */
    LL_TYPE_Q4_K = 12, /* 256 elems: f16 d, dmin; 12 B scales; 128 B nibbles -> 144 B */
    LL_TYPE_Q5_K = 13, /* 256 elems: f16 d, dmin; 12 B scales; 32 B high bits; 128 B -> 176 B */
    LL_TYPE_Q6_K = 14, /* 256 elems: 128 B ql, 64 B qh, 16 x int8 scales, f16 d -> 210 B */
    LL_TYPE_Q8_K = 15, /* 256 elems: f32 d; 256 x int8; 16 x int16 bsums -> 292 B (activations) */
    LL_TYPE_I8 = 24,
    LL_TYPE_I16 = 25,
    LL_TYPE_I32 = 26,
    LL_TYPE_I64 = 27,
    LL_TYPE_F64 = 28,
    LL_TYPE_BF16 = 30,
    /* lilac-only types (never written to GGUF) */
    LL_TYPE_U8 = 200,
    LL_TYPE_U32 = 201,
    /* MLX affine, repacked at load into self-contained blocks of 64 elements:
     *   w[i] = scale * q[i] + bias, scale and bias bf16 per group of 64.
     * MLX4: { u16 scale_bf16; u16 bias_bf16; u8 qs[32] }  (q[i] = element i's nibble:
     *        qs[j] & 0xf is element 2j, qs[j] >> 4 is element 2j+1 — MLX's LSB-first packing) -> 36 B
     * MLX8: { u16 scale_bf16; u16 bias_bf16; u8 qs[64] }  -> 68 B */
    LL_TYPE_MLX4 = 210,
    LL_TYPE_MLX8 = 211,
    LL_TYPE_COUNT_ = 212,
} ll_type;

#define LL_QK4_0 32
#define LL_QK8_0 32
#define LL_QK_K 256
#define LL_K_SCALE_SIZE 12
#define LL_QK_MLX 64

/* llama.cpp block structs, byte-exact (ggml-common.h layouts). */
typedef struct { uint16_t d; uint8_t qs[LL_QK4_0 / 2]; } ll_block_q4_0;
typedef struct { uint16_t d; int8_t qs[LL_QK8_0]; } ll_block_q8_0;
typedef struct { uint16_t d, dmin; uint8_t scales[LL_K_SCALE_SIZE]; uint8_t qs[LL_QK_K / 2]; } ll_block_q4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[LL_K_SCALE_SIZE]; uint8_t qh[LL_QK_K / 8]; uint8_t qs[LL_QK_K / 2]; } ll_block_q5_K;
typedef struct { uint8_t ql[LL_QK_K / 2]; uint8_t qh[LL_QK_K / 4]; int8_t scales[LL_QK_K / 16]; uint16_t d; } ll_block_q6_K;
typedef struct { float d; int8_t qs[LL_QK_K]; int16_t bsums[LL_QK_K / 16]; } ll_block_q8_K;
typedef struct { uint16_t scale, bias; uint8_t qs[LL_QK_MLX / 2]; } ll_block_mlx4;
typedef struct { uint16_t scale, bias; uint8_t qs[LL_QK_MLX]; } ll_block_mlx8;

/* Name as GGUF/llama.cpp spell it ("q4_K", "bf16", ...); "?" for an unknown id. */
const char *quant_type_name(ll_type t);
/* Parses a name (case-insensitive); returns 0 and sets *t, or -1. */
int quant_type_from_name(const char *name, ll_type *t);
/* 1 if t is a known type id (any of the above). */
int quant_type_valid(int t);
/* Elements per block (1 for plain types) and bytes per block. */
int64_t quant_block_elems(ll_type t);
size_t quant_block_bytes(ll_type t);
/* Bytes of one row of n elements; n % quant_block_elems(t) == 0 is asserted. */
size_t quant_row_bytes(ll_type t, int64_t n);
/* 1 for float/quantized weight types that the engine can use as a matrix. */
int quant_type_is_weight(ll_type t);

/* Dequantizes n elements (a whole number of blocks) of row `src` into dst[n]. */
void quant_dequant_row(ll_type t, const void *src, float *dst, int64_t n);

/* Dot product of one weight row (n elements, type t) with fp32 x[n]. Reference semantics:
 * equal (to fp32 rounding) to dot(dequant(row), x). */
float quant_dot_row(ll_type t, const void *row, const float *x, int64_t n);

/* Quantizes src[n] into dst (quant_row_bytes(t, n) bytes). Supported for F32, F16, BF16, Q8_0,
 * Q4_0, Q4_K, Q5_K, Q6_K, Q8_K, MLX4, MLX8; returns bytes written, asserts on others. The bytes
 * do not depend on the CPU: the SIMD quantizers (Q4_K, Q5_K, Q6_K, Q8_0) write exactly what the
 * scalar reference writes. */
size_t quant_quantize_row(ll_type t, const float *src, void *dst, int64_t n);

/*
 * Fast matrix-vector path for decode. Some formats (the K-quants, Q8_0, Q4_0) are fastest when
 * the activation is first quantized once (to Q8_K or Q8_0 blocks) and rows use integer dots.
 * quant_vec_dot_type(t) says which activation type row type t wants (LL_TYPE_F32 if none);
 * quant_act_bytes(t, n) how big the quantized activation is; quant_quantize_act converts x once;
 * quant_dot_row_q dots one weight row with the pre-quantized activation. In all four, t is the
 * WEIGHT row type. Usage per input vector x[n] of a [rows, n] matrix W of type t:
 *     quant_quantize_act(t, x, act, n);                  act: quant_act_bytes(t, n) bytes
 *     for r: y[r] = quant_dot_row_q(t, W + r * quant_row_bytes(t, n), act, n);
 * The result equals dot(dequant(row), dequant(act)) up to fp32 rounding: Q8_K/Q8_0 activation
 * rounding costs ~0.5 % relative error per dot (use quant_dot_row where that matters). For
 * vec_dot_type F32 the activation is a plain copy of x and quant_dot_row_q == quant_dot_row.
 * Q8_K activations use codes in [-127, 127] (the kernels rely on it).
 */
ll_type quant_vec_dot_type(ll_type t);
size_t quant_act_bytes(ll_type t, int64_t n);
void quant_quantize_act(ll_type t, const float *x, void *act, int64_t n);
float quant_dot_row_q(ll_type t, const void *row, const void *act, int64_t n);
/* quant_dot_row_q over nrows rows starting at `rows`, row r at rows + r * row_stride bytes:
 * y[r] = dot(row r, act). Same results; resolves the kernel once (cheaper for short rows). */
void quant_dot_rows_q(ll_type t, const void *rows, size_t row_stride, int64_t nrows, const void *act, int64_t n,
                      float *y);

/* Runtime CPU feature selection (AVX2/AVX-512/scalar); idempotent and thread-safe, and every
 * quant_* call runs it on first use. LILAC_NO_AVX512=1 in the environment keeps the AVX2
 * kernels. quant_simd_name() returns "avx512", "avx2" or "scalar". */
void quant_init(void);
const char *quant_simd_name(void);
/* Test hook: nonzero forces the scalar reference kernels everywhere (quant_simd_name() then says
 * "scalar"); 0 restores the SIMD kernels quant_init() selected. Not for use while other threads
 * are inside quant_* calls. */
void quant_force_scalar(int on);
/* Test/benchmark hook: selects the kernel level "avx512", "avx2" or "scalar" (NULL: the best
 * this CPU has). Returns 0, or -1 if the CPU lacks that level (the best lower one is then
 * installed). Same threading caveat as quant_force_scalar. */
int quant_force_simd(const char *name);

#endif
