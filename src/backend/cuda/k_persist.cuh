/*
 * k_persist.cuh — the persistent decode kernel (issue 6): one launch runs a whole decode step.
 *
 * Why: the per-kernel decode (decode_step) is ~370 dependent kernels per token at ~10 µs each,
 * bound by each kernel's launch/ramp/drain, not by bytes (bench/results/2026-11-30-h200-s2). Here one
 * grid of (SMs x resident blocks) blocks stays resident for the step and walks the same sequence of
 * phases decode_step launches as kernels, separated by grid-wide barriers (~1-2 µs) instead of
 * kernel boundaries. Before a block waits at the barrier that opens a GEMV phase, it already issues
 * the loads of its first rows of that phase's weights (they do not depend on activations), so DRAM
 * keeps streaming across the barrier. Small reductions (RMSNorm sums, q8 scales) are recomputed by
 * every block from L2 instead of serialising one block.
 *
 * The phase bodies are the per-kernel code's device functions (gemv rows: k_rowregs.cuh; GDN step:
 * gdn_step_warp; attention: attn_prep_block / attn_fd_block / attn_combine_part), so both paths
 * compute the same arithmetic. Phases per layer:
 *   GDN:       in-proj (qkv|z|b|a) | GDN step | out-proj (+x) | router | gate/up | down (+x)
 *   attention: q|k|v | prep (norm, RoPE, KV append) | flash-decoding splits | combine | o-proj (+x) |
 *              router | gate/up | down (+x)
 * then lm_head (argmax) and the step's finish (next token, position).
 *
 * Grid barrier: one global counter that only grows; each block adds 1 per barrier, thread 0 spins
 * with ld.acquire until it reaches the phase's target. The target base of a launch is read from
 * `epoch`, which block 0 advances after the last barrier (every block has read it by then). A spin
 * past 2 s sets *err and stops all waiting (a wrong result, reported by the host, never a hang).
 * All blocks must be co-resident: the host launches exactly SMs x occupancy blocks.
 * Activations written inside the launch are read with plain (coherent) loads, never __ldg.
 */
#ifndef LILAC_K_PERSIST_CUH
#define LILAC_K_PERSIST_CUH

#include "k_attn.cuh"
#include "k_attn_dec.cuh"
#include "k_gdn.cuh"
#include "k_gemv.cuh"
#include "k_gemvq.cuh"

#define PK_THREADS 256
#define PK_WARPS (PK_THREADS / 32)

/* One layer's phases, built once at load (device memory). */
struct pk_layer {
    int attn, idx;            /* attention layer?; index among the attention / GDN layers */
    gemv_args in;             /* RMSNorm(x): attn q|k|v, GDN qkv|z|b|a */
    gemv_args out;            /* attn: o-proj of att; GDN: out-proj of gated-normed o (both += x) */
    gemv_args router;         /* RMSNorm(x): router | shared-expert gate (fp32 logits) */
    moe_args moe;
    const float *conv, *dt_bias, *ssm_a;   /* GDN */
    const float *q_norm, *k_norm;          /* attention */
};

/* Everything one step needs; in device memory (one copy per sequence, written when its graph is made). */
struct pk_params {
    const pk_layer *L;        /* [n_layer] device */
    int n_layer;
    gmat tok_embd;
    const int *tok;           /* device: the token this step consumes */
    float *x;                 /* [H] residual stream */
    int H;
    gemv_args head;           /* RMSNorm(x) -> logits, argmax */
    int *gen, *gen_n;         /* optional log of consumed tokens (NULL: none) */
    /* the sequence */
    int *pos;                 /* device position (advanced by the finish) */
    __nv_bfloat16 *kv;        /* [n_attn][2][NKV][n_ctx][HD] */
    float *S, *ring;          /* [n_gdn][HV][DK][DV], [n_gdn][4][CD] */
    float *part_o, *part_ml;  /* [nsplit][NH][HD], [nsplit][NH][2] */
    int n_ctx, nsplit;
    /* activations */
    float *qkv, *ab, *o, *qg, *kb, *vb, *q, *att;
    const float *inv_freq;
    qbuf qx;                  /* q8 of the ffn-normed x (router phase -> gate/up) */
    int NH, NKV, HD, n_rot, HK, HV, DK, DV, tiled, CD;
    float eps;
    /* barrier and diagnostics */
    unsigned *bar, *epoch, *flag;
    unsigned long long *prof; /* optional: [1 + barriers] globaltimer stamps (block 0) */
    int *err;
    int empty;                /* diagnostic: > 0 runs only this many barriers (their cost), no work */
};

