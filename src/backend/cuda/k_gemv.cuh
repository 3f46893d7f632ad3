/*
 * k_gemv.cuh — decode (batch-1) kernels: the matrix-vector product on packed weights with a fused
 * prologue (RMSNorm / gated head-norm + activation quantization, recomputed per block from L2 so no
 * separate launch is needed) and epilogue (store, residual add, argmax), the router top-k, and the
 * two fused MoE kernels (gate/up + SwiGLU over the selected experts and the shared expert; down +
 * weighted combine + residual add).
 *
 * All kernels are pure functions of pointers, shapes and the stream they run on.
 */
#ifndef LILAC_K_GEMV_CUH
#define LILAC_K_GEMV_CUH

#include "cu_common.cuh"
#include "k_rowregs.cuh"

enum { PRO_PLAIN = 0, PRO_RMSNORM = 1, PRO_HEADNORM_GATED = 2 };
enum { EPI_STORE = 0, EPI_ADD = 1 };

#define GEMV_THREADS 512
#define GEMV_MAX_SEG 4
#define QK_MAX_TOPK 16
#define TOPK_REG_E 256   /* router logits topk_warp keeps in registers (8 per lane) */

struct gemv_seg {
    gmat W;
    float *y;           /* [W.rows] */
    int epi;            /* EPI_* */
};

struct gemv_args {
    gemv_seg seg[GEMV_MAX_SEG];
    int nseg;
    int total_rows;
    /* prologue: input x [K] */
    int pro;
    const float *x;     /* [K] */
    int K;
    const float *g;     /* RMSNORM: [K] gain; HEADNORM_GATED: [hd] gain */
    const float *z;     /* HEADNORM_GATED: [K] gate (silu) */
    int hd;             /* HEADNORM_GATED: head size */
    float eps;
    unsigned long long *argmax; /* optional: packed (value, ~row) max over segment 0 */
    int exact;          /* k_gemv_q: dot the fp32 input with dequantized weights (the router: its
                         * top-k must not flip on the q8 rounding of the activation) */
};

/* Shared-memory bytes of a quantized activation of K elements. */
__host__ __device__ static inline size_t qact_smem_bytes(int K) {
    return (size_t)K * 4 + (size_t)K + (size_t)(K / 32) * 4 + (size_t)(K / 16) * 4 + 64;
}

/* Carves the activation buffers out of dynamic shared memory. */
__device__ __forceinline__ void qact_carve(unsigned char *sm, int K, float **xf, int8_t **xq, float **dx, float **s16) {
    *xf = (float *)sm;
    *dx = (float *)(sm + (size_t)K * 4);
    *s16 = (float *)(sm + (size_t)K * 4 + (size_t)(K / 32) * 4);
    *xq = (int8_t *)(sm + (size_t)K * 4 + (size_t)(K / 32) * 4 + (size_t)(K / 16) * 4);
}

/* Block-wide sum (all threads get the result). red: >= 32 floats of shared memory. */
__device__ __forceinline__ float block_sum(float v, float *red) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (l == 0) red[w] = v;
    __syncthreads();
    float t = l < nw ? red[l] : 0.0f;
    return warp_sum(t);
}

/* Quantizes xf[K] (already in shared memory) into xq/dx/s16, one warp per 32-element block. */
/* One 32-element group of the q8 activation, one value per lane (l = lane): xq[0..32), its scale
 * dx[0] and the two scaled 16-element sums s16[0..2) (layout in cu_common.cuh). Whole warp. */
__device__ __forceinline__ void q8_group(float v, int l, int8_t *xq, float *dx, float *s16) {
    float amax = warp_max(fabsf(v));
    float d = amax * (1.0f / 127.0f), id = amax > 0.0f ? 127.0f / amax : 0.0f;
    int q = __float2int_rn(v * id);
    xq[l] = (int8_t)q;
    float s = (float)q;
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (l == 0) dx[0] = d;
    if ((l & 15) == 0) s16[l >> 4] = d * s;
}

__device__ __forceinline__ void qact_quantize(const float *xf, int8_t *xq, float *dx, float *s16, int K) {
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
#pragma unroll 4
    for (int b = w; b < K / 32; b += nw) q8_group(xf[32 * b + l], l, xq + 32 * b, dx + b, s16 + 2 * b);
}

