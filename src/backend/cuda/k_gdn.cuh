/*
 * k_gdn.cuh — Gated DeltaNet kernels.
 *
 *   k_gdn_step<DK, DECODE>: one kernel for the recurrence. grid (HV, DV/(8*warps)), block 32*warps (<= 128);
 *     warp w owns 8 value columns j, its lanes split the DK key rows in 4 groups (lane = 8*rg + c),
 *     so each lane holds DK/4 fp32 state values in registers. Per token: L2-normalise q, k (fp32,
 *     q scaled by 1/sqrt(DK)), beta = sigmoid(b), alpha = exp(ssm_a * softplus(a + dt_bias)), then
 *       S *= alpha; u = S^T k; delta = beta (v - u); S += k delta^T; o = S^T q.
 *     DECODE: T = 1, the causal conv (+SiLU) is computed inline from the 4-slot ring of raw inputs
 *     (slot = position & 3; each block reads slots of earlier positions and writes only the current
 *     slot of the channels it owns, so blocks never race), and S is read from / written to global.
 *     Prefill: the conv ran before (k_gdn_conv), the state stays in registers over the chunk.
 *   k_gdn_conv / k_gdn_ring: prefill conv, one thread per (token, channel); then the ring update.
 *   k_gated_norm_rows: y = rmsnorm(o_h) * g * silu(z_h) per token and v-head, written as bf16 for the
 *     output projection GEMM (decode does this inside the GEMV prologue instead).
 * State layout: S[HV][DK][DV] fp32 (key row major, value column contiguous).
 */
#ifndef LILAC_K_GDN_CUH
#define LILAC_K_GDN_CUH

#include "cu_common.cuh"

struct gdn_args {
    const float *qkv;      /* DECODE: [conv_dim] raw projection; prefill: [T][conv_dim] after conv+SiLU */
    const float *b;        /* [T][HV] beta logits (row stride ldab) */
    const float *a;        /* [T][HV] decay inputs (row stride ldab) */
    int ldab;
    const float *conv_w;   /* [conv_dim][4] */
    float *ring;           /* [4][conv_dim] raw inputs of the last positions (slot = pos & 3) */
    float *S;              /* [HV][DK][DV] */
    const float *dt_bias;  /* [HV] */
    const float *ssm_a;    /* [HV] */
    float *o;              /* [T][HV*DV] */
    const int *pos;        /* device: position of the first token */
    int T, HK, HV, DV, tiled;
    float *S2;             /* [HV][DK][DV] the state's second copy (NULL: one copy, updated in place) */
};

/* The double-buffered state (session 36, LILAC_CUDA_GDN_DB): the state after n tokens lives in copy
 * n & 1, S for even n, S2 for odd. A step at position p reads copy p & 1 and writes copy (p + 1) & 1,
 * so no reader of the old state can see a new value whatever the order of the blocks (k_lgdn's P
 * blocks of a head each read the whole old state and write back their 1/P of it: in place that
 * needs a barrier between all reads and any write-back, which cost 1.4 % of decode at 4K). A scan of
 * T tokens reads copy p & 1 and writes copy (p + T) & 1 (in place when T is even: its blocks own
 * their columns). */
__host__ __device__ __forceinline__ float *gdn_state_copy(float *S, float *S2, long n) { return S2 && (n & 1) ? S2 : S; }

/* One warp's share of k_gdn_step: v-head h, value columns [j0, j0 + 8); qs, ks: [DK] floats of
 * shared memory owned by this warp. Decode reads its activations with plain loads, not __ldg: the
 * persistent decode kernel (k_persist.cuh) writes them earlier in the same launch, where the
 * non-coherent path may return stale data. */