__device__ __forceinline__ unsigned pk_ld_acquire(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ unsigned long long pk_clock_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

struct pk_bar {
    unsigned *ctr;            /* arrivals (atomics only) */
    unsigned *flag;           /* released target, on its own 128-byte line (polled) */
    int *err;
    unsigned long long *prof;
    unsigned target;          /* thread 0: counter value that ends the current barrier */
    int n;                    /* barriers passed */
};

/* Grid barrier. The last block to arrive (its atomicAdd returns target - 1) publishes the target
 * in `flag`; the others poll `flag` with relaxed loads (an acquire load per poll would invalidate
 * the SM's L1 under the co-resident block's feet, and polling the atomics' line slows them) and
 * fence once when it opens. The fences before and after make this block's writes visible to all
 * and everyone's visible to this block (the pattern of cooperative groups' grid sync). */
__device__ __forceinline__ void pk_sync(pk_bar &b) {
    __syncthreads();
    if (threadIdx.x == 0) {
        b.target += gridDim.x;
        __threadfence();
        unsigned old = atomicAdd(b.ctr, 1u);
        if (old == b.target - 1) {
            __threadfence();
            asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(b.flag), "r"(b.target) : "memory");
        } else if (!*(volatile int *)b.err) {
            unsigned long long t0 = 0;
            for (int spin = 1;; spin++) {
                unsigned v;
                asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(b.flag) : "memory");
                if ((int)(v - b.target) >= 0) break;
                if ((spin & 1023) == 0) {
                    unsigned long long t = pk_clock_ns();
                    if (!t0) t0 = t;
                    else if (t - t0 > 2000000000ull || *(volatile int *)b.err) { atomicExch(b.err, 1); break; }
                }
            }
        }
        __threadfence();
        if (b.prof && blockIdx.x == 0) b.prof[1 + b.n] = pk_clock_ns();
    }
    b.n++;
    __syncthreads();
}

/* Copies a phase's argument struct (device memory, read by every thread many times with dynamic
 * indices) into shared memory: one global round trip instead of a chain of them per row. */
template <typename T>
__device__ __forceinline__ void pk_args_to_smem(const T &src, T *dst) {
    static_assert(sizeof(T) % 4 == 0 && sizeof(T) <= 4 * PK_THREADS, "argument struct too large");
    __syncthreads(); /* the previous phase may still read dst */
    if (threadIdx.x < sizeof(T) / 4) ((int *)dst)[threadIdx.x] = ((const int *)&src)[threadIdx.x];
    __syncthreads();
}

/* ---- GEMV phase: y = W transform(x), rows grid-strided over all warps of the grid. The first
 * batch of rows is loaded before the barrier; `store` (optional) receives block 0's activation. */
template <int WT, int NU, int RB>
__device__ void pk_gemv_t(const gemv_args &a, pk_bar &bar, unsigned char *sm, float *red, unsigned long long *best_s,
                          const qbuf *store) {
    int warp = threadIdx.x >> 5;
    gemv_warp<WT, NU, RB> G(a);
    int step = gridDim.x * PK_WARPS * G.rpw * RB;
    int r0 = (blockIdx.x * PK_WARPS + warp) * G.rpw * RB;
    bool slow = false; /* exact dots on non-BF16 rows: dequantized weights x fp32 input, no prefetch */
    if (a.exact)
        for (int s = 0; s < a.nseg; s++) slow |= a.seg[s].W.type != GT_BF16;
    if (!slow && r0 < a.total_rows) G.fetch(a, r0);
    pk_sync(bar);
    qact A;
    gemv_prologue(a, sm, red, &A);
    if (store && blockIdx.x == 0) {
        for (int k = threadIdx.x; k < a.K; k += blockDim.x) { store->xf[k] = A.xf[k]; store->xq[k] = A.xq[k]; }
        for (int k = threadIdx.x; k < a.K / 32; k += blockDim.x) store->dx[k] = A.dx[k];
        for (int k = threadIdx.x; k < a.K / 16; k += blockDim.x) store->s16[k] = A.s16[k];
    }
    if (slow) gemv_rows_exact(a, A, (blockIdx.x * PK_WARPS + warp) * G.rpw, gridDim.x * PK_WARPS);
    else gemv_argmax_block(a, G.rows(a, A, r0, step), best_s);
}

