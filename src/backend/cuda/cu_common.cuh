/*
 * cu_common.cuh — shared definitions of the CUDA kernels: the device weight layouts (gmat), the
 * quantized-activation layout, warp helpers and per-type block decoding.
 *
 * Device weight layouts (repacked at load from llama.cpp's blocks, see cuda_backend.cu):
 *   Q4_K  q  = qs    [rows*nb][128]  (the block's 128 nibble bytes, llama order)
 *         sc = meta  [rows*nb][16]   (d, dmin fp16, then the 12 packed 6-bit scale/min bytes)
 *   Q6_K  q  = ql    [rows*nb][128], qh = [rows*nb][64], sc = scales int8 [rows*nb][16],
 *         d  = fp16  [rows*nb]
 *   Q8_0  q  = int8  [rows][cols],   d  = fp16 [rows][cols/32]
 *   BF16  q  = bf16  [rows][cols]    (F32 / F16 sources are converted to bf16)
 * Splitting the 144 / 210-byte blocks into structure-of-arrays makes every hot load a 16-byte,
 * 16-byte-aligned vector load, with no extra bytes. nb = cols / 256.
 *
 * Activations for the integer-dot GEMVs are quantized per 32 elements (q8, llama's q8_1 idea):
 *   xq int8 [K], dx float [K/32] (scale), s16 float [K/16] (dx * sum of the 16 q's), plus the fp32
 *   copy xf [K] for bf16 weights.
 */
#ifndef LILAC_CU_COMMON_CUH
#define LILAC_CU_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

enum { GT_F32 = 0, GT_Q8_0 = 8, GT_Q4_K = 12, GT_Q6_K = 14, GT_BF16 = 30 };

struct gmat {
    int type;           /* GT_* */
    int rows, cols;
    const uint8_t *q;   /* see the layout table above */
    const uint8_t *qh;
    const uint8_t *sc;
    const __half *d;
};

/* Splits of the flash-decoding kernel that hold positions for a context of n (attn_dec_args.minpos;
 * here because k_lattn.cuh, in the lean kernels' translation unit, reads its partials too). */
__host__ __device__ static inline int attn_fd_used(int nsplit, int minpos, int n) {
    if (minpos <= 1) return nsplit;
    int u = (n + minpos - 1) / minpos;
    return u < nsplit ? u : nsplit;
}

struct qact {           /* quantized activation (shared memory) */
    const float *xf;
    const int8_t *xq;
    const float *dx;
    const float *s16;
};

/* Programmatic dependent launch (sm_90): pdl_trigger lets the next kernel in the stream launch
 * (its blocks start as this grid's blocks finish); pdl_wait blocks until the previous grid has
 * completed and its writes are visible. A kernel launched with the PDL attribute may only read
 * weights (never activations) and write nothing before pdl_wait. No-ops on older GPUs. */
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* The in-graph trace's stamps (k_lean.cuh explains the record; a build with -DLILAC_LN_TRACE). */
__device__ __forceinline__ unsigned long long ln_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#ifdef LILAC_LN_TRACE
__device__ __forceinline__ void ln_trace(unsigned long long *tr, int k) {
    if (!tr || threadIdx.x != 0) return;
    if (k == 0) {
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        /* flat block ids: the flash-decoding and combine grids are 2-D (before session 19 every
         * block of column 0 wrote [0], so their "entries" and "max/SM" columns were wrong) */
        unsigned fb = blockIdx.y * gridDim.x + blockIdx.x;
        if (fb < 256) ((unsigned char *)(tr + 8))[fb] = (unsigned char)smid;
        if (fb == 0) { tr[0] = ln_now(); tr[5] = gridDim.x * gridDim.y; }
        atomicMax(tr + 7, ln_now());
    } else {
        unsigned long long t = ln_now();
        atomicMax(tr + k, t);
        /* who is last: the block id beside the time ([48 + k - 1] for the wait, done, prologue and
         * first tile; 48 bits of time wrap every 78 hours, not within a step) */
        if (k <= 4) atomicMax(tr + 47 + k, (t << 16) | (unsigned long long)((blockIdx.y * gridDim.x + blockIdx.x) & 0xffffu));
    }
}
#else
/* compiled out by default: the stamps cost the kernels registers (spills) even when tr == NULL */
__device__ __forceinline__ void ln_trace(unsigned long long *, int) {}
#endif