template <int DK, bool DECODE, bool PDL = false>
__device__ __forceinline__ void gdn_step_warp(const gdn_args &g, int h, int j0, float *qs, float *ks) {
    constexpr int RPL = DK / 4, KPL = DK / 32;
    int lane = threadIdx.x & 31, c = lane & 7, rg = lane >> 3;
    int j = j0 + c;
    int r = g.HV / g.HK, kh = g.tiled ? h % g.HK : h / r;
    int QK = g.HK * DK, CD = 2 * QK + g.HV * g.DV, VD = g.HV * g.DV;
    int pos0 = *g.pos;
    int T = DECODE ? 1 : g.T;
    long soff = ((long)h * DK + rg * RPL) * g.DV + j;
    float *Sp = gdn_state_copy(g.S, g.S2, pos0) + soff;
    float s[RPL];
#pragma unroll
    for (int t = 0; t < RPL; t++) s[t] = Sp[(long)t * g.DV];
    float dtb = __ldg(g.dt_bias + h), sa = __ldg(g.ssm_a + h);
    int qch = kh * DK, kch = QK + kh * DK, vch = 2 * QK + h * g.DV + j;
    /* DECODE: the conv weights and the ring slots of earlier positions (written by this layer's
     * step at earlier tokens) are loaded before the wait too; only the projection is the previous
     * kernel's */
    int p = pos0, slot = p & 3;
    float hq[KPL][3], hk[KPL][3], wq[KPL][4], wk[KPL][4], hv[3], wv[4];
    if (DECODE) {
#pragma unroll
        for (int i = 0; i < KPL; i++) {
            int chq = qch + lane + 32 * i, chk = kch + lane + 32 * i;
            float4 a4 = __ldg((const float4 *)(g.conv_w + chq * 4)), b4 = __ldg((const float4 *)(g.conv_w + chk * 4));
            wq[i][0] = a4.x; wq[i][1] = a4.y; wq[i][2] = a4.z; wq[i][3] = a4.w;
            wk[i][0] = b4.x; wk[i][1] = b4.y; wk[i][2] = b4.z; wk[i][3] = b4.w;
#pragma unroll
            for (int jj = 0; jj < 3; jj++) {
                int pp = p - 3 + jj;
                hq[i][jj] = pp >= 0 ? g.ring[(long)(pp & 3) * CD + chq] : 0.0f;
                hk[i][jj] = pp >= 0 ? g.ring[(long)(pp & 3) * CD + chk] : 0.0f;
            }
        }
        float4 v4 = __ldg((const float4 *)(g.conv_w + vch * 4));
        wv[0] = v4.x; wv[1] = v4.y; wv[2] = v4.z; wv[3] = v4.w;
#pragma unroll
        for (int jj = 0; jj < 3; jj++) { int pp = p - 3 + jj; hv[jj] = pp >= 0 ? g.ring[(long)(pp & 3) * CD + vch] : 0.0f; }
    }
    /* PDL: the state, written by this layer's step one token ago, is loaded while the kernel before
     * (the in-projection) still runs; its outputs only after the wait */
    if (PDL) {
        pdl_wait();
        pdl_trigger();
    }
    /* inputs of token t (prefill: prefetched one token ahead, so the loads of t+1 overlap the
     * recurrence of t) */
    float nq[KPL], nk[KPL], nv = 0.0f, nb = 0.0f, na = 0.0f;
    if (DECODE) {
        /* the projection, then the conv; only slot pos & 3 of owned channels is written */
        bool own_qk = j0 == 0 && h == (g.tiled ? kh : kh * r);
        float cq[KPL], ck[KPL];
        float cv = g.qkv[vch];
#pragma unroll
        for (int i = 0; i < KPL; i++) {
            cq[i] = g.qkv[qch + lane + 32 * i];
            ck[i] = g.qkv[kch + lane + 32 * i];
        }
        nb = g.b[h];
        na = g.a[h];
#pragma unroll
        for (int i = 0; i < KPL; i++) {
            float aq = wq[i][3] * cq[i], ak = wk[i][3] * ck[i];
#pragma unroll
            for (int jj = 0; jj < 3; jj++) { aq += wq[i][jj] * hq[i][jj]; ak += wk[i][jj] * hk[i][jj]; }
            nq[i] = silu_f(aq);
            nk[i] = silu_f(ak);
        }
        float av = wv[3] * cv;
#pragma unroll
        for (int jj = 0; jj < 3; jj++) av += wv[jj] * hv[jj];
        nv = silu_f(av);
        if (own_qk) {
#pragma unroll
            for (int i = 0; i < KPL; i++) {
                g.ring[(long)slot * CD + qch + lane + 32 * i] = cq[i];
                g.ring[(long)slot * CD + kch + lane + 32 * i] = ck[i];
            }
        }
        if (rg == 0) g.ring[(long)slot * CD + vch] = cv;
    } else {
        const float *row = g.qkv;
#pragma unroll
        for (int i = 0; i < KPL; i++) { nq[i] = __ldg(row + qch + lane + 32 * i); nk[i] = __ldg(row + kch + lane + 32 * i); }
        nv = __ldg(row + vch);
        nb = __ldg(g.b + h);
        na = __ldg(g.a + h);
    }
    for (int t = 0; t < T; t++) {
        float qv[KPL], kv[KPL], vj = nv, bl = nb, al = na;
#pragma unroll
        for (int i = 0; i < KPL; i++) { qv[i] = nq[i]; kv[i] = nk[i]; }
        if (!DECODE && t + 1 < T) {
            const float *row = g.qkv + (long)(t + 1) * CD;
#pragma unroll
            for (int i = 0; i < KPL; i++) { nq[i] = __ldg(row + qch + lane + 32 * i); nk[i] = __ldg(row + kch + lane + 32 * i); }
            nv = __ldg(row + vch);
            nb = __ldg(g.b + (long)(t + 1) * g.ldab + h);
            na = __ldg(g.a + (long)(t + 1) * g.ldab + h);
        }
        float sq = 0.0f, sk = 0.0f;
#pragma unroll
        for (int i = 0; i < KPL; i++) { sq += qv[i] * qv[i]; sk += kv[i] * kv[i]; }
        sq = warp_sum(sq);
        sk = warp_sum(sk);
        float rq = rsqrtf(sq + 1e-6f) * rsqrtf((float)DK), rk = rsqrtf(sk + 1e-6f);
#pragma unroll
        for (int i = 0; i < KPL; i++) { qs[lane + 32 * i] = qv[i] * rq; ks[lane + 32 * i] = kv[i] * rk; }
        __syncwarp();
        float beta = sigmoid_f(bl);
        float alpha = expf(sa * softplus_f(al + dtb));
        float u0 = 0.0f, u1 = 0.0f;
#pragma unroll
        for (int i = 0; i < RPL; i += 2) {
            s[i] *= alpha; u0 = fmaf(s[i], ks[rg * RPL + i], u0);
            s[i + 1] *= alpha; u1 = fmaf(s[i + 1], ks[rg * RPL + i + 1], u1);
        }
        float u = u0 + u1;
        u += __shfl_xor_sync(0xffffffffu, u, 8);
        u += __shfl_xor_sync(0xffffffffu, u, 16);
        float delta = beta * (vj - u);
        float o0 = 0.0f, o1 = 0.0f;
#pragma unroll
        for (int i = 0; i < RPL; i += 2) {
            s[i] = fmaf(ks[rg * RPL + i], delta, s[i]); o0 = fmaf(s[i], qs[rg * RPL + i], o0);
            s[i + 1] = fmaf(ks[rg * RPL + i + 1], delta, s[i + 1]); o1 = fmaf(s[i + 1], qs[rg * RPL + i + 1], o1);
        }
        float o = o0 + o1;
        o += __shfl_xor_sync(0xffffffffu, o, 8);
        o += __shfl_xor_sync(0xffffffffu, o, 16);
        if (rg == 0) g.o[(long)t * VD + h * g.DV + j] = o;
        __syncwarp();
    }
    Sp = gdn_state_copy(g.S, g.S2, pos0 + T) + soff;
#pragma unroll
    for (int t = 0; t < RPL; t++) Sp[(long)t * g.DV] = s[t];
}