/* Register batches per warp as in gemv_rb (k_gemvq launch side): ~8 units of loads in flight per lane. */
#define PK_GEMV_NU(T, RB1, RB2, RB4)                                                                 \
    do {                                                                                             \
        if (nu <= 1) pk_gemv_t<T, 1, RB1>(a, bar, sm, red, best_s, store);                        \
        else if (nu <= 2) pk_gemv_t<T, 2, RB2>(a, bar, sm, red, best_s, store);                   \
        else pk_gemv_t<T, 4, RB4>(a, bar, sm, red, best_s, store);                                \
    } while (0)

__device__ __noinline__ void pk_gemv(const gemv_args &ag, pk_bar &bar, unsigned char *sm, float *red,
                                     unsigned long long *best_s, const qbuf *store) {
    __shared__ gemv_args a;
    pk_args_to_smem(ag, &a);
    int nu = (a.K >> 5) / gemv_lanes(a.K);
    switch (a.seg[0].W.type) {
    case GT_Q4_K: PK_GEMV_NU(GT_Q4_K, 8, 4, 2); break;
    case GT_Q6_K: PK_GEMV_NU(GT_Q6_K, 4, 2, 1); break;
    case GT_Q8_0: PK_GEMV_NU(GT_Q8_0, 4, 2, 1); break;
    default: PK_GEMV_NU(GT_BF16, 4, 2, 1); break;
    }
}

/* ---- MoE gate/up + SwiGLU: the top-k is computed once per block (warp 0) after the barrier into
 * ids_s / wts_s (kept in shared memory for the down phase); warps whose first batch is all
 * shared-expert rows load it before the barrier. q: the router phase's activation. */
template <int WT, int NU>
__device__ void pk_moe_gateup_t(const moe_args &a, const qbuf &q, pk_bar &bar, int *ids_s, float *wts_s) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    moe_gu_warp<WT, NU> M(a);
    int step = gridDim.x * PK_WARPS * M.rpw * M.RB;
    int r0 = (blockIdx.x * PK_WARPS + warp) * M.rpw * M.RB;
    bool pre = r0 >= a.k * a.FF;
    if (pre && r0 < M.total) M.fetch(a, ids_s, r0);
    pk_sync(bar);
    if (warp == 0) {
        topk_warp(a.logits, a.E, a.k, ids_s, wts_s);
        if (lane == 0) wts_s[a.k] = a.FS ? sigmoid_f(a.logits[a.E]) : 0.0f;
    }
    __syncthreads();
    if (!pre && r0 < M.total) M.fetch(a, ids_s, r0);
    M.rows(a, ids_s, qact{q.xf, q.xq, q.dx, q.s16}, r0, step);
}

__device__ __noinline__ void pk_moe_gateup(const moe_args &ag, const qbuf &q, pk_bar &bar, int *ids_s, float *wts_s) {
    __shared__ moe_args a;
    pk_args_to_smem(ag, &a);
    int nu = (a.H >> 5) / gemv_lanes(a.H);
#define PK_GU(T)                                                        \
    do {                                                                \
        if (nu <= 1) pk_moe_gateup_t<T, 1>(a, q, bar, ids_s, wts_s);  \
        else if (nu <= 2) pk_moe_gateup_t<T, 2>(a, q, bar, ids_s, wts_s); \
        else pk_moe_gateup_t<T, 4>(a, q, bar, ids_s, wts_s);          \
    } while (0)
    switch (a.gate.type) {
    case GT_Q4_K: PK_GU(GT_Q4_K); break;
    case GT_Q6_K: PK_GU(GT_Q6_K); break;
    case GT_Q8_0: PK_GU(GT_Q8_0); break;
    default: PK_GU(GT_BF16); break;
    }
#undef PK_GU
}

/* ---- MoE down + weighted combine + residual add: one warp per output row (virtual blocks of 8
 * rows, grid-strided); the first rows' expert weights are loaded before the barrier (the top-k is
 * already in shared memory), h is quantized by every block after it. */
