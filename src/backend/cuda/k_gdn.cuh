/*
 * k_gdn.cuh — Gated DeltaNet kernels.
 *
 *   k_gdn_step<DK, DECODE>: one kernel for the recurrence. grid (HV, DV/32), block 128 (4 warps);
 *     warp w owns 8 value columns j, its lanes split the DK key rows in 4 groups (lane = 8*rg + c),
 *     so each lane holds DK/4 fp32 state values in registers. Per token: L2-normalise q, k (fp32,
 *     q scaled by 1/sqrt(DK)), beta = sigmoid(b), alpha = exp(ssm_a * softplus(a + dt_bias)), then
 *       S *= alpha; u = S^T k; delta = beta (v - u); S += k delta^T; o = S^T q.
 *     DECODE: T = 1, the causal conv (+SiLU) is computed inline from the 4-slot ring of raw inputs
 *     (slot = position & 3; each block reads slots of earlier positions and writes only the current
 *     slot of the channels it owns, so blocks never race), and S is read from / written to global.
 *     Prefill: the conv ran before (k_gdn_conv), the state stays in registers over the chunk.
 *   k_gdn_conv: prefill conv, one thread per channel walking the chunk's tokens; updates the ring.
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
};

template <int DK, bool DECODE>
__global__ void __launch_bounds__(128) k_gdn_step(const gdn_args g) {
    constexpr int RPL = DK / 4, KPL = DK / 32;
    __shared__ float qs[4][DK], ks[4][DK];
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31, c = lane & 7, rg = lane >> 3;
    int h = blockIdx.x, j = blockIdx.y * 32 + w * 8 + c;
    int r = g.HV / g.HK, kh = g.tiled ? h % g.HK : h / r;
    int QK = g.HK * DK, CD = 2 * QK + g.HV * g.DV, VD = g.HV * g.DV;
    int pos0 = *g.pos;
    float *Sp = g.S + ((long)h * DK + rg * RPL) * g.DV + j;
    float s[RPL];
#pragma unroll
    for (int t = 0; t < RPL; t++) s[t] = Sp[(long)t * g.DV];
    float dtb = g.dt_bias[h], sa = g.ssm_a[h];
    int qch = kh * DK, kch = QK + kh * DK, vch = 2 * QK + h * g.DV + j;
    int T = DECODE ? 1 : g.T;
    for (int t = 0; t < T; t++) {
        float qv[KPL], kv[KPL], vj;
        if (DECODE) {
            int p = pos0, slot = p & 3;
            bool own_qk = blockIdx.y == 0 && w == 0 && h == (g.tiled ? kh : kh * r);
            auto conv = [&](int ch, bool own) {
                float cur = g.qkv[ch];
                float acc = g.conv_w[ch * 4 + 3] * cur;
#pragma unroll
                for (int jj = 0; jj < 3; jj++) {
                    int pp = p - 3 + jj;
                    if (pp >= 0) acc += g.conv_w[ch * 4 + jj] * g.ring[(long)(pp & 3) * CD + ch];
                }
                if (own) g.ring[(long)slot * CD + ch] = cur;
                return silu_f(acc);
            };
#pragma unroll
            for (int i = 0; i < KPL; i++) {
                qv[i] = conv(qch + lane + 32 * i, own_qk);
                kv[i] = conv(kch + lane + 32 * i, own_qk);
            }
            vj = conv(vch, rg == 0);
        } else {
            const float *row = g.qkv + (long)t * CD;
#pragma unroll
            for (int i = 0; i < KPL; i++) { qv[i] = row[qch + lane + 32 * i]; kv[i] = row[kch + lane + 32 * i]; }
            vj = row[vch];
        }
        float sq = 0.0f, sk = 0.0f;
#pragma unroll
        for (int i = 0; i < KPL; i++) { sq += qv[i] * qv[i]; sk += kv[i] * kv[i]; }
        sq = warp_sum(sq);
        sk = warp_sum(sk);
        float rq = rsqrtf(sq + 1e-6f) * rsqrtf((float)DK), rk = rsqrtf(sk + 1e-6f);
#pragma unroll
        for (int i = 0; i < KPL; i++) { qs[w][lane + 32 * i] = qv[i] * rq; ks[w][lane + 32 * i] = kv[i] * rk; }
        __syncwarp();
        float beta = sigmoid_f(g.b[(long)t * g.ldab + h]);
        float alpha = expf(sa * softplus_f(g.a[(long)t * g.ldab + h] + dtb));
        float u0 = 0.0f, u1 = 0.0f;
#pragma unroll
        for (int i = 0; i < RPL; i += 2) {
            s[i] *= alpha; u0 = fmaf(s[i], ks[w][rg * RPL + i], u0);
            s[i + 1] *= alpha; u1 = fmaf(s[i + 1], ks[w][rg * RPL + i + 1], u1);
        }
        float u = u0 + u1;
        u += __shfl_xor_sync(0xffffffffu, u, 8);
        u += __shfl_xor_sync(0xffffffffu, u, 16);
        float delta = beta * (vj - u);
        float o0 = 0.0f, o1 = 0.0f;
#pragma unroll
        for (int i = 0; i < RPL; i += 2) {
            s[i] = fmaf(ks[w][rg * RPL + i], delta, s[i]); o0 = fmaf(s[i], qs[w][rg * RPL + i], o0);
            s[i + 1] = fmaf(ks[w][rg * RPL + i + 1], delta, s[i + 1]); o1 = fmaf(s[i + 1], qs[w][rg * RPL + i + 1], o1);
        }
        float o = o0 + o1;
        o += __shfl_xor_sync(0xffffffffu, o, 8);
        o += __shfl_xor_sync(0xffffffffu, o, 16);
        if (rg == 0) g.o[(long)t * VD + h * g.DV + j] = o;
        __syncwarp();
    }
#pragma unroll
    for (int t = 0; t < RPL; t++) Sp[(long)t * g.DV] = s[t];
}

/* Prefill causal conv + SiLU. in: raw [T][CD] (row stride ldin); out: [T][CD]. grid ceil(CD/256),
 * block 256. Updates ring slots of the chunk's last (up to 3) positions. */
