/*
 * k_gemvq.cuh — decode kernels that read a quantized activation from global memory instead of
 * building it in every block (issue 6). k_qact computes the input transform (RMSNorm, gated head
 * norm, or none) and the q8 quantization ONCE, into a qbuf in global memory (a few KB, stays in L2);
 * the GEMV / MoE kernels after it then have no prologue: their blocks issue the weight loads as soon
 * as they are resident (before griddepcontrol.wait, so they overlap k_qact and the tail of the
 * kernel before it) and only wait for the activation to compute the dots.
 *
 * PDL convention of these kernels (all launched with programmatic stream serialization): every
 * kernel calls pdl_trigger() only AFTER its pdl_wait(). Then when kernel N+1 starts, kernel N has
 * passed its wait, so kernel N-1 and everything before it has completed: N+1 may, before its own
 * wait, read weights and any activation written two or more kernels back (k_moe_down_q reads the
 * router logits that way), but never what kernel N writes.
 */
#ifndef LILAC_K_GEMVQ_CUH
#define LILAC_K_GEMVQ_CUH

#include "k_gemv.cuh"

/* A quantized activation in global memory (layout of qact, see cu_common.cuh). */
struct qbuf {
    float *xf;      /* [K] transformed fp32 input (read by BF16 weights) */
    int8_t *xq;     /* [K] */
    float *dx;      /* [K/32] */
    float *s16;     /* [K/16] */
};

#define QACT_THREADS 512

/* q = quantize(transform(x)) for the prologue kinds of gemv_args (pro, x, K, g, z, hd, eps).
 * grid 1, block QACT_THREADS, dynamic smem K * 4. */
__global__ void __launch_bounds__(QACT_THREADS) k_qact(const gemv_args a, const qbuf q) {
    extern __shared__ __align__(16) float xs[]; /* [K] */
    __shared__ float red[32];
    pdl_wait();
    pdl_trigger();
    int K = a.K;
    if (a.pro == PRO_RMSNORM) {
        float ss = 0.0f;
        for (int k = threadIdx.x; k < K; k += blockDim.x) { float v = a.x[k]; ss += v * v; xs[k] = v * a.g[k]; }
        float r = rsqrtf(block_sum(ss, red) / (float)K + a.eps);
        for (int k = threadIdx.x; k < K; k += blockDim.x) xs[k] *= r;
    } else if (a.pro == PRO_HEADNORM_GATED) {
        int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5, hd = a.hd;
        for (int h = w; h < K / hd; h += nw) {
            float ss = 0.0f;
            for (int i = l; i < hd; i += 32) { float v = a.x[h * hd + i]; ss += v * v; }
            float r = rsqrtf(warp_sum(ss) / (float)hd + a.eps);
            for (int i = l; i < hd; i += 32) xs[h * hd + i] = a.x[h * hd + i] * r * a.g[i] * silu_f(a.z[h * hd + i]);
        }
    } else {
        for (int k = threadIdx.x; k < K; k += blockDim.x) xs[k] = a.x[k];
    }
    __syncthreads();
    qact_quantize(xs, q.xq, q.dx, q.s16, K);
    for (int k = threadIdx.x; k < K; k += blockDim.x) q.xf[k] = xs[k];
}

/* y = W x̂ over up to 4 row segments, x̂ = the qbuf. One wave of blocks; each warp holds RB row
 * groups of loads in registers: batch 0 is loaded before the wait, batch i+1 after batch i's dots.
 * NU: register capacity in units per lane (K / 32 / gemv_lanes(K) <= NU). */