/* The prologue's global loads are issued in batches (PRO_BATCH per thread, all before any is used):
 * its inputs were written by the previous phase and sit in L2, where a load costs ~1 µs while the
 * weights stream; a loop that uses each value before loading the next pays that per element. */
#define PRO_BATCH 8

/* Gated head norm for heads of 32 * EPL: one warp per head, HPC heads of a warp loaded at once. */
template <int EPL>
__device__ __forceinline__ void pro_headnorm(const gemv_args &a, float *xf) {
    constexpr int HPC = 16 / EPL;
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5, hd = 32 * EPL, nh = a.K / hd;
    float gv[EPL];
#pragma unroll
    for (int e = 0; e < EPL; e++) gv[e] = a.g[l + 32 * e];
    for (int h0 = w; h0 < nh; h0 += nw * HPC) {
        float xv[HPC][EPL], zv[HPC][EPL];
#pragma unroll
        for (int c = 0; c < HPC; c++) {
            int h = h0 + c * nw;
#pragma unroll
            for (int e = 0; e < EPL; e++) {
                xv[c][e] = h < nh ? a.x[h * hd + l + 32 * e] : 0.0f;
                zv[c][e] = h < nh ? a.z[h * hd + l + 32 * e] : 0.0f;
            }
        }
#pragma unroll
        for (int c = 0; c < HPC; c++) {
            int h = h0 + c * nw;
            float ss = 0.0f;
#pragma unroll
            for (int e = 0; e < EPL; e++) ss += xv[c][e] * xv[c][e];
            float r = rsqrtf(warp_sum(ss) / (float)hd + a.eps);
            if (h < nh)
#pragma unroll
                for (int e = 0; e < EPL; e++) xf[h * hd + l + 32 * e] = xv[c][e] * r * gv[e] * silu_f(zv[c][e]);
        }
    }
}

/* Prologue: xf = transform(x), then quantize. red: 32 floats. */
__device__ __forceinline__ void gemv_prologue(const gemv_args &a, unsigned char *sm, float *red, qact *A) {
    float *xf, *dx, *s16;
    int8_t *xq;
    qact_carve(sm, a.K, &xf, &xq, &dx, &s16);
    int K = a.K, bd = blockDim.x;
    if (a.pro == PRO_RMSNORM) {
        /* x and g loaded together; x*g waits in shared memory for the 1/rms factor */
        float ss = 0.0f;
        for (int k0 = threadIdx.x; k0 < K; k0 += PRO_BATCH * bd) {
            float xv[PRO_BATCH], gv[PRO_BATCH];
#pragma unroll
            for (int i = 0; i < PRO_BATCH; i++) {
                int k = k0 + i * bd;
                xv[i] = k < K ? a.x[k] : 0.0f;
                gv[i] = k < K ? a.g[k] : 0.0f;
            }
#pragma unroll
            for (int i = 0; i < PRO_BATCH; i++) {
                int k = k0 + i * bd;
                if (k < K) { ss += xv[i] * xv[i]; xf[k] = xv[i] * gv[i]; }
            }
        }
        float r = rsqrtf(block_sum(ss, red) / (float)K + a.eps);
        for (int k = threadIdx.x; k < K; k += bd) xf[k] *= r;
    } else if (a.pro == PRO_HEADNORM_GATED && (a.hd == 128 || a.hd == 64 || a.hd == 32) && K % a.hd == 0) {
        if (a.hd == 128) pro_headnorm<4>(a, xf);
        else if (a.hd == 64) pro_headnorm<2>(a, xf);
        else pro_headnorm<1>(a, xf);
    } else if (a.pro == PRO_HEADNORM_GATED) {
        /* one warp per head: y = rmsnorm(o_h) * g * silu(z_h) */
        int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = bd >> 5, hd = a.hd;
        for (int h = w; h < K / hd; h += nw) {
            float ss = 0.0f;
            for (int i = l; i < hd; i += 32) { float v = a.x[h * hd + i]; ss += v * v; }
            float r = rsqrtf(warp_sum(ss) / (float)hd + a.eps);
            for (int i = l; i < hd; i += 32) xf[h * hd + i] = a.x[h * hd + i] * r * a.g[i] * silu_f(a.z[h * hd + i]);
        }
    } else {
        for (int k0 = threadIdx.x; k0 < K; k0 += 2 * PRO_BATCH * bd) {
            float xv[2 * PRO_BATCH];
#pragma unroll
            for (int i = 0; i < 2 * PRO_BATCH; i++) xv[i] = k0 + i * bd < K ? a.x[k0 + i * bd] : 0.0f;
#pragma unroll
            for (int i = 0; i < 2 * PRO_BATCH; i++)
                if (k0 + i * bd < K) xf[k0 + i * bd] = xv[i];
        }
    }
    __syncthreads();
    qact_quantize(xf, xq, dx, s16, K);
    __syncthreads();
    *A = qact{xf, xq, dx, s16};
}