__global__ void k_gdn_conv(const float *in, int ldin, float *out, const float *conv_w, float *ring,
                           const int *pos, int T, int CD) {
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= CD) return;
    int p0 = *pos;
    float w0 = conv_w[ch * 4 + 0], w1 = conv_w[ch * 4 + 1], w2 = conv_w[ch * 4 + 2], w3 = conv_w[ch * 4 + 3];
    float h1 = p0 - 3 >= 0 ? ring[(long)((p0 - 3) & 3) * CD + ch] : 0.0f;
    float h2 = p0 - 2 >= 0 ? ring[(long)((p0 - 2) & 3) * CD + ch] : 0.0f;
    float h3 = p0 - 1 >= 0 ? ring[(long)((p0 - 1) & 3) * CD + ch] : 0.0f;
    for (int t = 0; t < T; t++) {
        float cur = in[(long)t * ldin + ch];
        out[(long)t * CD + ch] = silu_f(w0 * h1 + w1 * h2 + w2 * h3 + w3 * cur);
        h1 = h2; h2 = h3; h3 = cur;
    }
    int pe = p0 + T; /* next position; h3 = raw(pe-1), h2 = raw(pe-2), h1 = raw(pe-3) */
    if (pe - 1 >= p0) ring[(long)((pe - 1) & 3) * CD + ch] = h3;
    if (pe - 2 >= p0) ring[(long)((pe - 2) & 3) * CD + ch] = h2;
    if (pe - 3 >= p0) ring[(long)((pe - 3) & 3) * CD + ch] = h1;
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
