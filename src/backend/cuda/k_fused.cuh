/*
 * k_fused.cuh — one launch for a layer's whole MoE (router, top-k, gate/up + SwiGLU, down + combine
 * + residual) and the NEXT layer's input projection (issue 6, session 7).
 *
 * OPT-IN (LILAC_CUDA_FUSE=1; 2 without the next projection) and measured SLOWER than the lean chain
 * it replaces: 340 / 376 vs 499 tok/s at 4K (bench/results/2026-11-30-h200-s7: copies issued after
 * the top-k cost ~150 ns each of the copy engine, a grid barrier costs what a PDL boundary costs, and
 * one 16-warp block per SM computes a tile in ~1.5 µs even with its data present). Kept as the
 * starting point of a design that fixes those, with GPU tests passing on it.
 *
 * Why (bench/results/2026-11-30-h200-s6, dev/kernels/NOTES.md): the lean chain router -> gate/up ->
 * down -> next in-projection paid, at every boundary, a launch, a prologue and a cold weight burst
 * (~3.5 µs before the first bytes land, lab bulkbw.cu) that could only start when the previous
 * kernel's blocks left their SMs (120 KB blocks). Here one block per SM stays for all four phases
 * and owns ONE ring of ~200 KB in which every tile it will consume is requested as early as its
 * address is known: the router rows, the shared expert's gate/up rows at entry; the routed gate/up
 * rows, all down rows and the next layer's projection rows right after the top-k. So the next
 * layer's 14 MB stream in while the MoE computes, and the phase boundaries are grid barriers
 * (a counter in global memory; ~1-2 µs) instead of kernel boundaries.
 *
 * Tiles: one global sequence, by kind, R (router rows, lgemv tiles), S (shared expert gate/up), G
 * (routed gate/up, TH gate rows + the same TH up rows of one slot), D (down: R output rows x the
 * nslot slots), T (the next layer's projection, lgemv tiles); block b takes tiles b, b + G, b + 2G,
 * ... (so every kind is spread over all blocks) and consumes them in that order. Its T tiles have a
 * region of the ring to themselves and are requested at entry; the others are allocated in order in
 * the rest, a circular byte ring: tile i may be requested once the tiles whose bytes it overwrites
 * are consumed (need[i]); a request that reuses bytes first meets the block at __syncthreads (every
 * thread tracks the same counts, so the decision is uniform).
 *
 * Phases of a block (x: the residual stream):
 *   before the wait: plan, mbarriers, requests of the R, S and T tiles
 *   P1  RMSNorm(x, ffn_norm) -> q8 + fp32 in shared memory
 *   R   logits of its router rows -> arrive at barrier 1
 *   S   shared expert's gate/up rows -> h[k*FF ...]  (hides barrier 1)
 *   wait barrier 1; top-k of the 256 logits (every block, from L2); requests G and D tiles
 *   G   routed gate/up rows -> h; barrier 2
 *   P2  q8 of h; D: x[rows] += sum_s w_s down_s h_s; barrier 3
 *   P3  RMSNorm(x, next attn_norm) -> q8; T: next projection rows (store)
 * The grid is one block per SM and must be co-resident (the host checks the occupancy); PDL's
 * trigger comes only after barrier 1 (all blocks resident), so the next kernel's blocks cannot
 * take an SM one of ours still needs. A barrier that does not complete within 2 s traps (an error,
 * not a hang).
 */
#ifndef LILAC_K_FUSED_CUH
#define LILAC_K_FUSED_CUH

#include "k_lean.cuh"

/* 16 warps: a block of 18 (576 threads, the lean down kernel's) is held to 96 registers (5 warps on
 * some of the 4 schedulers) and spilled ~400 bytes per thread to local memory, which with the whole
 * L1 given to shared memory went to L2 (ncu: 32 MB of local traffic per launch, the kernel 3x slower) */
#define FZ_THREADS LN_THREADS
#define FZ_MAXT 40                 /* tiles per block at most */
enum { FZ_R = 0, FZ_S, FZ_G, FZ_D, FZ_T, FZ_NK };