__device__ __forceinline__ unsigned long long argmax_pack(float v, int row) {
    uint32_t u = __float_as_uint(v);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned long long)(0xffffffffu - (uint32_t)row);
}
__device__ __forceinline__ int argmax_row(unsigned long long p) { return (int)(0xffffffffu - (uint32_t)(p & 0xffffffffu)); }

/* The block's argmax (packed, per-lane `best`) merged into *a.argmax. best_s: one slot per warp.
 * Whole block. */
__device__ __forceinline__ void gemv_argmax_block(const gemv_args &a, unsigned long long best, unsigned long long *best_s) {
    if (!a.argmax) return;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        unsigned long long t = __shfl_xor_sync(0xffffffffu, best, o);
        best = t > best ? t : best;
    }
    if (lane == 0) best_s[warp] = best;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long b = 0;
        for (int w = 0; w < nw; w++) b = best_s[w] > b ? best_s[w] : b;
        atomicMax(a.argmax, b);
    }
}

/* y = W x over up to 4 row segments sharing one input (e.g. qkv | z | b | a).
 * grid: any (rows are grid-strided), block GEMV_THREADS, dynamic smem qact_smem_bytes(K). */
__global__ void __launch_bounds__(GEMV_THREADS) k_gemv(const gemv_args a) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ unsigned long long best_s[GEMV_THREADS / 32];
    qact A;
    gemv_prologue(a, sm, red, &A);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int lanes = gemv_lanes(a.K), rpw = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    unsigned long long best = 0;
    int step = gridDim.x * nw * rpw;
    for (int r0 = (blockIdx.x * nw + warp) * rpw; r0 < a.total_rows; r0 += step) {
        int r = r0 + grp;
        int s = 0, rr = r;
        while (s < a.nseg - 1 && rr >= a.seg[s].W.rows) { rr -= a.seg[s].W.rows; s++; }
        float v = 0.0f;
        bool ok = r < a.total_rows;
        if (ok) v = row_dot_part(a.seg[s].W, rr, A, 0, sub, lanes);
        v = group_sum(v, lanes);
        if (ok && sub == 0) {
            float *y = a.seg[s].y + rr;
            if (a.seg[s].epi == EPI_ADD) *y += v; else *y = v;
            if (a.argmax && s == 0) { unsigned long long p = argmax_pack(v, rr); best = p > best ? p : best; }
        }
    }
    gemv_argmax_block(a, best, best_s);
}

/* ---- router top-k (softmax over E, top k, renormalized: weights = exp(l - m) / sum over top k) */

