/*
 * persist.cu — the persistent decode kernel (issue 6): one launch runs a whole decode step.
 *
 * Why: the per-kernel decode (decode_step) is ~370 dependent kernels per token at ~10 µs each,
 * bound by each kernel's launch/ramp/drain, not by bytes (bench/results/2026-11-30-h200-s2). Here one
 * grid of (SMs x 2) blocks stays resident for the step and walks the same phases, separated by
 * grid-wide barriers (1.75 µs measured, bench/results/2026-11-30-h200-s3).
 *
 * Weights stream through shared memory. Each block owns a ring of `nst` stages of `stage` bytes
 * with one mbarrier each; thread 0 requests a tile (a few rows of one matrix, or of the gate and up
 * matrices of one expert, or of the k+1 down matrices) with cp.async.bulk, and the block computes
 * on it in shared memory. So the bytes in flight cost no registers (the first version held rows in
 * registers; ptxas spilled them, 8-20 KB of spill code per phase, and every phase ran 2-3x slower
 * than its kernel). A block requests its first tiles of the next weight phase as soon as it has
 * finished its part of the current one, BEFORE it waits at the barrier: DRAM keeps streaming while
 * the grid synchronises. Tiles of a phase are dealt round-robin over the blocks (tile t -> block
 * t % grid) and sized so that every block gets work (router: one row per tile).
 *
 * Phases per layer (the order pk_phase() in cuda_backend.cu names):
 *   GDN:       in-proj (qkv|z|b|a) | GDN step | out-proj (+x) | router | gate/up | down (+x)
 *   attention: q|k|v | prep (norm, RoPE, KV append) | flash-decoding splits | combine | o-proj (+x) |
 *              router | gate/up | down (+x)
 * then lm_head (argmax) and the step's finish (next token, position).
 * The activation of a GEMV phase (RMSNorm / gated head norm + q8 quantization) is recomputed by
 * every block from L2 (8-18 KB) instead of being serialised in one block; the router phase's stays
 * in shared memory for the gate/up phase (same input).
 *
 * Grid barrier: one global counter that only grows; each block adds 1 per barrier, the last to
 * arrive publishes the target on its own line, the others poll it. The target base of a launch is
 * read from `epoch`, which block 0 advances after the last barrier. A spin past 2 s sets *err and
 * stops all waiting (a wrong result, reported by the host, never a hang). All blocks must be
 * co-resident: the host launches exactly SMs x occupancy blocks. Activations written inside the
 * launch are read with plain (coherent) loads, never __ldg.
 *
 * The kernel headers define non-template kernels that cuda_backend.cu also compiles; they are
 * included here in a namespace of their own so that the two objects do not both define them.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <mma.h>
#include <stdint.h>

/* Inlining of the weight-phase bodies (pk_gemv_run, pk_gu_run, pk_down_run). Everything inlined
 * (the default) gives a 534 KB kernel with 4-5 copies of the tile loop per layer; building with
 * -DPK_PHASE_ATTR=__noinline__ keeps one copy of each, at the price of a stack for the ring state.
 * An experiment on the instruction-cache hypothesis (bench/results/2026-11-30-h200-s4). */
#ifndef PK_PHASE_ATTR
#define PK_PHASE_ATTR __forceinline__
#endif

namespace pk_impl {

#include "k_gemvq.cuh"
#include "k_persist.cuh"

__device__ __forceinline__ unsigned long long pk_clock_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* Barrier state of a block (shared memory, thread 0): the counter value that ends the current
 * barrier, and the barriers passed (the profile's index). */
struct pk_bstate {
    unsigned target;
    int n;
};

/* Grid barrier. The last block to arrive (its atomicAdd returns target - 1) publishes the target
 * in `flag`; the others poll `flag` with relaxed loads (an acquire load per poll would invalidate
 * the SM's L1 under the co-resident block's feet, and polling the atomics' line slows them) and
 * fence once when it opens. The fences before and after make this block's writes visible to all
 * and everyone's visible to this block (the pattern of cooperative groups' grid sync). */
__device__ __forceinline__ void pk_sync(const pk_params &P, pk_bstate *b) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned target = b->target + gridDim.x;
        int n = b->n;
        b->target = target;
        b->n = n + 1;
        if (P.prof) {
            unsigned long long t = pk_clock_ns();
            atomicMax(P.prof + PK_TS + n, t);
            atomicMin(P.prof + 2 * PK_TS + n, t);
        }
        __threadfence();
        unsigned old = atomicAdd(P.bar, 1u);
        if (old == target - 1) {
            __threadfence();
            asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(P.flag), "r"(target) : "memory");
        } else if (!*(volatile int *)P.err) {
            unsigned long long t0 = 0;
            for (int spin = 1;; spin++) {
                unsigned v;
                asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(P.flag) : "memory");
                if ((int)(v - target) >= 0) break;
                if (P.poll_ns) __nanosleep(P.poll_ns);
                if ((spin & 1023) == 0) {
                    unsigned long long t = pk_clock_ns();
                    if (!t0) t0 = t;
                    else if (t - t0 > 2000000000ull || *(volatile int *)P.err) { atomicExch(P.err, 1); break; }
                }
            }
        }
        __threadfence();
        if (P.prof && blockIdx.x == 0) P.prof[1 + n] = pk_clock_ns();
    }
    __syncthreads();
}