/* 16-byte asynchronous copy global -> shared (cp.async, sm_80+; src_bytes 0 writes zeros), its
 * commit and the wait until at most N of this thread's committed groups are still in flight */
__device__ __forceinline__ void cp_async16(void *dst, const void *src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

/* t + the dot of 8 BF16 values (a 16-byte load) with x[0..8), one fma each in order. */
__device__ __forceinline__ float bf16x8_fma(uint4 u, const float *x, float t) {
    const __nv_bfloat162 *b2 = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        float2 f = __bfloat1622float2(b2[e]);
        t = fmaf(f.x, x[2 * e], t);
        t = fmaf(f.y, x[2 * e + 1], t);
    }
    return t;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + __expf(-x)); }
__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + __expf(-x)); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* Byte k (0..11) of the 12 bytes held in words y, z, w (selects, no local memory). */
__device__ __forceinline__ int byte12(uint32_t y, uint32_t z, uint32_t w, int k) {
    uint32_t word = k < 4 ? y : (k < 8 ? z : w);
    return (int)((word >> ((k & 3) * 8)) & 0xffu);
}
__device__ __forceinline__ int byte16(uint4 v, int k) {
    uint32_t word = k < 4 ? v.x : (k < 8 ? v.y : (k < 12 ? v.z : v.w));
    return (int)((word >> ((k & 3) * 8)) & 0xffu);
}
/* llama.cpp get_scale_min_k4 on the 12 scale bytes. */
__device__ __forceinline__ void q4k_scale_min(uint32_t y, uint32_t z, uint32_t w, int s, int *sc, int *m) {
    if (s < 4) {
        *sc = byte12(y, z, w, s) & 63;
        *m = byte12(y, z, w, s + 4) & 63;
    } else {
        *sc = (byte12(y, z, w, s + 4) & 0xf) | ((byte12(y, z, w, s - 4) >> 6) << 4);
        *m = (byte12(y, z, w, s + 4) >> 4) | ((byte12(y, z, w, s) >> 6) << 4);
    }
}

/* Dequantizes 16 consecutive elements [k0, k0+16) of row `row` (k0 % 16 == 0) into out. */
__device__ __forceinline__ void gmat_dequant16(const gmat &W, long row, int k0, float *out) {
    if (W.type == GT_Q4_K) {
        long blk = row * (W.cols >> 8) + (k0 >> 8);
        int e = k0 & 255, s = e >> 5, l0 = e & 31;
        uint4 mv = *(const uint4 *)(W.sc + blk * 16);
        float d = __half2float(__ushort_as_half((unsigned short)(mv.x & 0xffff)));
        float dmin = __half2float(__ushort_as_half((unsigned short)(mv.x >> 16)));
        int sc, m;
        q4k_scale_min(mv.y, mv.z, mv.w, s, &sc, &m);
        uint4 qv = *(const uint4 *)(W.q + blk * 128 + (s >> 1) * 32 + l0);
        float a = d * sc, b = dmin * m;
        int sh = (s & 1) * 4;
#pragma unroll
        for (int i = 0; i < 16; i++) out[i] = a * (float)((byte16(qv, i) >> sh) & 15) - b;
    } else if (W.type == GT_Q6_K) {
        long blk = row * (W.cols >> 8) + (k0 >> 8);
        int e = k0 & 255, n = e >> 7, quarter = (e >> 5) & 3, l0 = e & 31;
        int second = quarter & 1, hi = quarter >> 1;
        uint4 lv = *(const uint4 *)(W.q + blk * 128 + n * 64 + second * 32 + l0);
        uint4 hv = *(const uint4 *)(W.qh + blk * 64 + n * 32 + l0);
        int scale = (int)(int8_t)W.sc[blk * 16 + n * 8 + (l0 >> 4) + 2 * quarter];
        float a = __half2float(W.d[blk]) * scale;
        int hs = 2 * quarter;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            int ql = (byte16(lv, i) >> (hi * 4)) & 15, qh = (byte16(hv, i) >> hs) & 3;
            out[i] = a * (float)((ql | (qh << 4)) - 32);
        }
    } else if (W.type == GT_Q8_0) {
        const int8_t *p = (const int8_t *)W.q + row * W.cols + k0;
        float d = __half2float(W.d[(row * W.cols + k0) >> 5]);
        uint4 v = *(const uint4 *)p;
#pragma unroll
        for (int i = 0; i < 16; i++) out[i] = d * (float)(int8_t)byte16(v, i);
    } else { /* BF16 */
        const __nv_bfloat16 *p = (const __nv_bfloat16 *)W.q + row * W.cols + k0;
#pragma unroll
        for (int i = 0; i < 16; i++) out[i] = __bfloat162float(p[i]);
    }
}