/* Computes ids[k], w[k] from logits[E] in one warp (the calling warp). Ties pick the lower index. */
__device__ void topk_warp(const float *logits, int E, int k, int *ids, float *w) {
    int lane = threadIdx.x & 31;
    float top_l[QK_MAX_TOPK];
    uint32_t taken = 0; /* lane-local bitmask of chosen experts: bit c = expert lane + 32c (E <= 1024) */
    float sum = 0.0f;
    for (int t = 0; t < k; t++) {
        float bv = -INFINITY;
        int bi = 0x7fffffff;
        for (int e = lane, c = 0; e < E; e += 32, c++) {
            bool tk = (taken >> c) & 1u;
            float v = logits[e];
            if (!tk && (v > bv || (v == bv && e < bi))) { bv = v; bi = e; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
        }
        if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
        if (lane == 0) ids[t] = bi;
        top_l[t < QK_MAX_TOPK ? t : 0] = bv;
    }
    float m = top_l[0];
    for (int t = 0; t < k; t++) sum += __expf(top_l[t] - m);
    if (lane == 0)
        for (int t = 0; t < k; t++) w[t] = __expf(top_l[t] - m) / sum;
}


/* topk_warp for the persistent decode kernel: the same result, but the first TOPK_REG_E logits are
 * read once into registers and the rounds are unrolled to QK_MAX_TOPK so that the chosen logits
 * stay in registers too. There every global access is an L2 round trip (its shared-memory
 * carve-out leaves L1 almost no room) and the k rounds of re-reading the logits cost ~6 µs per layer
 * (bench/results/2026-11-30-h200-s4); in the per-kernel MoE kernels, whose every warp computes the
 * top-k, the extra registers cost more than they save (measured: the decode 275 -> 265 tok/s). */
__device__ __forceinline__ void topk_warp_reg(const float *logits, int E, int k, int *ids, float *w) {
    int lane = threadIdx.x & 31;
    float top_l[QK_MAX_TOPK];
    uint32_t taken = 0; /* lane-local bitmask of chosen experts: bit c = expert lane + 32c (E <= 1024) */
    /* the first TOPK_REG_E logits are loaded once, all in flight together (each round would
     * otherwise re-read them: k dependent round trips to L2) */
    float lv[TOPK_REG_E / 32];
#pragma unroll
    for (int c = 0; c < TOPK_REG_E / 32; c++) lv[c] = lane + 32 * c < E ? logits[lane + 32 * c] : -INFINITY;
#pragma unroll
    for (int t = 0; t < QK_MAX_TOPK; t++) {
        top_l[t] = -INFINITY;
        if (t >= k) continue;
        float bv = -INFINITY;
        int bi = 0x7fffffff;
#pragma unroll
        for (int c = 0; c < TOPK_REG_E / 32; c++) { /* the logits held in registers */
            int e = lane + 32 * c;
            bool tk = (taken >> c) & 1u;
            if (e < E && !tk && (lv[c] > bv || (lv[c] == bv && e < bi))) { bv = lv[c]; bi = e; }
        }
        for (int e = lane + TOPK_REG_E, c = TOPK_REG_E / 32; e < E; e += 32, c++) { /* E > TOPK_REG_E */
            bool tk = (taken >> c) & 1u;
            float v = logits[e];
            if (!tk && (v > bv || (v == bv && e < bi))) { bv = v; bi = e; }
        }
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
        }
        if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
        if (lane == 0) ids[t] = bi;
        top_l[t] = bv;
    }
    float m = top_l[0], sum = 0.0f;
#pragma unroll
    for (int t = 0; t < QK_MAX_TOPK; t++)
        if (t < k) sum += __expf(top_l[t] - m);
    if (lane == 0) {
#pragma unroll
        for (int t = 0; t < QK_MAX_TOPK; t++)
            if (t < k) w[t] = __expf(top_l[t] - m) / sum;
    }
}

/* ---- fused MoE, decode */

struct moe_args {
    const float *x;        /* [H] residual stream (input of ffn_norm; also receives the output) */
    const float *g;        /* [H] ffn_norm gain */
    float eps;
    int H, E, k, FF, FS;
    const float *logits;   /* [E + 1] router logits, [E] = shared-expert gate logit */
    gmat gate, up, down;   /* experts fused: gate/up [E*FF, H], down [E*H, FF] */
    gmat sgate, sup, sdown;/* shared expert: [FS, H], [FS, H], [H, FS] (FS == 0: none) */
    float *h;              /* [k*FF + FS] SwiGLU activations */
    float *out;            /* [H] (down: out += moe) */
    int *ids_out;          /* [k] optional: chosen experts */
    float *w_out;          /* [k] optional */};

/* h[s*FF + r] = silu(gate_e[r] x̂) * (up_e[r] x̂) for the k chosen experts e = ids[s], and the shared
 * expert at h[k*FF + r]. Prologue: rmsnorm + quantize + top-k. grid any, block GEMV_THREADS,
 * dynamic smem qact_smem_bytes(H). */