/* Profile: this block has built its activation for the current phase. */
__device__ __forceinline__ void pk_mark(const pk_params &P, const pk_bstate *b) {
    if (P.prof && threadIdx.x == 0) atomicMax(P.prof + 3 * PK_TS + b->n, pk_clock_ns());
}

/* Copies a phase's argument struct (device memory) into shared memory: one global round trip
 * instead of a chain of them per tile. Whole block. */
template <typename T>
__device__ __forceinline__ void pk_args_to_smem(const T &src, T *dst) {
    static_assert(sizeof(T) % 4 == 0 && sizeof(T) <= 4 * PK_THREADS, "argument struct too large");
    __syncthreads(); /* the previous user of dst may still read it */
    if (threadIdx.x < sizeof(T) / 4) ((int *)dst)[threadIdx.x] = ((const int *)&src)[threadIdx.x];
    __syncthreads();
}

/* ------------------------------------------------------------------ weight tiles in shared memory */

/* Bytes of one row of W in a stage. */
__device__ __forceinline__ int pk_row_bytes(const gmat &W) {
    int nb = W.cols >> 8;
    switch (W.type) {
    case GT_Q4_K: return nb * 144;
    case GT_Q6_K: return nb * 210;
    case GT_Q8_0: return W.cols + W.cols / 16;
    default: return W.cols * 2;
    }
}

/* Can rows of W go through the copy engine (16-byte sizes and addresses, a row fits a stage)?
 * Otherwise the tile's rows are read from global memory directly. */
__device__ __forceinline__ bool pk_streamable(const gmat &W, int stage) {
    uintptr_t al = (uintptr_t)W.q;
    bool shape;
    switch (W.type) {
    case GT_Q4_K: al |= (uintptr_t)W.sc; shape = true; break;
    case GT_Q6_K: al |= (uintptr_t)W.qh | (uintptr_t)W.sc; shape = true; break;
    case GT_Q8_0: al |= (uintptr_t)W.d; shape = W.cols % 256 == 0; break;
    default: shape = W.cols % 8 == 0; break;
    }
    return shape && !(al & 15) && pk_row_bytes(W) <= stage;
}

/* One contiguous piece of a tile into shared memory. Two engines (pk_params.copy):
 * PK_COPY_BULK: thread 0 issues one cp.async.bulk (the copy engine; completion counted in bytes on
 * the mbarrier); PK_COPY_ASYNC: every thread issues cp.async of 16 bytes for its share (many
 * independent requests, like register loads but holding no registers; each thread's completion
 * arrives on the mbarrier once per tile). */
__device__ __forceinline__ void pk_g2s(unsigned char *dst, const void *src, uint32_t bytes, uint64_t *bar, int mode) {
    if (mode == PK_COPY_BULK) { bulk_g2s(dst, src, bytes, bar); return; }
    const unsigned char *s8 = (const unsigned char *)src;
    for (uint32_t o = threadIdx.x * 16u; o < bytes; o += PK_THREADS * 16u)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_u32(dst + o)), "l"(s8 + o) : "memory");
}

/* Stage bytes of a piece of TR rows (16-byte multiple: pieces follow each other in a stage). */
__device__ __forceinline__ int pk_span(const gmat &W, int TR) { return (TR * pk_row_bytes(W) + 15) & ~15; }

/* Q6_K: do the rows' fp16 d go through the copy engine too (16-byte size and address)? Otherwise
 * the dots read them from global memory (a dependent load per unit). */
__device__ __forceinline__ bool pk_q6_dlocal(const gmat &W, long r0, int n) {
    int nb = W.cols >> 8;
    return ((size_t)n * nb * 2) % 16 == 0 && ((size_t)r0 * nb * 2) % 16 == 0 && !((uintptr_t)W.d & 15);
}

/* Bytes pk_copy_rows moves for rows [r0, r0 + n) of W. */
__device__ __forceinline__ uint32_t pk_copy_bytes(const gmat &W, long r0, int n) {
    if (W.type == GT_Q6_K) return (uint32_t)n * (W.cols >> 8) * (pk_q6_dlocal(W, r0, n) ? 210 : 208);
    return (uint32_t)n * pk_row_bytes(W);
}

/* Requests rows [r0, r0 + n) of W into a stage laid out for TR rows; the caller armed `bar` with
 * pk_copy_bytes. Stage layout (nb = cols / 256): Q4_K [TR*nb*128 q][TR*nb*16 meta];
 * Q6_K [TR*nb*128 ql][TR*nb*64 qh][TR*nb*16 scales][TR*nb fp16 d]; Q8_0 [TR*cols q][TR*cols/32 fp16 d];
 * BF16 [TR*cols bf16]. Thread 0 (bulk) or every thread (async). */