template <int WT>
__device__ __forceinline__ void pk_moe_down_t(const moe_args &a, pk_bar &bar, unsigned char *sm, float *red,
                                           const int *ids_s, const float *wts_s) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int lanes = gemv_lanes(a.FF), par = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    int nu = (a.FF >> 5) / lanes;
    int nslot = a.k + (a.FS ? 1 : 0), kf = a.k * a.FF + a.FS;
    bool sfast = a.FS && a.sdown.type == WT && a.FS == a.FF;
    rowregs<WT, 1> R[MOE_DOWN_IT];
    auto fetch = [&](int r) {
#pragma unroll
        for (int it = 0; it < MOE_DOWN_IT; it++) {
            int s = grp + it * par;
            if (s < a.k) R[it].load(a.down, (long)ids_s[s] * a.H + r, sub, lanes, nu);
            else if (s < nslot && sfast) R[it].load(a.sdown, r, sub, lanes, nu);
        }
    };
    int rw = blockIdx.x * PK_WARPS + warp;
    if (rw < a.H) fetch(rw);
    pk_sync(bar);
    gemv_args ha = {};
    ha.pro = PRO_PLAIN; ha.x = a.h; ha.K = kf;
    qact A;
    gemv_prologue(ha, sm, red, &A);
    for (int r = rw; r < a.H; r += gridDim.x * PK_WARPS) {
        if (r != rw) fetch(r);
        float acc = 0.0f;
#pragma unroll
        for (int it = 0; it < MOE_DOWN_IT; it++) {
            int s = grp + it * par;
            if (s < a.k || (s < nslot && sfast)) acc += wts_s[s] * R[it].dot(A, s * a.FF, sub, lanes, nu);
            else if (s < nslot) acc += wts_s[s] * row_dot_part(a.sdown, r, A, a.k * a.FF, sub, lanes);
        }
        acc = warp_sum(acc);
        if (lane == 0) a.out[r] += acc;
    }
}

__device__ __noinline__ void pk_moe_down(const moe_args &ag, pk_bar &bar, unsigned char *sm, float *red,
                                          const int *ids_s, const float *wts_s) {
    __shared__ moe_args a;
    pk_args_to_smem(ag, &a);
    switch (a.down.type) {
    case GT_Q4_K: pk_moe_down_t<GT_Q4_K>(a, bar, sm, red, ids_s, wts_s); break;
    case GT_Q6_K: pk_moe_down_t<GT_Q6_K>(a, bar, sm, red, ids_s, wts_s); break;
    case GT_Q8_0: pk_moe_down_t<GT_Q8_0>(a, bar, sm, red, ids_s, wts_s); break;
    default: pk_moe_down_t<GT_BF16>(a, bar, sm, red, ids_s, wts_s); break;
    }
}

/* ---- GDN step: one warp task per (v-head, 8 value columns), grid-strided over all warps. */
template <int DK>
__device__ __noinline__ void pk_gdn_step_t(const gdn_args &g, float *qk_s) {
    int warp = threadIdx.x >> 5, nt = g.HV * (g.DV / 8);
    float *qs = qk_s + warp * 2 * DK, *ks = qs + DK;
    for (int t = blockIdx.x * PK_WARPS + warp; t < nt; t += gridDim.x * PK_WARPS)
        gdn_step_warp<DK, true>(g, t / (g.DV / 8), (t % (g.DV / 8)) * 8, qs, ks);
}

/* ---- attention decode phases */
template <int DPL>
__device__ __noinline__ void pk_attn_fd_t(const attn_dec_args &da, float *fsm) {
    int nvb = da.NKV * da.nsplit;
    for (int vb = blockIdx.x; vb < nvb; vb += gridDim.x) {
        attn_fd_block<DPL, false>(da, vb % da.NKV, vb / da.NKV, da.nsplit, fsm);
        __syncthreads();
    }
}

/* Merge of the flash-decoding splits: virtual block (head h, 64 dims), its 4 thread groups each sum
 * a quarter of the splits (a whole-head block per head would leave most of the grid idle and walk
 * all splits serially). */
__device__ __noinline__ void pk_attn_combine(const attn_dec_args &a) {
    int nch = (a.HD + 63) / 64;
    for (int vb = blockIdx.x; vb < a.NH * nch; vb += gridDim.x) {
        attn_combine_part(a, vb / nch, (vb % nch) * 64, 64);
        __syncthreads();
    }
}