__global__ void __launch_bounds__(GEMV_THREADS) k_moe_gateup(const moe_args a) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ int ids[QK_MAX_TOPK];
    __shared__ float wts[QK_MAX_TOPK];
    gemv_args pa = {};
    pa.pro = PRO_RMSNORM; pa.x = a.x; pa.K = a.H; pa.g = a.g; pa.eps = a.eps;
    qact A;
    if (threadIdx.x < 32) topk_warp(a.logits, a.E, a.k, ids, wts);
    gemv_prologue(pa, sm, red, &A); /* has __syncthreads after the top-k writes */
    if (blockIdx.x == 0 && threadIdx.x < a.k) {
        if (a.ids_out) a.ids_out[threadIdx.x] = ids[threadIdx.x];
        if (a.w_out) a.w_out[threadIdx.x] = wts[threadIdx.x];
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int lanes = gemv_lanes(a.H), rpw = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    int total = a.k * a.FF + a.FS;
    int step = gridDim.x * nw * rpw;
    for (int r0 = (blockIdx.x * nw + warp) * rpw; r0 < total; r0 += step) {
        int r = r0 + grp;
        float gv = 0.0f, uv = 0.0f;
        if (r < total) {
            if (r < a.k * a.FF) {
                long row = (long)ids[r / a.FF] * a.FF + r % a.FF;
                gv = row_dot_part(a.gate, row, A, 0, sub, lanes);
                uv = row_dot_part(a.up, row, A, 0, sub, lanes);
            } else {
                long row = r - a.k * a.FF;
                gv = row_dot_part(a.sgate, row, A, 0, sub, lanes);
                uv = row_dot_part(a.sup, row, A, 0, sub, lanes);
            }
        }
        gv = group_sum(gv, lanes);
        uv = group_sum(uv, lanes);
        if (r < total && sub == 0) a.h[r] = silu_f(gv) * uv;
    }
}

/* out[r] += sum_s w_s * (down_{e_s}[r] · h_s) + sigmoid(logit_sh) * (sdown[r] · h_sh).
 * Prologue: quantize h (k*FF + FS) and recompute the top-k weights. grid any, block GEMV_THREADS,
 * dynamic smem qact_smem_bytes(k*FF + FS). */
__global__ void __launch_bounds__(GEMV_THREADS) k_moe_down(const moe_args a) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ int ids[QK_MAX_TOPK];
    __shared__ float wts[QK_MAX_TOPK + 1];
    int Kd = a.k * a.FF + a.FS;
    gemv_args pa = {};
    pa.pro = PRO_PLAIN; pa.x = a.h; pa.K = Kd;
    if (threadIdx.x < 32) {
        topk_warp(a.logits, a.E, a.k, ids, wts);
        if (threadIdx.x == 0) wts[a.k] = a.FS ? sigmoid_f(a.logits[a.E]) : 0.0f;
    }
    qact A;
    gemv_prologue(pa, sm, red, &A);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int lanes = gemv_lanes(a.FF), par = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    int nslot = a.k + (a.FS ? 1 : 0);
    for (int r = blockIdx.x * nw + warp; r < a.H; r += gridDim.x * nw) {
        float acc = 0.0f;
        for (int s = grp; s < nslot; s += par) {
            float v;
            if (s < a.k) v = row_dot_part(a.down, (long)ids[s] * a.H + r, A, s * a.FF, sub, lanes);
            else v = row_dot_part(a.sdown, r, A, a.k * a.FF, sub, lanes);
            acc += wts[s] * v;
        }
        acc = warp_sum(acc);
        if (lane == 0) a.out[r] += acc;
    }
}

/* ---- prefetching variants (the ones decode uses; see k_rowregs.cuh). WT is the weight type of the
 * dominant segment; rows of other types take the generic path. Launched as one wave (grid = SMs x
 * resident blocks), each warp walking rows with the next row's loads in flight. Needs
 * K / 32 / gemv_lanes(K) <= NU (the register capacity in units per lane). */

__device__ __forceinline__ void gemv_seg_of(const gemv_args &a, int r, int *s, int *lr) {
    int i = 0;
    while (i < a.nseg - 1 && r >= a.seg[i].W.rows) { r -= a.seg[i].W.rows; i++; }
    *s = i;
    *lr = r;
}

/* One warp's rows of a GEMV with register prefetch, shared by k_gemv_pf, k_gemv_q and the
 * persistent decode kernel. A batch is RB rows per lane group (rpw groups per warp), all loaded
 * together; batches are strided by `step` rows. The caller fetch()es the first batch (before its
 * wait for the activation), then rows() computes every batch, loading batch i+1 after the dots of
 * batch i, and returns this lane's packed argmax over segment 0 (0 when a.argmax is NULL). */
template <int WT, int NU, int RB>
struct gemv_warp {
    rowregs<WT, NU> R[RB];
    int sg[RB], lr[RB];
    bool fast[RB];
    int lanes, rpw, sub, grp, nu;
    __device__ __forceinline__ gemv_warp(const gemv_args &a) {
        int lane = threadIdx.x & 31;
        lanes = gemv_lanes(a.K); rpw = 32 / lanes; sub = lane & (lanes - 1); grp = lane / lanes;
        nu = (a.K >> 5) / lanes;
    }
    __device__ __forceinline__ void fetch(const gemv_args &a, int base) {
#pragma unroll
        for (int b = 0; b < RB; b++) {
            int r = base + b * rpw + grp;
            fast[b] = false;
            sg[b] = 0; lr[b] = 0;
            if (r < a.total_rows) {
                gemv_seg_of(a, r, &sg[b], &lr[b]);
                fast[b] = a.seg[sg[b]].W.type == WT;
                if (fast[b]) R[b].load(a.seg[sg[b]].W, lr[b], sub, lanes, nu);
            }
        }
    }
    __device__ __forceinline__ unsigned long long rows(const gemv_args &a, const qact &A, int r0, int step) {
        unsigned long long best = 0;
        for (; r0 < a.total_rows; r0 += step) {
            float v[RB];
            int cs[RB], clr[RB];
#pragma unroll
            for (int b = 0; b < RB; b++) {
                int r = r0 + b * rpw + grp;
                v[b] = 0.0f;
                if (r < a.total_rows) v[b] = fast[b] ? R[b].dot(A, 0, sub, lanes, nu) : row_dot_part(a.seg[sg[b]].W, lr[b], A, 0, sub, lanes);
                cs[b] = sg[b]; clr[b] = lr[b];
            }
            if (r0 + step < a.total_rows) fetch(a, r0 + step);
#pragma unroll
            for (int b = 0; b < RB; b++) {
                int r = r0 + b * rpw + grp;
                float x = group_sum(v[b], lanes);
                if (r < a.total_rows && sub == 0) {
                    float *y = a.seg[cs[b]].y + clr[b];
                    if (a.seg[cs[b]].epi == EPI_ADD) *y += x; else *y = x;
                    if (a.argmax && cs[b] == 0) { unsigned long long p = argmax_pack(x, clr[b]); best = p > best ? p : best; }
                }
            }
        }
        return best;
    }
};

/* Exact GEMV rows (the router: its top-k must not flip on the q8 rounding of the activation): BF16
 * rows dot the fp32 input, others are dequantized; warp rows w0, w0 + stride, ... (rpw per warp). */
__device__ __forceinline__ void gemv_rows_exact(const gemv_args &a, const qact &A, int w0, int stride) {
    int lane = threadIdx.x & 31, lanes = gemv_lanes(a.K), rpw = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    for (; w0 < a.total_rows; w0 += stride * rpw) {
        int r = w0 + grp, s = 0, rr = 0;
        bool ok = r < a.total_rows;
        if (ok) gemv_seg_of(a, r, &s, &rr);
        float x = 0.0f;
        if (ok) x = a.seg[s].W.type == GT_BF16 ? row_dot_part(a.seg[s].W, rr, A, 0, sub, lanes) : row_dot_f32(a.seg[s].W, rr, A.xf, sub, lanes);
        x = group_sum(x, lanes);
        if (ok && sub == 0) {
            float *y = a.seg[s].y + rr;
            if (a.seg[s].epi == EPI_ADD) *y += x; else *y = x;
        }
    }
}