template <int WT, int NU, int RB, int THREADS>
__global__ void __launch_bounds__(THREADS) k_gemv_q(const gemv_args a, const qbuf q) {
    __shared__ unsigned long long best_s[THREADS / 32];
    int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    gemv_warp<WT, NU, RB> G(a);
    int step = gridDim.x * nw * G.rpw * RB;
    int r0 = (blockIdx.x * nw + warp) * G.rpw * RB;
    if (r0 < a.total_rows && !a.exact) G.fetch(a, r0);
    pdl_wait();
    pdl_trigger();
    const qact A{q.xf, q.xq, q.dx, q.s16};
    if (a.exact) { /* small matrices only (the router): fp32 dots, no register prefetch */
        gemv_rows_exact(a, A, (blockIdx.x * nw + warp) * G.rpw, gridDim.x * nw);
        return;
    }
    gemv_argmax_block(a, G.rows(a, A, r0, step), best_s);
}

/* MoE gate/up + SwiGLU on the qbuf of the normed residual (the router GEMV's input, so the same
 * qbuf serves both). Each warp computes the top-k itself from the router logits (written by the
 * kernel just before: read after the wait). grid one wave, block MOE_GU_THREADS. */
template <int WT, int NU>
__global__ void __launch_bounds__(MOE_GU_THREADS) k_moe_gateup_q(const moe_args a, const qbuf q) {
    __shared__ int ids_w[MOE_GU_THREADS / 32][QK_MAX_TOPK];
    __shared__ float wts_w[MOE_GU_THREADS / 32][QK_MAX_TOPK];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    moe_gu_warp<WT, NU> M(a);
    int step = gridDim.x * nw * M.rpw * M.RB;
    int r0 = (blockIdx.x * nw + warp) * M.rpw * M.RB;
    /* shared-expert rows do not depend on the router: a warp whose first batch is all shared rows
     * loads it before the wait */
    bool pre = r0 >= a.k * a.FF;
    const int *ids = ids_w[warp];
    if (pre && r0 < M.total) M.fetch(a, ids, r0);
    pdl_wait();
    pdl_trigger();
    topk_warp(a.logits, a.E, a.k, ids_w[warp], wts_w[warp]);
    __syncwarp();
    if (blockIdx.x == 0 && warp == 0 && lane < a.k) {
        if (a.ids_out) a.ids_out[lane] = ids[lane];
        if (a.w_out) a.w_out[lane] = wts_w[0][lane];
    }
    if (!pre && r0 < M.total) M.fetch(a, ids, r0);
    M.rows(a, ids, qact{q.xf, q.xq, q.dx, q.s16}, r0, step);
}

/* MoE down + weighted combine + residual add on the qbuf of h (k_qact, PRO_PLAIN, K = k*FF + FS,
 * the kernel just before). The router logits were written three kernels back, so each warp
 * computes its top-k and issues all its expert-row loads BEFORE the wait. A warp per output row as
 * in k_moe_down_pf. grid ceil(H / 8), block MOE_DOWN_THREADS. */
template <int WT, int NU>
__global__ void __launch_bounds__(MOE_DOWN_THREADS) k_moe_down_q(const moe_args a, const qbuf q) {
    __shared__ int ids_w[MOE_DOWN_THREADS / 32][QK_MAX_TOPK];
    __shared__ float wts_w[MOE_DOWN_THREADS / 32][QK_MAX_TOPK + 1];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
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
    pdl_wait();
    pdl_trigger();
    if (r >= a.H) return;
    const qact A{q.xf, q.xq, q.dx, q.s16};
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


/* ---- bulk-copy GEMV: the weight stream goes through the copy engine (cp.async.bulk into shared
 * memory, completion on an mbarrier) instead of registers, so a block keeps NST tiles of TR rows
 * (tens of KB) in flight with no register cost and no per-warp load round trips; the first NST
 * tiles are requested before griddepcontrol.wait. Q4_K / Q6_K segments (others are read from
 * global memory directly). Stage layout (bytes, nb = K / 256): Q4_K [TR*nb*128 q][TR*nb*16 meta];
 * Q6_K [TR*nb*128 ql][TR*nb*64 qh][TR*nb*16 scales] (the fp16 d stays in global memory). */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
/* A ring of n single-arrival mbarriers, initialised and fenced for the async proxy (thread 0). */
__device__ __forceinline__ void mbar_ring_init(uint64_t *bar, int n) {
    for (int i = 0; i < n; i++) mbar_init(&bar[i], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
    uint32_t a = smem_u32(bar), done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
}

/* Bytes of one row of a WT matrix in a stage. */
__host__ __device__ static inline int tma_row_bytes(int WT, int K) { return (K >> 8) * (WT == GT_Q4_K ? 144 : 208); }

#define TMA_THREADS 256
#define TMA_MAX_ST 8

/* tile t (over the concatenated segments, TR rows each, the last tile of a segment partial) */
__device__ __forceinline__ void tma_tile(const gemv_args &a, int TR, int t, int *s, int *r0, int *n) {
    int i = 0;
    for (;;) {
        int nt = (a.seg[i].W.rows + TR - 1) / TR;
        if (t < nt || i == a.nseg - 1) break;
        t -= nt;
        i++;
    }
    *s = i;
    *r0 = t * TR;
    *n = min(TR, a.seg[i].W.rows - t * TR);
}

template <int WT>
__global__ void __launch_bounds__(TMA_THREADS) k_gemv_tma(const gemv_args a, const qbuf q, int TR, int NST, int ntiles) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[TMA_MAX_ST];
    __shared__ float red[32];
    __shared__ unsigned long long best_s[TMA_THREADS / 32];
    int nb = a.K >> 8;
    size_t stage = (size_t)TR * tma_row_bytes(WT, a.K);
    auto issue = [&](int i) { /* thread 0: request tile blockIdx.x + i * gridDim.x into stage i % NST */
        int t = blockIdx.x + i * gridDim.x, s, r0, n;
        tma_tile(a, TR, t, &s, &r0, &n);
        const gmat &W = a.seg[s].W;
        uint64_t *b = &bar[i % NST];
        unsigned char *base = sm + (size_t)(i % NST) * stage;
        if (W.type != WT) { mbar_expect_tx(b, 0); return; }
        size_t blk0 = (size_t)r0 * nb, nblk = (size_t)n * nb;
        if (WT == GT_Q4_K) {
            mbar_expect_tx(b, (uint32_t)(nblk * 144));
            bulk_g2s(base, W.q + blk0 * 128, (uint32_t)(nblk * 128), b);
            bulk_g2s(base + (size_t)TR * nb * 128, W.sc + blk0 * 16, (uint32_t)(nblk * 16), b);
        } else {
            mbar_expect_tx(b, (uint32_t)(nblk * 208));
            bulk_g2s(base, W.q + blk0 * 128, (uint32_t)(nblk * 128), b);
            bulk_g2s(base + (size_t)TR * nb * 128, W.qh + blk0 * 64, (uint32_t)(nblk * 64), b);
            bulk_g2s(base + (size_t)TR * nb * 192, W.sc + blk0 * 16, (uint32_t)(nblk * 16), b);
        }
    };
    int mine = ntiles > (int)blockIdx.x ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    if (threadIdx.x == 0) {
        mbar_ring_init(bar, NST);
        for (int i = 0; i < NST && i < mine; i++) issue(i);
    }
    __syncthreads();
    pdl_wait();
    pdl_trigger();
    qact A{q.xf, q.xq, q.dx, q.s16};
    /* q.xq == NULL: no k_qact before this kernel; the block builds the activation itself in the
     * shared memory after the stages, while its first tiles are in flight */
    if (!q.xq) gemv_prologue(a, sm + (size_t)NST * stage, red, &A);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int lanes = gemv_lanes(a.K), rpw = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    unsigned long long best = 0;
    for (int i = 0; i < mine; i++) {
        int t = blockIdx.x + i * gridDim.x, s, r0, n;
        tma_tile(a, TR, t, &s, &r0, &n);
        mbar_wait(&bar[i % NST], (uint32_t)((i / NST) & 1));
        const gmat &W = a.seg[s].W;
        unsigned char *base = sm + (size_t)(i % NST) * stage;
        gmat V = W; /* the tile as a matrix of n rows in shared memory */
        V.rows = n;
        V.q = base;
        if (WT == GT_Q4_K) V.sc = base + (size_t)TR * nb * 128;
        else { V.qh = base + (size_t)TR * nb * 128; V.sc = base + (size_t)TR * nb * 192; V.d = W.d + (size_t)r0 * nb; }
        bool fast = W.type == WT;
        for (int w0 = warp * rpw; w0 < n; w0 += nw * rpw) {
            int lr = w0 + grp;
            float v = 0.0f;
            if (lr < n) v = fast ? row_dot_part(V, lr, A, 0, sub, lanes) : row_dot_part(W, r0 + lr, A, 0, sub, lanes);
            v = group_sum(v, lanes);
            if (lr < n && sub == 0) {
                float *y = a.seg[s].y + r0 + lr;
                if (a.seg[s].epi == EPI_ADD) *y += v; else *y = v;
                if (a.argmax && s == 0) { unsigned long long p = argmax_pack(v, r0 + lr); best = p > best ? p : best; }
            }
        }
        __syncthreads(); /* stage i % NST consumed */
        if (threadIdx.x == 0 && i + NST < mine) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            issue(i + NST);
        }
    }
    gemv_argmax_block(a, best, best_s);
}

/* Tile rows and stage count for a matrix of K columns: tiles of about tile_kb KB, NST stages. */
static inline int tma_tr(int WT, int K, int tile_kb) {
    int tr = (tile_kb * 1024 / tma_row_bytes(WT, K)) & ~7;
    return tr < 8 ? 8 : tr;
}
static inline int tma_ntiles(const gemv_args &a, int TR) {
    int t = 0;
    for (int i = 0; i < a.nseg; i++) t += (a.seg[i].W.rows + TR - 1) / TR;
    return t;
}


/* Copies rows [r0, r0 + n) of W (type WT) into a stage slot laid out for TR rows (see above);
 * the caller has armed `bar` with the bytes (n * tma_row_bytes). Thread 0 only. */
template <int WT>
__device__ __forceinline__ void tma_rows(const gmat &W, long r0, int n, int TR, unsigned char *dst, uint64_t *bar) {
    int nb = W.cols >> 8;
    size_t blk0 = (size_t)r0 * nb, nblk = (size_t)n * nb;
    bulk_g2s(dst, W.q + blk0 * 128, (uint32_t)(nblk * 128), bar);
    if (WT == GT_Q4_K) {
        bulk_g2s(dst + (size_t)TR * nb * 128, W.sc + blk0 * 16, (uint32_t)(nblk * 16), bar);
    } else {
        bulk_g2s(dst + (size_t)TR * nb * 128, W.qh + blk0 * 64, (uint32_t)(nblk * 64), bar);
        bulk_g2s(dst + (size_t)TR * nb * 192, W.sc + blk0 * 16, (uint32_t)(nblk * 16), bar);
    }
}
/* The stage slot as a matrix of n rows (row 0 = global row r0). */
template <int WT>
__device__ __forceinline__ gmat tma_view(const gmat &W, long r0, int n, int TR, unsigned char *base) {
    int nb = W.cols >> 8;
    gmat V = W;
    V.rows = n;
    V.q = base;
    if (WT == GT_Q4_K) V.sc = base + (size_t)TR * nb * 128;
    else { V.qh = base + (size_t)TR * nb * 128; V.sc = base + (size_t)TR * nb * 192; V.d = W.d + (size_t)r0 * nb; }
    return V;
}

/* MoE gate/up + SwiGLU through bulk copies. Tiles: TR rows of one slot's gate AND up (slots: the k
 * chosen experts, then the shared one; FF % 32 == 0, FS % 32 == 0, 32 % TR == 0). A block takes
 * groups of 32 / TR consecutive tiles, i.e. 32 consecutive rows of h, so that it can also write
 * their q8 quantization into qh (when qh.xq != NULL): the down kernel then needs no k_qact of its
 * own (one dependent kernel fewer per layer). Warp 0 computes the top-k after the wait (the router
 * is the kernel just before), then thread 0 requests the first NST tiles.
 * grid <= tiles / (32 / TR), block TMA_THREADS, dynamic smem NST * 2 * TR * tma_row_bytes(WT, H). */