/* Dot of one 32-weight unit u of row `row` with the quantized activation (offset a0 elements). */
__device__ __forceinline__ float unit_dot_q4k(const gmat &W, long row, int u, const qact &A, int a0) {
    long blk = row * (W.cols >> 8) + (u >> 3);
    int c = u & 7, j = c >> 1, half = c & 1;
    uint4 qv = *(const uint4 *)(W.q + blk * 128 + c * 16);
    uint4 mv = *(const uint4 *)(W.sc + blk * 16);
    int e_lo = (u >> 3) * 256 + 64 * j + 16 * half;
    const int4 xa = *(const int4 *)(A.xq + a0 + e_lo);
    const int4 xb = *(const int4 *)(A.xq + a0 + e_lo + 32);
    int slo = 0, shi = 0;
    slo = __dp4a((int)(qv.x & 0x0f0f0f0fu), xa.x, slo);
    slo = __dp4a((int)(qv.y & 0x0f0f0f0fu), xa.y, slo);
    slo = __dp4a((int)(qv.z & 0x0f0f0f0fu), xa.z, slo);
    slo = __dp4a((int)(qv.w & 0x0f0f0f0fu), xa.w, slo);
    shi = __dp4a((int)((qv.x >> 4) & 0x0f0f0f0fu), xb.x, shi);
    shi = __dp4a((int)((qv.y >> 4) & 0x0f0f0f0fu), xb.y, shi);
    shi = __dp4a((int)((qv.z >> 4) & 0x0f0f0f0fu), xb.z, shi);
    shi = __dp4a((int)((qv.w >> 4) & 0x0f0f0f0fu), xb.w, shi);
    float d = __half2float(__ushort_as_half((unsigned short)(mv.x & 0xffff)));
    float dmin = __half2float(__ushort_as_half((unsigned short)(mv.x >> 16)));
    int sc0, m0, sc1, m1;
    q4k_scale_min(mv.y, mv.z, mv.w, 2 * j, &sc0, &m0);
    q4k_scale_min(mv.y, mv.z, mv.w, 2 * j + 1, &sc1, &m1);
    int ab = (a0 + e_lo) >> 5, i16 = (a0 + e_lo) >> 4;
    return d * ((float)sc0 * A.dx[ab] * (float)slo + (float)sc1 * A.dx[ab + 1] * (float)shi) -
           dmin * ((float)m0 * A.s16[i16] + (float)m1 * A.s16[i16 + 2]);
}

__device__ __forceinline__ float unit_dot_q6k(const gmat &W, long row, int u, const qact &A, int a0) {
    long blk = row * (W.cols >> 8) + (u >> 3);
    int c = u & 7, n = c >> 2, cc = c & 3, l0 = (cc & 1) * 16, second = cc >> 1;
    uint4 lv = *(const uint4 *)(W.q + blk * 128 + c * 16);
    uint4 hv = *(const uint4 *)(W.qh + blk * 64 + n * 32 + l0);
    uint4 sv = *(const uint4 *)(W.sc + blk * 16);
    int e_lo = (u >> 3) * 256 + 128 * n + 32 * second + l0;
    const int4 xa = *(const int4 *)(A.xq + a0 + e_lo);
    const int4 xb = *(const int4 *)(A.xq + a0 + e_lo + 64);
    int shl = 2 * second, shh = 4 + 2 * second;
    uint32_t l[4] = {lv.x, lv.y, lv.z, lv.w}, h[4] = {hv.x, hv.y, hv.z, hv.w};
    int xav[4] = {xa.x, xa.y, xa.z, xa.w}, xbv[4] = {xb.x, xb.y, xb.z, xb.w};
    int slo = 0, shi = 0;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        uint32_t qlo = (l[k] & 0x0f0f0f0fu) | (((h[k] >> shl) & 0x03030303u) << 4);
        uint32_t qhi = ((l[k] >> 4) & 0x0f0f0f0fu) | (((h[k] >> shh) & 0x03030303u) << 4);
        slo = __dp4a((int)__vsub4(qlo, 0x20202020u), xav[k], slo);
        shi = __dp4a((int)__vsub4(qhi, 0x20202020u), xbv[k], shi);
    }
    int is = n * 8 + (l0 >> 4) + 2 * second;
    float sc_lo = (float)(int8_t)byte16(sv, is), sc_hi = (float)(int8_t)byte16(sv, is + 4);
    int ab = (a0 + e_lo) >> 5;
    return __half2float(W.d[blk]) * (sc_lo * A.dx[ab] * (float)slo + sc_hi * A.dx[ab + 2] * (float)shi);
}