__device__ __forceinline__ void pk_copy_rows(const gmat &W, long r0, int n, int TR, unsigned char *dst, uint64_t *bar, int mode) {
    int nb = W.cols >> 8;
    size_t b0 = (size_t)r0 * nb, nbk = (size_t)n * nb;
    switch (W.type) {
    case GT_Q4_K:
        pk_g2s(dst, W.q + b0 * 128, (uint32_t)(nbk * 128), bar, mode);
        pk_g2s(dst + (size_t)TR * nb * 128, W.sc + b0 * 16, (uint32_t)(nbk * 16), bar, mode);
        break;
    case GT_Q6_K:
        pk_g2s(dst, W.q + b0 * 128, (uint32_t)(nbk * 128), bar, mode);
        pk_g2s(dst + (size_t)TR * nb * 128, W.qh + b0 * 64, (uint32_t)(nbk * 64), bar, mode);
        pk_g2s(dst + (size_t)TR * nb * 192, W.sc + b0 * 16, (uint32_t)(nbk * 16), bar, mode);
        if (pk_q6_dlocal(W, r0, n)) pk_g2s(dst + (size_t)TR * nb * 208, (const unsigned char *)W.d + b0 * 2, (uint32_t)(nbk * 2), bar, mode);
        break;
    case GT_Q8_0:
        pk_g2s(dst, W.q + (size_t)r0 * W.cols, (uint32_t)((size_t)n * W.cols), bar, mode);
        pk_g2s(dst + (size_t)TR * W.cols, (const unsigned char *)W.d + (size_t)r0 * (W.cols / 16),
                 (uint32_t)((size_t)n * (W.cols / 16)), bar, mode);
        break;
    default: pk_g2s(dst, W.q + (size_t)r0 * W.cols * 2, (uint32_t)((size_t)n * W.cols * 2), bar, mode); break;
    }
}

/* The stage as a matrix whose row 0 is row r0 of W (n rows). */
__device__ __forceinline__ gmat pk_view(const gmat &W, long r0, int n, int TR, unsigned char *base) {
    int nb = W.cols >> 8;
    gmat V = W;
    V.q = base;
    if (W.type == GT_Q4_K) V.sc = base + (size_t)TR * nb * 128;
    else if (W.type == GT_Q6_K) {
        V.qh = base + (size_t)TR * nb * 128;
        V.sc = base + (size_t)TR * nb * 192;
        V.d = pk_q6_dlocal(W, r0, n) ? (const __half *)(base + (size_t)TR * nb * 208) : W.d + (size_t)r0 * nb;
    }
    else if (W.type == GT_Q8_0) V.d = (const __half *)(base + (size_t)TR * W.cols);
    return V;
}

/* A piece of a tile: n rows of W from r0 at stage offset `off`. Arms nothing; returns its bytes
 * (0 when W is read from global memory instead). Thread 0 (bulk) or every thread (async). */
__device__ __forceinline__ uint32_t pk_piece(const gmat &W, long r0, int n, int TR, unsigned char *dst, uint64_t *bar, int stage,
                                            int mode) {
    if (!pk_streamable(W, stage)) return 0;
    pk_copy_rows(W, r0, n, TR, dst, bar, mode);
    return pk_copy_bytes(W, r0, n);
}

/* The ring: tiles are numbered per block across the whole step; tile j sits in stage j % nst and
 * its mbarrier completes phase (j / nst) & 1. head (thread 0 only): tiles requested; tail (every
 * thread): tiles consumed; jn (thread 0): next tile of the current job to request. */
struct pk_ring {
    unsigned char *buf;
    uint64_t *bar;
    int nst, stage, mode;
    int diag;                 /* pk_params.diag: 1 no dot products, 2 no copies and no waits (timing only) */
    unsigned head, tail;
    int jn, mine;
};

__device__ __forceinline__ unsigned char *pk_slot(const pk_ring &R, unsigned j) { return R.buf + (size_t)(j % R.nst) * R.stage; }

/* Requests the next tile into the next slot. Whole block (every thread calls it with the same
 * arguments); issue(dst, bar, go): go = false returns the tile's bytes, go = true issues the copies. */
template <typename F>
__device__ __forceinline__ void pk_request(pk_ring &R, F issue) {
    uint64_t *b = &R.bar[R.head % R.nst];
    unsigned char *dst = pk_slot(R, R.head);
    if (R.diag == 2) {
    } else if (R.mode == PK_COPY_BULK) {
        if (threadIdx.x == 0) {
            /* expect_tx first, with the byte count computed before any copy is issued */
            mbar_expect_tx(b, issue(dst, b, false));
            issue(dst, b, true);
        }
    } else {
        issue(dst, b, true);
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(b)) : "memory");
    }
    R.head++;
}

/* Waits for the tile at the tail; returns its stage. Whole block. */
__device__ __forceinline__ unsigned char *pk_wait_tile(const pk_ring &R) {
    if (R.diag != 2) mbar_wait(&R.bar[R.tail % R.nst], (R.tail / R.nst) & 1);
    return pk_slot(R, R.tail);
}