struct fz_args {
    moe_args m;
    lgemv_args r;               /* the router: its segments' tiles (prologue: m's ffn norm) */
    lgemv_args t;               /* the next layer's input projection (t.a.nseg == 0: none) */
    int R, dstage;              /* down: output rows per tile, bytes per tile */
    int cap;                    /* ring bytes: dynamic shared memory [0, cap); the activation after */
    int c[FZ_NK + 1];           /* first global tile of each kind; c[FZ_NK] = all tiles */
    unsigned long long *gbar;   /* grid barrier counter (monotone, never reset) */
    unsigned long long *tr;     /* trace record (LILAC_LN_TRACE builds): 1 past the wait, 3 past
                                 * barrier 1 + top-k, 4 past barrier 2, 6 past barrier 3, 2 done */
};

__device__ __forceinline__ int fz_kind(const fz_args &F, int g) {
    int k = 0;
    while (k < FZ_NK - 1 && g >= F.c[k + 1]) k++;
    return k;
}

/* segment s, first row r0 and rows n of tile tt of a GEMV phase */
__device__ __forceinline__ void fz_gemv_locate(const lgemv_args &L, int tt, int *s, int *r0, int *n) {
    int k = 0;
    while (k < L.a.nseg - 1 && tt >= L.t0[k + 1]) k++;
    *s = k;
    *r0 = (tt - L.t0[k]) * L.tr[k];
    *n = min(L.tr[k], L.a.seg[k].W.rows - *r0);
}

/* grid barrier: thread 0, after a __syncthreads that follows the block's writes */
__device__ __forceinline__ unsigned long long fz_arrive(unsigned long long *gb) {
    __threadfence();
    unsigned long long old = atomicAdd(gb, 1ull);
    return (old / gridDim.x + 1) * gridDim.x;
}
__device__ __forceinline__ void fz_wait(const unsigned long long *gb, unsigned long long target) {
    unsigned long long v, t0 = ln_now();
    for (int n = 1;; n++) {
        asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(gb) : "memory");
        if (v >= target) break;
        if ((n & 1023) == 0 && ln_now() - t0 > 2000000000ull) __trap(); /* a block never came */
    }
    __threadfence();
}

/* One tile of a GEMV phase (router or projection), consumed by the block: y rows (store or add).
 * BF16 rows split over the whole block where tr * K == 8 * LN_THREADS (the router's path in
 * k_lgemv), else one C-thread chunk row (C = K / 64 <= 32, checked by the host). */
__device__ __forceinline__ void fz_gemv_tile(const lgemv_args &L, int tt, const unsigned char *base, const qact &Q, float rn,
                                             ln_act &A, int &act_t, float (*part)[FZ_THREADS / 32], int par) {
    const gemv_args &a = L.a;
    int s, r0, n;
    fz_gemv_locate(L, tt, &s, &r0, &n);
    const gmat &W = a.seg[s].W;
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, K = a.K;
    bool work = tid < LN_THREADS;
    auto store = [&](float t, int row) {
        float *y = a.seg[s].y + r0 + row;
        if (a.seg[s].epi == EPI_ADD) *y += t; else *y = t;
    };
    if (W.type == GT_BF16) {
        int P = K >> 3, rb = tid / P, pp = tid % P, wpb = P >> 5;
        float v = work && rb < n ? ln_dot_bf16x8(base + (size_t)rb * K * 2 + 16 * pp, Q.xf + 8 * pp) : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) part[par][warp] = v;
        __syncthreads();
        if (work && lane == 0 && warp % wpb == 0 && rb < n) {
            float t = 0.0f;
            for (int k = 0; k < wpb; k++) t += part[par][warp + k];
            store(t * rn, rb);
        }
        return;
    }
    int C = K >> 6, rr = tid / C, c = tid % C;
    float v = 0.0f;
    if (work && rr < n) {
        if (W.type != act_t) {
            if (W.type == GT_Q4_K) ln_act_q4k(Q, 0, c, A); else ln_act_q6k(Q, 0, c, A);
            ln_act_scale(A, rn);
            act_t = W.type;
        }
        v = ln_dot_tile(W.type, base, L.tr[s], K, rr, c, A, Q.xf);
    }
    for (int o = (C < 32 ? C : 32) >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (work && c == 0 && rr < n) store(v, rr);
}