template <int WT, int NU, int RB>
__global__ void __launch_bounds__(GEMV_THREADS) k_gemv_pf(const gemv_args a) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ unsigned long long best_s[GEMV_THREADS / 32];
    int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    gemv_warp<WT, NU, RB> G(a);
    int step = gridDim.x * nw * G.rpw * RB;
    int r0 = (blockIdx.x * nw + warp) * G.rpw * RB;
    pdl_trigger();
    if (r0 < a.total_rows) G.fetch(a, r0);
    pdl_wait();
    qact A;
    gemv_prologue(a, sm, red, &A);
    gemv_argmax_block(a, G.rows(a, A, r0, step), best_s);
}

/* MoE gate/up with prefetch: every warp computes the top-k itself (no block barrier before the
 * expert loads), loads its first gate/up rows, then joins the block's RMSNorm/quantize prologue.
 * grid: one wave, block GEMV_THREADS, dynamic smem qact_smem_bytes(H). */
#define MOE_GU_THREADS 256
#define MOE_GU_RB 2

/* One warp's gate/up rows (h = silu(gate x) * (up x)) with register prefetch, shared by
 * k_moe_gateup_pf, k_moe_gateup_q and the persistent decode kernel. Rows [0, k*FF) are the chosen
 * experts' (ids: this warp's top-k, in shared memory), [k*FF, k*FF + FS) the shared expert's. */
template <int WT, int NU>
struct moe_gu_warp {
    static constexpr int RB = MOE_GU_RB;
    rowregs<WT, NU> G[RB], U[RB];
    const gmat *gw[RB], *uw[RB];
    long row[RB];
    bool fast[RB];
    int lanes, rpw, sub, grp, nu, total;
    __device__ __forceinline__ moe_gu_warp(const moe_args &a) {
        int lane = threadIdx.x & 31;
        lanes = gemv_lanes(a.H); rpw = 32 / lanes; sub = lane & (lanes - 1); grp = lane / lanes;
        nu = (a.H >> 5) / lanes;
        total = a.k * a.FF + a.FS;
    }
    __device__ __forceinline__ void fetch(const moe_args &a, const int *ids, int base) {
#pragma unroll
        for (int b = 0; b < RB; b++) {
            int r = base + b * rpw + grp;
            fast[b] = false;
            gw[b] = &a.gate; uw[b] = &a.up; row[b] = 0;
            if (r < total) {
                if (r < a.k * a.FF) { row[b] = (long)ids[r / a.FF] * a.FF + r % a.FF; }
                else { gw[b] = &a.sgate; uw[b] = &a.sup; row[b] = r - a.k * a.FF; }
                fast[b] = gw[b]->type == WT && uw[b]->type == WT;
                if (fast[b]) { G[b].load(*gw[b], row[b], sub, lanes, nu); U[b].load(*uw[b], row[b], sub, lanes, nu); }
            }
        }
    }
    __device__ __forceinline__ void rows(const moe_args &a, const int *ids, const qact &A, int r0, int step) {
        for (; r0 < total; r0 += step) {
            float gv[RB], uv[RB];
#pragma unroll
            for (int b = 0; b < RB; b++) {
                int r = r0 + b * rpw + grp;
                gv[b] = uv[b] = 0.0f;
                if (r < total) {
                    if (fast[b]) { gv[b] = G[b].dot(A, 0, sub, lanes, nu); uv[b] = U[b].dot(A, 0, sub, lanes, nu); }
                    else { gv[b] = row_dot_part(*gw[b], row[b], A, 0, sub, lanes); uv[b] = row_dot_part(*uw[b], row[b], A, 0, sub, lanes); }
                }
            }
            if (r0 + step < total) fetch(a, ids, r0 + step);
#pragma unroll
            for (int b = 0; b < RB; b++) {
                int r = r0 + b * rpw + grp;
                float x = group_sum(gv[b], lanes), y = group_sum(uv[b], lanes);
                if (r < total && sub == 0) a.h[r] = silu_f(x) * y;
            }
        }
    }
};
template <int WT, int NU>
__global__ void __launch_bounds__(MOE_GU_THREADS) k_moe_gateup_pf(const moe_args a) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ int ids_w[MOE_GU_THREADS / 32][QK_MAX_TOPK];
    __shared__ float wts_w[MOE_GU_THREADS / 32][QK_MAX_TOPK];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    pdl_trigger();
    pdl_wait();
    topk_warp(a.logits, a.E, a.k, ids_w[warp], wts_w[warp]);
    __syncwarp();
    const int *ids = ids_w[warp];
    if (blockIdx.x == 0 && warp == 0 && lane < a.k) {
        if (a.ids_out) a.ids_out[lane] = ids[lane];
        if (a.w_out) a.w_out[lane] = wts_w[0][lane];
    }
    moe_gu_warp<WT, NU> M(a);
    int step = gridDim.x * nw * M.rpw * M.RB;
    int r0 = (blockIdx.x * nw + warp) * M.rpw * M.RB;
    if (r0 < M.total) M.fetch(a, ids, r0);
    gemv_args pa = {};
    pa.pro = PRO_RMSNORM; pa.x = a.x; pa.K = a.H; pa.g = a.g; pa.eps = a.eps;
    qact A;
    gemv_prologue(pa, sm, red, &A);
    M.rows(a, ids, A, r0, step);
}