/* Orders this block's earlier generic-proxy accesses of shared memory before the copy engine's
 * writes that follow (a stage just read, or the attention scratch over the ring). Thread 0. */
__device__ __forceinline__ void pk_async_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

/* The tile at the tail has been consumed by the whole block: frees its stage. */
__device__ __forceinline__ void pk_release(pk_ring &R) {
    __syncthreads();
    R.tail++;
    if (threadIdx.x == 0) pk_async_fence();
}

/* ------------------------------------------------------------------ GEMV job */

/* Rows per tile of segment s: as many as a stage holds, but no more than rows / grid, so that
 * every block gets a tile (the router: one row per tile). */
__device__ __forceinline__ int pk_gemv_tr(const gmat &W, int stage) {
    int cap = stage / pk_row_bytes(W), bal = (W.rows + (int)gridDim.x - 1) / (int)gridDim.x;
    return max(1, min(cap, bal));
}

__device__ __forceinline__ int pk_gemv_ntiles(const gemv_args &a, int stage) {
    int t = 0;
    for (int s = 0; s < a.nseg; s++) t += (a.seg[s].W.rows + pk_gemv_tr(a.seg[s].W, stage) - 1) / pk_gemv_tr(a.seg[s].W, stage);
    return t;
}

/* Tile t over the concatenated segments: segment, first row, rows, rows per tile of the segment. */
__device__ __forceinline__ void pk_gemv_tile(const gemv_args &a, int stage, int t, int *s, int *r0, int *n, int *TR) {
    int i = 0;
    for (;;) {
        int tr = pk_gemv_tr(a.seg[i].W, stage), nt = (a.seg[i].W.rows + tr - 1) / tr;
        if (t < nt || i == a.nseg - 1) { *TR = tr; break; }
        t -= nt;
        i++;
    }
    *s = i;
    *r0 = t * *TR;
    *n = min(*TR, a.seg[i].W.rows - *r0);
}

__device__ __forceinline__ int pk_mine(int ntiles) {
    return ntiles > (int)blockIdx.x ? (ntiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
}

/* Requests this block's tiles of a GEMV job while stages are free. Whole block. */
__device__ __forceinline__ void pk_gemv_fill(const gemv_args &a, pk_ring &R) {
    while (R.jn < R.mine && (int)(R.head - R.tail) < R.nst) {
        int s, r0, n, TR;
        pk_gemv_tile(a, R.stage, (int)blockIdx.x + R.jn * (int)gridDim.x, &s, &r0, &n, &TR);
        const gmat &W = a.seg[s].W;
        int stage = R.stage;
        pk_request(R, [&](unsigned char *dst, uint64_t *b, bool go) -> uint32_t {
            if (!go) return pk_streamable(W, stage) ? pk_copy_bytes(W, r0, n) : 0u;
            return pk_piece(W, r0, n, TR, dst, b, stage, R.mode);
        });
        R.jn++;
    }
}

/* Starts a GEMV job: its arguments into shared memory, its first tiles requested. Whole block. */
__device__ __forceinline__ void pk_gemv_begin(const gemv_args &g, gemv_args *a, pk_ring &R) {
    pk_args_to_smem(g, a);
    R.mine = pk_mine(pk_gemv_ntiles(*a, R.stage));
    R.jn = 0;
    if (threadIdx.x == 0) pk_async_fence();
    pk_gemv_fill(*a, R);
}

/* y = W transform(x) on this block's tiles (after the barrier). A: the activation, built by the
 * caller. Returns nothing; merges the argmax of segment 0 when a.argmax. Whole block. */
__device__ PK_PHASE_ATTR void pk_gemv_run(const gemv_args &a, pk_ring &R, const qact &A, unsigned long long *best_s) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int lanes = gemv_lanes(a.K), rpw = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    unsigned long long best = 0;
    for (int i = 0; i < R.mine; i++) {
        int s, r0, n, TR;
        pk_gemv_tile(a, R.stage, (int)blockIdx.x + i * (int)gridDim.x, &s, &r0, &n, &TR);
        unsigned char *base = pk_wait_tile(R);
        const gmat &W = a.seg[s].W;
        bool st = pk_streamable(W, R.stage);
        gmat V = st ? pk_view(W, r0, n, TR, base) : W;
        long off = st ? 0 : r0;
        bool ex = a.exact && W.type != GT_BF16; /* router: fp32 dots on dequantized weights */
        for (int w0 = warp * rpw; w0 < (R.diag == 1 ? 0 : n); w0 += PK_WARPS * rpw) {
            int lr = w0 + grp;
            float v = 0.0f;
            if (lr < n) v = ex ? row_dot_f32(V, off + lr, A.xf, sub, lanes) : row_dot_part(V, off + lr, A, 0, sub, lanes);
            v = group_sum(v, lanes);
            if (lr < n && sub == 0) {
                float *y = a.seg[s].y + r0 + lr;
                if (a.seg[s].epi == EPI_ADD) *y += v; else *y = v;
                if (a.argmax && s == 0) { unsigned long long p = argmax_pack(v, r0 + lr); best = p > best ? p : best; }
            }
        }
        pk_release(R);
        pk_gemv_fill(a, R);
    }
    gemv_argmax_block(a, best, best_s);
}

/* ------------------------------------------------------------------ MoE gate/up job
 * Tiles: TR rows of the gate AND up matrices of one slot; the shared expert's FS rows first (they
 * do not depend on the router, so they are requested before the barrier), then the k chosen
 * experts' (requested after the block's top-k). TR: a power of two <= 32 dividing FF and FS. */

__device__ __forceinline__ int pk_pow2_le(int v, int cap) {
    int t = 1;
    while (t * 2 <= v && t * 2 <= cap) t *= 2;
    return t;
}
__device__ __forceinline__ int pk_gu_tr(const moe_args &a, int stage) {
    int rb = pk_row_bytes(a.gate) + pk_row_bytes(a.up);
    if (a.FS) rb = max(rb, pk_row_bytes(a.sgate) + pk_row_bytes(a.sup));
    int TR = pk_pow2_le(max(1, stage / rb), 32);
    while (TR > 1 && (pk_span(a.gate, TR) + pk_span(a.up, TR) > stage || (a.FS && pk_span(a.sgate, TR) + pk_span(a.sup, TR) > stage))) TR >>= 1;
    return TR;
}
/* Tile t: gate/up matrices, first row in them, first row in h. ids: the block's top-k. */
__device__ __forceinline__ void pk_gu_tile(const moe_args &a, int TR, int t, const int *ids, const gmat **g, const gmat **u,
                                           long *r0, int *hrow) {
    int ns = a.FS / TR, tpe = a.FF / TR;
    if (t < ns) { *g = &a.sgate; *u = &a.sup; *r0 = (long)t * TR; *hrow = a.k * a.FF + t * TR; return; }
    t -= ns;
    int sl = t / tpe;
    *g = &a.gate; *u = &a.up;
    *r0 = (long)ids[sl] * a.FF + (t % tpe) * TR;
    *hrow = sl * a.FF + (t % tpe) * TR;
}

/* Whole block; ids_ready: the top-k is in ids (before it only shared-expert tiles are requested). */
__device__ __forceinline__ void pk_gu_fill(const moe_args &a, pk_ring &R, const int *ids, bool ids_ready) {
    int TR = pk_gu_tr(a, R.stage), ns = a.FS / TR;
    while (R.jn < R.mine && (int)(R.head - R.tail) < R.nst) {
        int t = (int)blockIdx.x + R.jn * (int)gridDim.x;
        if (t >= ns && !ids_ready) break;
        const gmat *g, *u;
        long r0;
        int hrow, stage = R.stage;
        pk_gu_tile(a, TR, t, ids, &g, &u, &r0, &hrow);
        pk_request(R, [&](unsigned char *dst, uint64_t *b, bool go) -> uint32_t {
            unsigned char *dst2 = dst + pk_span(*g, TR);
            if (!go) return (pk_streamable(*g, stage) ? pk_copy_bytes(*g, r0, TR) : 0u) +
                            (pk_streamable(*u, stage) ? pk_copy_bytes(*u, r0, TR) : 0u);
            return pk_piece(*g, r0, TR, TR, dst, b, stage, R.mode) + pk_piece(*u, r0, TR, TR, dst2, b, stage, R.mode);
        });
        R.jn++;
    }
}

__device__ __forceinline__ void pk_gu_begin(const moe_args &m, moe_args *a, pk_ring &R, const int *ids) {
    pk_args_to_smem(m, a);
    int TR = pk_gu_tr(*a, R.stage);
    R.mine = pk_mine((a->k * a->FF + a->FS) / TR);
    R.jn = 0;
    if (threadIdx.x == 0) pk_async_fence();
    pk_gu_fill(*a, R, ids, false);
}

/* h = silu(gate x) * (up x) on this block's tiles; A: the router phase's activation. */
__device__ PK_PHASE_ATTR void pk_gu_run(const moe_args &a, pk_ring &R, const qact &A, const int *ids) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int lanes = gemv_lanes(a.H), rpw = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    int TR = pk_gu_tr(a, R.stage);
    pk_gu_fill(a, R, ids, true);
    for (int i = 0; i < R.mine; i++) {
        const gmat *g, *u;
        long r0;
        int hrow;
        pk_gu_tile(a, TR, (int)blockIdx.x + i * (int)gridDim.x, ids, &g, &u, &r0, &hrow);
        unsigned char *base = pk_wait_tile(R);
        bool sg = pk_streamable(*g, R.stage), su = pk_streamable(*u, R.stage);
        gmat G = sg ? pk_view(*g, r0, TR, TR, base) : *g;
        gmat U = su ? pk_view(*u, r0, TR, TR, base + pk_span(*g, TR)) : *u;
        long og = sg ? 0 : r0, ou = su ? 0 : r0;
        for (int w0 = warp * rpw; w0 < (R.diag == 1 ? 0 : TR); w0 += PK_WARPS * rpw) {
            int lr = w0 + grp;
            float gv = 0.0f, uv = 0.0f;
            if (lr < TR) { gv = row_dot_part(G, og + lr, A, 0, sub, lanes); uv = row_dot_part(U, ou + lr, A, 0, sub, lanes); }
            gv = group_sum(gv, lanes);
            uv = group_sum(uv, lanes);
            if (lr < TR && sub == 0) a.h[hrow + lr] = silu_f(gv) * uv;
        }
        pk_release(R);
        pk_gu_fill(a, R, ids, true);
    }
}

/* ------------------------------------------------------------------ MoE down job
 * Tiles: TR output rows; a tile holds those rows of the k chosen experts' down matrices and of the
 * shared one (slots 0..k-1, then k). All known before the barrier (the top-k is in shared memory
 * since the gate/up phase). TR: a power of two <= PK_DOWN_MAX_TR dividing H. */
__device__ __forceinline__ int pk_down_rb(const moe_args &a) { return a.k * pk_row_bytes(a.down) + (a.FS ? pk_row_bytes(a.sdown) : 0); }
__device__ __forceinline__ int pk_down_tr(const moe_args &a, int stage) {
    int TR = pk_pow2_le(max(1, stage / pk_down_rb(a)), PK_DOWN_MAX_TR);
    while (TR > 1 && (a.H % TR || a.k * pk_span(a.down, TR) + (a.FS ? pk_span(a.sdown, TR) : 0) > stage)) TR >>= 1;
    return TR;
}
__device__ __forceinline__ unsigned char *pk_down_piece(const moe_args &a, int TR, int s, unsigned char *base) {
    return base + (size_t)s * pk_span(a.down, TR); /* slot k (shared) follows the k experts */
}

__device__ __forceinline__ void pk_down_fill(const moe_args &a, pk_ring &R, const int *ids) {
    int TR = pk_down_tr(a, R.stage), nslot = a.k + (a.FS ? 1 : 0);
    while (R.jn < R.mine && (int)(R.head - R.tail) < R.nst) {
        long r0 = (long)((int)blockIdx.x + R.jn * (int)gridDim.x) * TR;
        int stage = R.stage;
        pk_request(R, [&](unsigned char *dst, uint64_t *b, bool go) -> uint32_t {
            uint32_t bytes = 0;
            for (int s = 0; s < nslot; s++) {
                const gmat &W = s < a.k ? a.down : a.sdown;
                long row = s < a.k ? (long)ids[s] * a.H + r0 : r0;
                if (!go) bytes += pk_streamable(W, stage) ? pk_copy_bytes(W, row, TR) : 0u;
                else bytes += pk_piece(W, row, TR, TR, pk_down_piece(a, TR, s, dst), b, stage, R.mode);
            }
            return bytes;
        });
        R.jn++;
    }
}

__device__ __forceinline__ void pk_down_begin(pk_ring &R, const moe_args &a, const int *ids) {
    /* the arguments are the gate/up phase's (already in shared memory) */
    R.mine = pk_mine(a.H / pk_down_tr(a, R.stage));
    R.jn = 0;
    if (threadIdx.x == 0) pk_async_fence();
    pk_down_fill(a, R, ids);
}

/* out[r] += sum_s w_s (down_s[r] . h_s): every (row, slot) dot by a group of gemv_lanes(FF) lanes
 * into part[], then one thread per row sums its slots in a fixed order. A: q8 of h. */
__device__ PK_PHASE_ATTR void pk_down_run(const moe_args &a, pk_ring &R, const qact &A, const int *ids, const float *wts,
                                         float *part) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int lanes = gemv_lanes(a.FF), par = 32 / lanes, sub = lane & (lanes - 1), grp = lane / lanes;
    int TR = pk_down_tr(a, R.stage), nslot = a.k + (a.FS ? 1 : 0), items = TR * nslot;
    for (int i = 0; i < R.mine; i++) {
        long r0 = (long)((int)blockIdx.x + i * (int)gridDim.x) * TR;
        unsigned char *base = pk_wait_tile(R);
        for (int j0 = warp * par; j0 < (R.diag == 1 ? 0 : items); j0 += PK_WARPS * par) {
            int j = j0 + grp, lr = j / nslot, s = j % nslot;
            float v = 0.0f;
            if (j < items) {
                const gmat &W = s < a.k ? a.down : a.sdown;
                long row = s < a.k ? (long)ids[s] * a.H + r0 : r0;
                bool st = pk_streamable(W, R.stage);
                gmat V = st ? pk_view(W, row, TR, TR, pk_down_piece(a, TR, s, base)) : W;
                /* the shared expert's columns of h start at k*FF whatever FS is */
                v = row_dot_part(V, (st ? 0 : row) + lr, A, s * a.FF, sub, lanes);
            }
            v = group_sum(v, lanes);
            if (j < items && sub == 0) part[j] = v;
        }
        __syncthreads();
        if (threadIdx.x < TR) {
            float acc = 0.0f;
            for (int s = 0; s < nslot; s++) acc += wts[s] * part[threadIdx.x * nslot + s];
            a.out[r0 + threadIdx.x] += acc;
        }
        pk_release(R);
        pk_down_fill(a, R, ids);
    }
}