__device__ __forceinline__ float unit_dot_q8_0(const gmat &W, long row, int u, const qact &A, int a0) {
    const int4 *p = (const int4 *)(W.q + row * (long)W.cols + 32 * u);
    int4 w0 = p[0], w1 = p[1];
    const int4 *xp = (const int4 *)(A.xq + a0 + 32 * u);
    int4 x0 = xp[0], x1 = xp[1];
    int s = 0;
    s = __dp4a(w0.x, x0.x, s); s = __dp4a(w0.y, x0.y, s); s = __dp4a(w0.z, x0.z, s); s = __dp4a(w0.w, x0.w, s);
    s = __dp4a(w1.x, x1.x, s); s = __dp4a(w1.y, x1.y, s); s = __dp4a(w1.z, x1.z, s); s = __dp4a(w1.w, x1.w, s);
    return __half2float(W.d[(row * (long)W.cols >> 5) + u]) * A.dx[(a0 >> 5) + u] * (float)s;
}

__device__ __forceinline__ float unit_dot_bf16(const gmat &W, long row, int u, const qact &A, int a0) {
    const uint4 *p = (const uint4 *)((const __nv_bfloat16 *)W.q + row * (long)W.cols + 32 * u);
    const float *x = A.xf + a0 + 32 * u;
    float acc = 0.0f;
#pragma unroll
    for (int v = 0; v < 4; v++) {
        uint4 w = p[v];
        uint32_t ww[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            acc = fmaf(__uint_as_float(ww[k] << 16), x[8 * v + 2 * k], acc);
            acc = fmaf(__uint_as_float(ww[k] & 0xffff0000u), x[8 * v + 2 * k + 1], acc);
        }
    }
    return acc;
}

/* Partial dot of row `row` over units sub, sub+step, ... (all units of the row between the lanes
 * of a group). The type switch sits outside the loop. */
__device__ __forceinline__ float row_dot_part(const gmat &W, long row, const qact &A, int a0, int sub, int step) {
    int U = W.cols >> 5;
    float acc = 0.0f;
    switch (W.type) {
    case GT_Q4_K:
#pragma unroll 2
        for (int u = sub; u < U; u += step) acc += unit_dot_q4k(W, row, u, A, a0);
        break;
    case GT_Q6_K:
#pragma unroll 2
        for (int u = sub; u < U; u += step) acc += unit_dot_q6k(W, row, u, A, a0);
        break;
    case GT_Q8_0:
        for (int u = sub; u < U; u += step) acc += unit_dot_q8_0(W, row, u, A, a0);
        break;
    default:
        for (int u = sub; u < U; u += step) acc += unit_dot_bf16(W, row, u, A, a0);
        break;
    }
    return acc;
}

/* Partial fp32 dot of row `row` with xf over units sub, sub+step, ... (dequantized weights): the
 * exact path for the router logits. */
__device__ __forceinline__ float row_dot_f32(const gmat &W, long row, const float *xf, int sub, int step) {
    int U = W.cols >> 5;
    float acc = 0.0f, f[16];
    for (int u = sub; u < U; u += step)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            gmat_dequant16(W, row, 32 * u + 16 * h, f);
#pragma unroll
            for (int i = 0; i < 16; i++) acc = fmaf(f[i], xf[32 * u + 16 * h + i], acc);
        }
    return acc;
}

/* Lanes per row for a row of `cols` elements: the largest power of two <= cols/32, at most 32. */
__host__ __device__ __forceinline__ int gemv_lanes(int cols) {
    int U = cols >> 5, l = 1;
    while (l * 2 <= U && l < 32) l *= 2;
    return l;
}

/* Sum over the aligned group of `lanes` lanes (power of two). */
__device__ __forceinline__ float group_sum(float v, int lanes) {
    for (int o = lanes >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif
