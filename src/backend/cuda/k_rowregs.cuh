/*
 * k_rowregs.cuh — a warp's share of one weight row held in registers, so that a decode kernel can
 * issue the loads of its first row before its prologue (RMSNorm, quantization, top-k) and of row
 * i+1 while it computes row i: the fixed latency of every GEMV-like kernel then overlaps its
 * memory traffic instead of adding to it.
 *
 * rowregs<WT>: lane `sub` of a group of `lanes` lanes holds units sub, sub + lanes, ... (nu <= RR_NU
 * units of 32 weights; RR_NU is the compile-time capacity). load() issues the 16-byte loads; dot() consumes them with the quantized
 * activation (qact). Shapes: W [rows, cols], cols / 32 == lanes * nu.
 */
#ifndef LILAC_K_ROWREGS_CUH
#define LILAC_K_ROWREGS_CUH

#include "cu_common.cuh"

#define RR_NU_MAX 4

template <int WT, int RR_NU> struct rowregs;

template <int RR_NU> struct rowregs<GT_Q4_K, RR_NU> {
    uint4 q[RR_NU], m[RR_NU];
    __device__ __forceinline__ void load(const gmat &W, long row, int sub, int lanes, int nu) {
#pragma unroll
        for (int i = 0; i < RR_NU; i++)
            if (i < nu) {
                int u = sub + i * lanes;
                long blk = row * (W.cols >> 8) + (u >> 3);
                q[i] = __ldg((const uint4 *)(W.q + blk * 128 + (u & 7) * 16));
                m[i] = __ldg((const uint4 *)(W.sc + blk * 16));
            }
    }
    __device__ __forceinline__ float dot(const qact &A, int a0, int sub, int lanes, int nu) const {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < RR_NU; i++)
            if (i < nu) {
                int u = sub + i * lanes, c = u & 7, j = c >> 1, half = c & 1;
                int e_lo = (u >> 3) * 256 + 64 * j + 16 * half;
                const int4 xa = *(const int4 *)(A.xq + a0 + e_lo);
                const int4 xb = *(const int4 *)(A.xq + a0 + e_lo + 32);
                uint4 qv = q[i], mv = m[i];
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
                acc += d * ((float)sc0 * A.dx[ab] * (float)slo + (float)sc1 * A.dx[ab + 1] * (float)shi) -
                       dmin * ((float)m0 * A.s16[i16] + (float)m1 * A.s16[i16 + 2]);
            }
        return acc;
    }
};

template <int RR_NU> struct rowregs<GT_Q6_K, RR_NU> {
    uint4 l[RR_NU], h[RR_NU], s[RR_NU];
    float d[RR_NU];
    __device__ __forceinline__ void load(const gmat &W, long row, int sub, int lanes, int nu) {
#pragma unroll
        for (int i = 0; i < RR_NU; i++)
            if (i < nu) {
                int u = sub + i * lanes, c = u & 7, n = c >> 2, l0 = (c & 1) * 16;
                long blk = row * (W.cols >> 8) + (u >> 3);
                l[i] = __ldg((const uint4 *)(W.q + blk * 128 + c * 16));
                h[i] = __ldg((const uint4 *)(W.qh + blk * 64 + n * 32 + l0));
                s[i] = __ldg((const uint4 *)(W.sc + blk * 16));
                d[i] = __half2float(W.d[blk]);
            }
    }
    __device__ __forceinline__ float dot(const qact &A, int a0, int sub, int lanes, int nu) const {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < RR_NU; i++)
            if (i < nu) {
                int u = sub + i * lanes, c = u & 7, n = c >> 2, cc = c & 3, l0 = (cc & 1) * 16, second = cc >> 1;
                int e_lo = (u >> 3) * 256 + 128 * n + 32 * second + l0;
                const int4 xa = *(const int4 *)(A.xq + a0 + e_lo);
                const int4 xb = *(const int4 *)(A.xq + a0 + e_lo + 64);
                int shl = 2 * second, shh = 4 + 2 * second;
                uint32_t lw[4] = {l[i].x, l[i].y, l[i].z, l[i].w}, hw[4] = {h[i].x, h[i].y, h[i].z, h[i].w};
                int xav[4] = {xa.x, xa.y, xa.z, xa.w}, xbv[4] = {xb.x, xb.y, xb.z, xb.w};
                int slo = 0, shi = 0;
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    uint32_t qlo = (lw[k] & 0x0f0f0f0fu) | (((hw[k] >> shl) & 0x03030303u) << 4);
                    uint32_t qhi = ((lw[k] >> 4) & 0x0f0f0f0fu) | (((hw[k] >> shh) & 0x03030303u) << 4);
                    slo = __dp4a((int)__vsub4(qlo, 0x20202020u), xav[k], slo);
                    shi = __dp4a((int)__vsub4(qhi, 0x20202020u), xbv[k], shi);
                }
                int is = n * 8 + (l0 >> 4) + 2 * second;
                float sc_lo = (float)(int8_t)byte16(s[i], is), sc_hi = (float)(int8_t)byte16(s[i], is + 4);
                int ab = (a0 + e_lo) >> 5;
                acc += d[i] * (sc_lo * A.dx[ab] * (float)slo + sc_hi * A.dx[ab + 2] * (float)shi);
            }
        return acc;
    }
};

template <int RR_NU> struct rowregs<GT_Q8_0, RR_NU> {
    uint4 w0[RR_NU], w1[RR_NU];
    float d[RR_NU];
    __device__ __forceinline__ void load(const gmat &W, long row, int sub, int lanes, int nu) {
#pragma unroll
        for (int i = 0; i < RR_NU; i++)
            if (i < nu) {
                int u = sub + i * lanes;
                const uint4 *p = (const uint4 *)(W.q + row * (long)W.cols + 32 * u);
                w0[i] = __ldg(p);
                w1[i] = __ldg(p + 1);
                d[i] = __half2float(W.d[(row * (long)W.cols >> 5) + u]);
            }
    }
    __device__ __forceinline__ float dot(const qact &A, int a0, int sub, int lanes, int nu) const {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < RR_NU; i++)
            if (i < nu) {
                int u = sub + i * lanes;
                const int4 *xp = (const int4 *)(A.xq + a0 + 32 * u);
                int4 x0 = xp[0], x1 = xp[1];
                int s = 0;
                s = __dp4a((int)w0[i].x, x0.x, s); s = __dp4a((int)w0[i].y, x0.y, s);
                s = __dp4a((int)w0[i].z, x0.z, s); s = __dp4a((int)w0[i].w, x0.w, s);
                s = __dp4a((int)w1[i].x, x1.x, s); s = __dp4a((int)w1[i].y, x1.y, s);
                s = __dp4a((int)w1[i].z, x1.z, s); s = __dp4a((int)w1[i].w, x1.w, s);
                acc += d[i] * A.dx[(a0 >> 5) + u] * (float)s;
            }
        return acc;
    }
};

template <int RR_NU> struct rowregs<GT_BF16, RR_NU> {
    uint4 w[RR_NU][4];
    __device__ __forceinline__ void load(const gmat &W, long row, int sub, int lanes, int nu) {
#pragma unroll
        for (int i = 0; i < RR_NU; i++)
            if (i < nu) {
                const uint4 *p = (const uint4 *)((const __nv_bfloat16 *)W.q + row * (long)W.cols + 32 * (sub + i * lanes));
#pragma unroll
                for (int v = 0; v < 4; v++) w[i][v] = __ldg(p + v);
            }
    }
    __device__ __forceinline__ float dot(const qact &A, int a0, int sub, int lanes, int nu) const {
        float acc = 0.0f;
#pragma unroll
        for (int i = 0; i < RR_NU; i++)
            if (i < nu) {
                const float *x = A.xf + a0 + 32 * (sub + i * lanes);
#pragma unroll
                for (int v = 0; v < 4; v++) {
                    uint32_t ww[4] = {w[i][v].x, w[i][v].y, w[i][v].z, w[i][v].w};
#pragma unroll
                    for (int k = 0; k < 4; k++) {
                        acc = fmaf(__uint_as_float(ww[k] << 16), x[8 * v + 2 * k], acc);
                        acc = fmaf(__uint_as_float(ww[k] & 0xffff0000u), x[8 * v + 2 * k + 1], acc);
                    }
                }
            }
        return acc;
    }
};

#endif