/* ------------------------------------------------------------------ phases without weights */

/* GDN step: one warp task per (v-head, 8 value columns), dealt warp-major over the grid (task t
 * -> block t % grid) so that all SMs share the state traffic. */
template <int DK>
__device__ __forceinline__ void pk_gdn_step_t(const gdn_args &g, float *qk_s) {
    int warp = threadIdx.x >> 5, nt = g.HV * (g.DV / 8);
    float *qs = qk_s + warp * 2 * DK, *ks = qs + DK;
    for (int t = warp * gridDim.x + blockIdx.x; t < nt; t += gridDim.x * PK_WARPS)
        gdn_step_warp<DK, true>(g, t / (g.DV / 8), (t % (g.DV / 8)) * 8, qs, ks);
}

template <int DPL>
__device__ __noinline__ void pk_attn_fd_t(const attn_dec_args &da, float *fsm) {
    int nvb = da.NKV * da.nsplit;
    for (int vb = blockIdx.x; vb < nvb; vb += gridDim.x) {
        attn_fd_block<DPL, false>(da, vb % da.NKV, vb / da.NKV, da.nsplit, fsm);
        __syncthreads();
    }
}

/* Merge of the flash-decoding splits: virtual block (head h, 64 dims), its thread groups each sum
 * a share of the splits. scratch: PK_THREADS + 2 * PK_THREADS / 64 floats (the activation area, idle here). */
__device__ __forceinline__ void pk_attn_combine(const attn_dec_args &a, float *scratch) {
    int nch = (a.HD + 63) / 64;
    for (int vb = blockIdx.x; vb < a.NH * nch; vb += gridDim.x) {
        attn_combine_part(a, vb / nch, (vb % nch) * 64, 64, scratch);
        __syncthreads();
    }
}

/* ------------------------------------------------------------------ the step */

/* MINB: resident blocks per SM the registers are budgeted for (2: 128 registers, spills; 1: no
 * spills, 8 warps per SM, a ring twice as deep). */