template <int DK, bool DECODE>
__global__ void __launch_bounds__(128) k_gdn_step(const gdn_args g) {
    if (!DECODE) pdl_trigger(); /* decode: launched with PDL, triggers after its wait */
    __shared__ float qs[4][DK], ks[4][DK];
    int w = threadIdx.x >> 5;
    gdn_step_warp<DK, DECODE, DECODE>(g, blockIdx.x, blockIdx.y * (blockDim.x >> 2) + w * 8, qs[w], ks[w]); /* 8 columns per warp */
}

/* Prefill causal conv + SiLU, one thread per (token, channel). in: raw [T][CD] (row stride ldin);
 * out: [T][CD]. Inputs before the chunk come from the ring. grid (ceil(CD/256), T), block 256. */
__global__ void k_gdn_conv(const float *__restrict__ in, int ldin, float *__restrict__ out, const float *__restrict__ conv_w,
                           const float *__restrict__ ring, const int *pos, int T, int CD) {
    int ch = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (ch >= CD) return;
    int p0 = *pos;
    float4 w = __ldg((const float4 *)(conv_w + ch * 4));
    float x[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        int tt = t - 3 + j;
        if (tt >= 0) x[j] = __ldg(in + (long)tt * ldin + ch);
        else x[j] = p0 + tt >= 0 ? __ldg(ring + (long)((p0 + tt) & 3) * CD + ch) : 0.0f;
    }
    out[(long)t * CD + ch] = silu_f(w.x * x[0] + w.y * x[1] + w.z * x[2] + w.w * x[3]);
}

/* After k_gdn_conv: the ring keeps the raw inputs of the chunk's last (up to 3) positions. */
__global__ void k_gdn_ring(const float *in, int ldin, float *ring, const int *pos, int T, int CD) {
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= CD) return;
    int p0 = *pos;
    for (int t = T - 3 < 0 ? 0 : T - 3; t < T; t++) ring[(long)((p0 + t) & 3) * CD + ch] = in[(long)t * ldin + ch];
}

/* y[t][h*hd + i] = bf16(rmsnorm(o_h) * g[i] * silu(z_h[i])). grid (T, HV), block 32. */
__global__ void k_gated_norm_rows(const float *o, const float *z, int ldz, const float *gain, __nv_bfloat16 *y,
                                  int HV, int hd, float eps) {
    int t = blockIdx.x, h = blockIdx.y, lane = threadIdx.x;
    const float *op = o + (long)t * HV * hd + h * hd;
    const float *zp = z + (long)t * ldz + h * hd;
    float ss = 0.0f;
    for (int i = lane; i < hd; i += 32) ss += op[i] * op[i];
    float r = rsqrtf(warp_sum(ss) / (float)hd + eps);
    for (int i = lane; i < hd; i += 32)
        y[(long)t * HV * hd + h * hd + i] = __float2bfloat16(op[i] * r * gain[i] * silu_f(zp[i]));
}

#endif