template <int WT>
__global__ void __launch_bounds__(FZ_THREADS) k_fused_moe(const __grid_constant__ fz_args F) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[FZ_MAXT];
    __shared__ int toff[FZ_MAXT], need[FZ_MAXT], tabs[FZ_MAXT], tsz[FZ_MAXT];
    __shared__ unsigned char tkind[FZ_MAXT];
    __shared__ int tfirst; /* the block's first T tile (mine: none) */
    __shared__ float red[32];
    __shared__ float part[2][FZ_THREADS / 32];
    __shared__ int ids[QK_MAX_TOPK];
    __shared__ float wts[QK_MAX_TOPK + 1];
    __shared__ float gu[2][64];
    __shared__ float acc[2][FZ_THREADS / 8]; /* nslot * R <= FZ_THREADS / (FF / 64) */
    const moe_args &a = F.m;
    ln_trace(F.tr, 0);
    int tid = threadIdx.x, G = gridDim.x, b = blockIdx.x, N = F.c[FZ_NK];
    int mine = N > b ? (N - 1 - b) / G + 1 : 0;
    int C = a.H >> 6, TH = (LN_THREADS / 2) / C, nb = a.H >> 8;
    size_t mat = (size_t)TH * nb * 144;                          /* gate rows, then up rows */
    int nslot = a.k + (a.FS ? 1 : 0), Cd = a.FF >> 6, R = F.R;
    size_t matd = (size_t)R * ln_row_bytes(WT, a.FF);
    auto kind = [&](int i) { return fz_kind(F, b + i * G); };
    auto tile_bytes = [&](int i) -> int {
        int g = b + i * G, k = fz_kind(F, g), s, r0, n;
        if (k == FZ_R || k == FZ_T) {
            const lgemv_args &L = k == FZ_R ? F.r : F.t;
            fz_gemv_locate(L, g - F.c[k], &s, &r0, &n);
            return L.tr[s] * ln_row_bytes(L.a.seg[s].W.type, L.a.K);
        }
        return k == FZ_D ? F.dstage : (int)(2 * mat);
    };
    auto issue = [&](int i) { /* a lane of warp 0 */
        int g = b + i * G, k = fz_kind(F, g), t = g - F.c[k];
        unsigned char *dst = sm + toff[i];
        uint64_t *br = &bar[i];
        if (k == FZ_R || k == FZ_T) {
            const lgemv_args &L = k == FZ_R ? F.r : F.t;
            int s, r0, n;
            fz_gemv_locate(L, t, &s, &r0, &n);
            ln_copy_rows(L.a.seg[s].W, r0, n, L.tr[s], dst, br, true);
        } else if (k == FZ_S || k == FZ_G) {
            const gmat *gw = k == FZ_S ? &a.sgate : &a.gate, *uw = k == FZ_S ? &a.sup : &a.up;
            long r0 = k == FZ_S ? (long)t * TH : (long)ids[t / (a.FF / TH)] * a.FF + (t % (a.FF / TH)) * TH;
            mbar_expect_tx(br, (uint32_t)(2 * mat));
            ln_copy_rows(*gw, r0, TH, TH, dst, br, false);
            ln_copy_rows(*uw, r0, TH, TH, dst + mat, br, false);
        } else { /* the last tile may have fewer than R rows (R need not divide H) */
            long r0 = (long)t * R;
            int n = min(R, a.H - (int)r0);
            mbar_expect_tx(br, (uint32_t)(nslot * n * ln_row_bytes(WT, a.FF)));
            for (int s = 0; s < nslot; s++) {
                if (s < a.k) ln_copy_rows(a.down, (long)ids[s] * a.H + r0, n, R, dst + s * matd, br, false);
                else ln_copy_rows(a.sdown, r0, n, R, dst + s * matd, br, false);
            }
        }
    };
    /* the plan: ring offsets and, per tile, how many tiles must be consumed before its bytes are
     * free (warp 0: the sizes lane-parallel, then lane 0 walks them) */
    if (tid < 32) {
        for (int i = tid; i < mine; i += 32) { tsz[i] = tile_bytes(i); tkind[i] = (unsigned char)kind(i); }
        __syncwarp();
        if (tid == 0) {
            /* the T tiles (the block's last) have a region of their own at the front: requested at
             * entry, they stream in while the MoE phases run (measured: behind the routed gate/up
             * tiles in one FIFO they held those up by ~10 µs); the other kinds share the rest FIFO */
            int t0 = 0;
            while (t0 < mine && tkind[t0] != FZ_T) t0++;
            int A = 0;
            for (int i = t0; i < mine; i++) { toff[i] = A; A += tsz[i]; need[i] = 0; }
            int capB = F.cap - A, pos = 0;
            for (int i = 0; i < t0; i++) {
                int sz = tsz[i];
                if (pos % capB + sz > capB) pos += capB - pos % capB; /* wrap: a tile is contiguous */
                tabs[i] = pos;
                toff[i] = A + pos % capB;
                pos += sz;
                int c = i > 0 ? need[i - 1] : 0; /* need[] is non-decreasing */
                while (pos - tabs[c] > capB) c++;
                need[i] = c;
            }
            tfirst = t0;
            mbar_ring_init(bar, mine);
        }
    }
    __syncthreads();
    ln_trace(F.tr, 40);
    int nis = 0;        /* tiles requested (the same count in every thread) */
    bool ready = false; /* ids known */
    auto pump = [&](int ncons) {
        int n = nis;
        bool reuse = false;
        while (n < tfirst && need[n] <= ncons && (ready || tkind[n] < FZ_G)) { reuse |= need[n] > 0; n++; }
        if (n == nis) return;
        if (reuse) __syncthreads(); /* the bytes of consumed tiles: every thread is past them */
        if (tid < 32) { /* one tile per lane: the requests leave together */
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            for (int j = nis + tid; j < n; j += 32) issue(j);
        }
        nis = n;
    };
    pump(0);
    if (tid < 32) /* the T region: never reused, nothing to wait for */
        for (int j = tfirst + tid; j < mine; j += 32) issue(j);
    pdl_wait();
    ln_trace(F.tr, 1);

    /* P1: the ffn norm of x (the previous kernel's output) */
    unsigned char *qa = sm + F.cap;
    gemv_args pa = {};
    pa.pro = PRO_RMSNORM; pa.x = a.x; pa.K = a.H; pa.g = a.g; pa.eps = a.eps;
    qact Q;
    float rn = ln_prologue(pa, qa, red, &Q);
    ln_trace(F.tr, 41);
    ln_act A;
    int act_t = -1;
    int rr = tid / C, c = tid % C;
    if (tid < LN_THREADS) { ln_act_q4k(Q, 0, c, A); ln_act_scale(A, rn); }
    int i = 0;
    /* R: router rows */
    for (; i < mine && tkind[i] == FZ_R; i++) {
        mbar_wait(&bar[i], 0);
        fz_gemv_tile(F.r, b + i * G - F.c[FZ_R], sm + toff[i], Q, rn, A, act_t, part, i & 1);
        pump(i + 1);
    }
    act_t = GT_Q4_K; /* A holds the Q4_K slice again below (the router is BF16: A untouched) */
    __syncthreads();
    ln_trace(F.tr, 42);
    unsigned long long tgt = 0;
    if (tid == 0) tgt = fz_arrive(F.gbar);
    /* gate/up tiles (S before the top-k, G after) */
    auto gu_tile = [&](int i, int k) {
        int t = b + i * G - F.c[k];
        int hrow = k == FZ_S ? a.k * a.FF + t * TH : (t / (a.FF / TH)) * a.FF + (t % (a.FF / TH)) * TH;
        mbar_wait(&bar[i], 0);
        const unsigned char *base = sm + toff[i];
        float v = 0.0f;
        if (tid < LN_THREADS) v = ln_dot_tile(GT_Q4_K, base + (rr < TH ? 0 : mat), TH, a.H, rr % TH, c, A, NULL);
        for (int o = (C < 32 ? C : 32) >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (tid < LN_THREADS && c == 0) gu[i & 1][rr] = v;
        if (C == 32 && TH <= 15) {
            /* gate row rr (warp rr) and up row rr (warp TH + rr) meet at named barrier 1 + rr */
            if (tid < LN_THREADS) asm volatile("bar.sync %0, 64;" ::"r"(1 + rr % TH) : "memory");
        } else {
            __syncthreads();
        }
        if (C == 32 ? (tid < LN_THREADS && rr >= TH && c == 0) : tid < TH) {
            int hr = C == 32 ? rr - TH : tid;
            a.h[hrow + hr] = silu_f(gu[i & 1][hr]) * gu[i & 1][TH + hr];
        }
        pump(i + 1);
    };
    for (; i < mine && tkind[i] == FZ_S; i++) gu_tile(i, FZ_S);
    ln_trace(F.tr, 43);
    if (tid == 0) fz_wait(F.gbar, tgt);
    __syncthreads();
    pdl_trigger(); /* every block of this grid is resident: the next kernel may take the free room */
    if (tid < 32) {
        ln_topk<true>(a.logits, a.E, a.k, ids, wts);
        if (tid == 0) wts[a.k] = a.FS ? sigmoid_f(__ldcg(a.logits + a.E)) : 0.0f;
    }
    __syncthreads();
    ln_trace(F.tr, 3);
    if (b == 0 && tid < a.k) {
        if (a.ids_out) a.ids_out[tid] = ids[tid];
        if (a.w_out) a.w_out[tid] = wts[tid];
    }
    ready = true;
    pump(i);
    ln_trace(F.tr, 44);
    if (i < mine && tkind[i] == FZ_G) { mbar_wait(&bar[i], 0); ln_trace(F.tr, 45); }
    for (; i < mine && tkind[i] == FZ_G; i++) gu_tile(i, FZ_G);
    ln_trace(F.tr, 46);
    __syncthreads();
    if (tid == 0) fz_wait(F.gbar, fz_arrive(F.gbar));
    __syncthreads();
    ln_trace(F.tr, 4);

    /* P2 + D: h (all blocks' gate/up rows) quantized; x rows += the weighted down rows */
    gemv_args ph = {};
    ph.pro = PRO_PLAIN; ph.x = a.h; ph.K = a.k * a.FF + a.FS; ph.eps = a.eps;
    ln_prologue<true>(ph, qa, red, &Q);
    ln_trace(F.tr, 47);
    int j = tid / Cd, cd = tid % Cd, sl = j / R, rd = j % R;
    bool on = sl < nslot;
    if (on) { if (WT == GT_Q4_K) ln_act_q4k(Q, sl * a.FF, cd, A); else ln_act_q6k(Q, sl * a.FF, cd, A); }
    float ws = on ? wts[sl] : 0.0f;
    for (; i < mine && tkind[i] == FZ_D; i++) {
        long r0 = (long)(b + i * G - F.c[FZ_D]) * R;
        int n = min(R, a.H - (int)r0);
        mbar_wait(&bar[i], 0);
        const unsigned char *base = sm + toff[i];
        float v = on && rd < n ? ln_dot_tile(WT, base + sl * matd, R, a.FF, rd, cd, A, NULL) : 0.0f;
        for (int o = (Cd < 32 ? Cd : 32) >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (cd == 0 && on) acc[i & 1][j] = ws * v;
        __syncthreads();
        if (tid < n) {
            float t = 0.0f;
            for (int k = 0; k < nslot; k++) t += acc[i & 1][k * R + tid];
            a.out[r0 + tid] = __ldcg(a.out + r0 + tid) + t;
        }
        pump(i + 1);
    }
    if (F.t.a.nseg > 0) {
        __syncthreads();
        if (tid == 0) fz_wait(F.gbar, fz_arrive(F.gbar));
        __syncthreads();
        ln_trace(F.tr, 6);
        /* P3 + T: the next layer's norm of x (all blocks' down rows) and its projection */
        float rt = ln_prologue<true>(F.t.a, qa, red, &Q);
        act_t = -1;
        for (; i < mine; i++) {
            mbar_wait(&bar[i], 0);
            fz_gemv_tile(F.t, b + i * G - F.c[FZ_T], sm + toff[i], Q, rt, A, act_t, part, i & 1);
            pump(i + 1);
        }
    }
    ln_trace(F.tr, 2);
}

#endif