__global__ void __launch_bounds__(PK_THREADS, 2) k_decode_persist(const pk_params *__restrict__ Pp) {
    const pk_params &P = *Pp;
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ unsigned long long best_s[PK_WARPS];
    __shared__ int ids_s[QK_MAX_TOPK];
    __shared__ float wts_s[QK_MAX_TOPK + 1];
    pk_bar bar;
    bar.ctr = P.bar; bar.flag = P.flag; bar.err = P.err; bar.prof = P.prof;
    bar.n = 0;
    bar.target = 0;
    if (threadIdx.x == 0) {
        bar.target = *(volatile unsigned *)P.epoch;
        if (bar.prof && blockIdx.x == 0) bar.prof[0] = pk_clock_ns();
    }
    if (P.empty) {
        for (int i = 0; i < P.empty; i++) pk_sync(bar);
        if (blockIdx.x == 0 && threadIdx.x == 0) *P.epoch = bar.target;
        return;
    }
    const int H = P.H;
    /* embed: x = E[tok] */
    {
        long row = *P.tok;
        for (int k0 = (blockIdx.x * PK_THREADS + threadIdx.x) * 16; k0 < H; k0 += gridDim.x * PK_THREADS * 16) {
            float f[16];
            gmat_dequant16(P.tok_embd, row, k0, f);
#pragma unroll
            for (int i = 0; i < 16; i++) P.x[k0 + i] = f[i];
        }
    }
    for (int l = 0; l < P.n_layer; l++) {
        const pk_layer &L = P.L[l];
        pk_gemv(L.in, bar, sm, red, best_s, NULL);
        if (L.attn) {
            __nv_bfloat16 *kc = P.kv + (size_t)L.idx * 2 * P.NKV * P.n_ctx * P.HD, *vc = kc + (size_t)P.NKV * P.n_ctx * P.HD;
            attn_prep_args pa = {P.qg, 0, P.kb, 0, P.vb, 0, L.q_norm, L.k_norm, P.inv_freq, P.q, NULL, kc, vc,
                                 P.pos, P.NH, P.NKV, P.HD, P.n_rot, P.n_ctx, P.eps};
            pk_sync(bar);
            for (int vb = blockIdx.x; vb < P.NH + 2 * P.NKV; vb += gridDim.x) { attn_prep_block(pa, vb, 0); __syncthreads(); }
            attn_dec_args da = {P.q, kc, vc, P.part_o, P.part_ml, P.qg, P.att, P.pos, P.NH, P.NKV, P.HD, P.n_ctx, 0, P.nsplit};
            pk_sync(bar);
            if (P.HD == 256) pk_attn_fd_t<8>(da, (float *)sm);
            else if (P.HD == 128) pk_attn_fd_t<4>(da, (float *)sm);
            else pk_attn_fd_t<2>(da, (float *)sm);
            pk_sync(bar);
            pk_attn_combine(da);
        } else {
            gdn_args g = {P.qkv, P.ab, P.ab + P.HV, 0, L.conv, P.ring + (size_t)L.idx * 4 * P.CD,
                          P.S + (size_t)L.idx * P.HV * P.DK * P.DV, L.dt_bias, L.ssm_a, P.o, P.pos, 1, P.HK, P.HV, P.DV, P.tiled};
            pk_sync(bar);
            if (P.DK == 128) pk_gdn_step_t<128>(g, (float *)sm);
            else if (P.DK == 64) pk_gdn_step_t<64>(g, (float *)sm);
            else pk_gdn_step_t<32>(g, (float *)sm);
        }
        pk_gemv(L.out, bar, sm, red, best_s, NULL);
        pk_gemv(L.router, bar, sm, red, best_s, &P.qx);
        pk_moe_gateup(L.moe, P.qx, bar, ids_s, wts_s);
        pk_moe_down(L.moe, bar, sm, red, ids_s, wts_s);
    }
    pk_gemv(P.head, bar, sm, red, best_s, NULL);
    pk_sync(bar);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long am = atomicExch(P.head.argmax, 0ull);
        int t = argmax_row(am);
        int *tok = (int *)P.tok;
        if (P.gen) { P.gen[*P.gen_n & 65535] = *tok; *P.gen_n += 1; }
        *tok = t;
        *P.pos += 1;
        *P.epoch = bar.target;
    }
}

#endif