template <int WT>
__global__ void __launch_bounds__(TMA_THREADS) k_moe_gateup_tma(const moe_args a, const qbuf q, int TR, int NST, const qbuf qh) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[TMA_MAX_ST];
    __shared__ int ids[QK_MAX_TOPK];
    __shared__ float wts[QK_MAX_TOPK];
    __shared__ float hs[2][32];   /* the current group's 32 h values (double-buffered by group parity) */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    size_t mat = (size_t)TR * tma_row_bytes(WT, a.H), stage = 2 * mat;
    int GS = 32 / TR;                                   /* tiles per group */
    int tpe = a.FF / TR, ntiles = a.k * tpe + a.FS / TR, ngroups = ntiles / GS;
    int mine = ngroups > (int)blockIdx.x ? ((ngroups - 1 - (int)blockIdx.x) / (int)gridDim.x + 1) * GS : 0;
    auto tile = [&](int i, const gmat **g, const gmat **u, long *r0, int *hrow) {
        int t = (blockIdx.x + (i / GS) * gridDim.x) * GS + i % GS;
        if (t < a.k * tpe) { int sl = t / tpe; *g = &a.gate; *u = &a.up; *r0 = (long)ids[sl] * a.FF + (t % tpe) * TR; *hrow = sl * a.FF + (t % tpe) * TR; }
        else { *g = &a.sgate; *u = &a.sup; *r0 = (long)(t - a.k * tpe) * TR; *hrow = a.k * a.FF + (t - a.k * tpe) * TR; }
    };
    auto issue = [&](int i) {
        const gmat *g, *u; long r0; int hrow;
        tile(i, &g, &u, &r0, &hrow);
        uint64_t *b = &bar[i % NST];
        unsigned char *base = sm + (size_t)(i % NST) * stage;
        mbar_expect_tx(b, (uint32_t)(2 * mat));
        tma_rows<WT>(*g, r0, TR, TR, base, b);
        tma_rows<WT>(*u, r0, TR, TR, base + mat, b);
    };
    if (threadIdx.x == 0) {
        mbar_ring_init(bar, NST);
    }
    pdl_wait();
    pdl_trigger();
    if (warp == 0) topk_warp(a.logits, a.E, a.k, ids, wts);
    __syncthreads();
    if (blockIdx.x == 0 && threadIdx.x < a.k) {
        if (a.ids_out) a.ids_out[threadIdx.x] = ids[threadIdx.x];
        if (a.w_out) a.w_out[threadIdx.x] = wts[threadIdx.x];
    }
    if (threadIdx.x == 0)
        for (int i = 0; i < NST && i < mine; i++) issue(i);
    const qact A{q.xf, q.xq, q.dx, q.s16};
    int lanes = gemv_lanes(a.H), rpw = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    for (int i = 0; i < mine; i++) {
        const gmat *g, *u; long r0; int hrow;
        tile(i, &g, &u, &r0, &hrow);
        mbar_wait(&bar[i % NST], (uint32_t)((i / NST) & 1));
        unsigned char *base = sm + (size_t)(i % NST) * stage;
        gmat G = tma_view<WT>(*g, r0, TR, TR, base), U = tma_view<WT>(*u, r0, TR, TR, base + mat);
        for (int w0 = warp * rpw; w0 < TR; w0 += nw * rpw) {
            int lr = w0 + grp;
            float gv = 0.0f, uv = 0.0f;
            if (lr < TR) { gv = row_dot_part(G, lr, A, 0, sub, lanes); uv = row_dot_part(U, lr, A, 0, sub, lanes); }
            gv = group_sum(gv, lanes);
            uv = group_sum(uv, lanes);
            if (lr < TR && sub == 0) {
                float hv = silu_f(gv) * uv;
                a.h[hrow + lr] = hv;
                hs[(i / GS) & 1][(i % GS) * TR + lr] = hv;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0 && i + NST < mine) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            issue(i + NST);
        }
        if (qh.xq && warp == 0 && i % GS == GS - 1) { /* the group's 32 rows are done: quantize them */
            int h0 = hrow - (GS - 1) * TR;
            float v = hs[(i / GS) & 1][lane];
            q8_group(v, lane, qh.xq + h0, qh.dx + h0 / 32, qh.s16 + h0 / 16);
            qh.xf[h0 + lane] = v;
        }
    }
}