#define MOE_DOWN_IT 5
#define MOE_DOWN_THREADS 256

/* MoE down with prefetch: a warp per output row; lanes = gemv_lanes(FF) lanes per slot, 32/lanes
 * slots in parallel, at most MOE_DOWN_IT rounds (k + 1 <= MOE_DOWN_IT * 32 / lanes). The warp's
 * top-k, then all its expert-row loads, then the block's quantization of h, then the dots.
 * grid ceil(H / 8), block MOE_DOWN_THREADS, dynamic smem qact_smem_bytes(k*FF + FS). */
template <int WT, int NU>
__global__ void __launch_bounds__(MOE_DOWN_THREADS) k_moe_down_pf(const moe_args a) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ int ids_w[MOE_DOWN_THREADS / 32][QK_MAX_TOPK];
    __shared__ float wts_w[MOE_DOWN_THREADS / 32][QK_MAX_TOPK + 1];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    pdl_trigger();
    pdl_wait();
    topk_warp(a.logits, a.E, a.k, ids_w[warp], wts_w[warp]);
    if (lane == 0) wts_w[warp][a.k] = a.FS ? sigmoid_f(a.logits[a.E]) : 0.0f;
    __syncwarp();
    int lanes = gemv_lanes(a.FF), par = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    int nu = (a.FF >> 5) / lanes;
    int nslot = a.k + (a.FS ? 1 : 0);
    int r = blockIdx.x * nw + warp;
    rowregs<WT, NU> R[MOE_DOWN_IT];
    bool sfast = a.FS && a.sdown.type == WT && a.FS == a.FF;
    if (r < a.H) {
#pragma unroll
        for (int it = 0; it < MOE_DOWN_IT; it++) {
            int s = grp + it * par;
            if (s < a.k) R[it].load(a.down, (long)ids_w[warp][s] * a.H + r, sub, lanes, nu);
            else if (s < nslot && sfast) R[it].load(a.sdown, r, sub, lanes, nu);
        }
    }
    gemv_args pa = {};
    pa.pro = PRO_PLAIN; pa.x = a.h; pa.K = a.k * a.FF + a.FS;
    qact A;
    gemv_prologue(pa, sm, red, &A);
    if (r >= a.H) return;
    float acc = 0.0f;
#pragma unroll
    for (int it = 0; it < MOE_DOWN_IT; it++) {
        int s = grp + it * par;
        if (s < a.k || (s < nslot && sfast)) acc += wts_w[warp][s] * R[it].dot(A, s * a.FF, sub, lanes, nu);
        else if (s < nslot) acc += wts_w[warp][s] * row_dot_part(a.sdown, r, A, a.k * a.FF, sub, gemv_lanes(a.FF));
    }
    acc = warp_sum(acc);
    if (lane == 0) a.out[r] += acc;
}

#endif