template <int MINB>
__global__ void __launch_bounds__(PK_THREADS, MINB) k_decode_persist(const __grid_constant__ pk_params P) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float red[32];
    __shared__ unsigned long long best_s[PK_WARPS];
    __shared__ int ids_s[QK_MAX_TOPK];
    __shared__ float wts_s[QK_MAX_TOPK + 1];
    __shared__ float part_s[PK_DOWN_MAX_TR * (QK_MAX_TOPK + 1)];
    __shared__ __align__(8) uint64_t mbar_s[PK_NST_MAX];
    __shared__ gemv_args ga_s;
    __shared__ moe_args ma_s;
    __shared__ pk_bstate bar_s;
    pk_ring R;
    R.buf = sm + P.ring_off; R.bar = mbar_s; R.nst = P.nst; R.stage = P.stage; R.mode = P.copy; R.diag = P.diag;
    R.head = R.tail = 0; R.jn = R.mine = 0;
    if (threadIdx.x == 0) {
        bar_s.target = *(volatile unsigned *)P.epoch;
        bar_s.n = 0;
        if (P.prof && blockIdx.x == 0) P.prof[0] = pk_clock_ns();
        for (int i = 0; i < R.nst; i++) mbar_init(&mbar_s[i], R.mode == PK_COPY_BULK ? 1 : PK_THREADS);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (P.empty) {
        for (int i = 0; i < P.empty; i++) pk_sync(P, &bar_s);
        if (blockIdx.x == 0 && threadIdx.x == 0) *P.epoch = bar_s.target;
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
    qact A;
    pk_gemv_begin(P.L[0].in, &ga_s, R);
    for (int l = 0; l < P.n_layer; l++) {
        const pk_layer &L = P.L[l];
        /* in-proj */
        pk_sync(P, &bar_s);
        gemv_prologue(ga_s, sm, red, &A);
        pk_mark(P, &bar_s);
        pk_gemv_run(ga_s, R, A, best_s);
        if (L.attn) {
            __nv_bfloat16 *kc = P.kv + (size_t)L.idx * 2 * P.NKV * P.n_ctx * P.HD, *vc = kc + (size_t)P.NKV * P.n_ctx * P.HD;
            attn_prep_args pa = {P.qg, 0, P.kb, 0, P.vb, 0, L.q_norm, L.k_norm, P.inv_freq, P.q, NULL, kc, vc,
                                 P.pos, P.NH, P.NKV, P.HD, P.n_rot, P.n_ctx, P.eps};
            pk_sync(P, &bar_s);
            for (int vb = blockIdx.x; vb < P.NH + 2 * P.NKV; vb += gridDim.x) { attn_prep_block(pa, vb, 0); __syncthreads(); }
            attn_dec_args da = {P.q, kc, vc, P.part_o, P.part_ml, P.qg, P.att, P.pos, P.NH, P.NKV, P.HD, P.n_ctx, 0, P.nsplit};
            pk_sync(P, &bar_s);
            /* the flash-decoding scratch spans the whole dynamic shared memory: the ring is idle
             * here (the o-proj tiles are requested after it) */
            if (P.HD == 256) pk_attn_fd_t<8>(da, (float *)sm);
            else if (P.HD == 128) pk_attn_fd_t<4>(da, (float *)sm);
            else pk_attn_fd_t<2>(da, (float *)sm);
            pk_gemv_begin(L.out, &ga_s, R);
            pk_sync(P, &bar_s);
            pk_attn_combine(da, (float *)sm);
        } else {
            gdn_args g = {P.qkv, P.ab, P.ab + P.HV, 0, L.conv, P.ring + (size_t)L.idx * 4 * P.CD,
                          P.S + (size_t)L.idx * P.HV * P.DK * P.DV, L.dt_bias, L.ssm_a, P.o, P.pos, 1, P.HK, P.HV, P.DV, P.tiled,
                          P.S2 ? P.S2 + (size_t)L.idx * P.HV * P.DK * P.DV : NULL};
            pk_gemv_begin(L.out, &ga_s, R); /* out-proj weights stream during the step */
            pk_sync(P, &bar_s);
            if (P.DK == 128) pk_gdn_step_t<128>(g, (float *)sm);
            else if (P.DK == 64) pk_gdn_step_t<64>(g, (float *)sm);
            else pk_gdn_step_t<32>(g, (float *)sm);
        }
        /* out-proj (+x) */
        pk_sync(P, &bar_s);
        gemv_prologue(ga_s, sm, red, &A);
        pk_mark(P, &bar_s);
        pk_gemv_run(ga_s, R, A, best_s);
        /* router: its activation (ffn-normed x) stays in shared memory for gate/up */
        pk_gemv_begin(L.router, &ga_s, R);
        pk_sync(P, &bar_s);
        gemv_prologue(ga_s, sm, red, &A);
        pk_mark(P, &bar_s);
        pk_gemv_run(ga_s, R, A, best_s);
        /* gate/up: shared-expert tiles before the barrier, the chosen experts' after the top-k */
        pk_gu_begin(L.moe, &ma_s, R, ids_s);
        pk_sync(P, &bar_s);
        if (threadIdx.x < 32) {
            topk_warp_reg(ma_s.logits, ma_s.E, ma_s.k, ids_s, wts_s);
            if (threadIdx.x == 0) wts_s[ma_s.k] = ma_s.FS ? sigmoid_f(ma_s.logits[ma_s.E]) : 0.0f;
        }
        __syncthreads();
        pk_mark(P, &bar_s);
        pk_gu_run(ma_s, R, A, ids_s);
        /* down (+x) */
        pk_down_begin(R, ma_s, ids_s);
        pk_sync(P, &bar_s);
        {
            gemv_args ha = {};
            ha.pro = PRO_PLAIN; ha.x = ma_s.h; ha.K = ma_s.k * ma_s.FF + ma_s.FS;
            gemv_prologue(ha, sm, red, &A);
        }
        pk_mark(P, &bar_s);
        pk_down_run(ma_s, R, A, ids_s, wts_s, part_s);
        pk_gemv_begin(l + 1 < P.n_layer ? P.L[l + 1].in : P.head, &ga_s, R);
    }
    /* lm_head + argmax */
    pk_sync(P, &bar_s);
    gemv_prologue(ga_s, sm, red, &A);
    pk_mark(P, &bar_s);
    pk_gemv_run(ga_s, R, A, best_s);
    pk_sync(P, &bar_s);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        unsigned long long am = atomicExch(P.head.argmax, 0ull);
        int t = argmax_row(am);
        int *tok = (int *)P.tok;
        if (P.gen) { P.gen[*P.gen_n & 65535] = *tok; *P.gen_n += 1; }
        *tok = t;
        *P.pos += 1;
        *P.epoch = bar_s.target;
    }
}

} /* namespace pk_impl */

cudaError_t pk_kernel_config(int minb, size_t smem, int *blocks_per_sm) {
    *blocks_per_sm = 0;
    auto k = minb >= 2 ? pk_impl::k_decode_persist<2> : pk_impl::k_decode_persist<1>;
    cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, k, PK_THREADS, smem);
    return e;
}

void pk_kernel_launch(int minb, int grid, size_t smem, cudaStream_t st, const void *params) {
    const pk_impl::pk_params &P = *(const pk_impl::pk_params *)params;
    if (minb >= 2) pk_impl::k_decode_persist<2><<<grid, PK_THREADS, smem, st>>>(P);
    else pk_impl::k_decode_persist<1><<<grid, PK_THREADS, smem, st>>>(P);
}