/* MoE down + combine + residual add through bulk copies. Tiles: TR output rows; a tile holds those
 * rows of the k chosen experts' down matrices and of the shared one (FS == FF). The router logits
 * are three kernels back, so the top-k and the first NST tile requests come BEFORE the wait.
 * grid <= H / TR, block TMA_THREADS, dynamic smem NST * (k + 1) * TR * tma_row_bytes(WT, FF). */
template <int WT>
__global__ void __launch_bounds__(TMA_THREADS) k_moe_down_tma(const moe_args a, const qbuf q, int TR, int NST) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[TMA_MAX_ST];
    __shared__ int ids[QK_MAX_TOPK];
    __shared__ float wts[QK_MAX_TOPK + 1];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int nslot = a.k + (a.FS ? 1 : 0);
    size_t mat = (size_t)TR * tma_row_bytes(WT, a.FF), stage = nslot * mat;
    int ntiles = a.H / TR;
    int mine = ntiles > (int)blockIdx.x ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    auto issue = [&](int i) {
        long r0 = (long)(blockIdx.x + i * gridDim.x) * TR;
        uint64_t *b = &bar[i % NST];
        unsigned char *base = sm + (size_t)(i % NST) * stage;
        mbar_expect_tx(b, (uint32_t)(nslot * mat));
        for (int s = 0; s < nslot; s++) {
            if (s < a.k) tma_rows<WT>(a.down, (long)ids[s] * a.H + r0, TR, TR, base + s * mat, b);
            else tma_rows<WT>(a.sdown, r0, TR, TR, base + s * mat, b);
        }
    };
    if (warp == 0) {
        topk_warp(a.logits, a.E, a.k, ids, wts);
        if (lane == 0) {
            wts[a.k] = a.FS ? sigmoid_f(a.logits[a.E]) : 0.0f;
            mbar_ring_init(bar, NST);
        }
        __syncwarp();
        if (lane == 0)
            for (int i = 0; i < NST && i < mine; i++) issue(i);
    }
    __syncthreads();
    pdl_wait();
    pdl_trigger();
    const qact A{q.xf, q.xq, q.dx, q.s16};
    int lanes = gemv_lanes(a.FF), par = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    for (int i = 0; i < mine; i++) {
        long r0 = (long)(blockIdx.x + i * gridDim.x) * TR;
        mbar_wait(&bar[i % NST], (uint32_t)((i / NST) & 1));
        unsigned char *base = sm + (size_t)(i % NST) * stage;
        for (int lr = warp; lr < TR; lr += nw) {
            float acc = 0.0f;
            for (int s = grp; s < nslot; s += par) {
                const gmat &W = s < a.k ? a.down : a.sdown;
                long gr = s < a.k ? (long)ids[s] * a.H + r0 : r0;
                gmat V = tma_view<WT>(W, gr, TR, TR, base + s * mat);
                acc += wts[s] * row_dot_part(V, lr, A, s * a.FF, sub, lanes);
            }
            acc = warp_sum(acc);
            if (lane == 0) a.out[r0 + lr] += acc;
        }
        __syncthreads();
        if (threadIdx.x == 0 && i + NST < mine) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            issue(i + NST);
        }
    }
}

#endif
