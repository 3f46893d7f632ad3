/*
 * k_lgdn.cuh — one launch for a GDN layer's decode step AND its output projection (issue 6,
 * session 8): conv + SiLU, q/k L2 norm, gates, the recurrent update, the gated RMSNorm and
 * x += W_out y, split by head.
 *
 * Why: the chain in -> step -> out paid two kernel boundaries between the in-projection's end and
 * the out-projection's, ~11 µs per GDN layer in the in-graph trace (session 7: the step's wait
 * release, its L2 loads, its drain, then the out-projection's wait release and a gated-norm
 * prologue that read o and z back from L2). The output projection is split by K instead of by
 * rows: y's head h only meets columns [128h, 128h + 128) of W_out, so the block that computed
 * head h's o can do that head's share of every output row. The shares meet in a buffer, and the
 * last block of a row part to arrive sums them in head order into x: reproducible bits (fp32
 * atomics into x, the other choice, make the sum's order vary from run to run).
 *
 * Geometry: grid HV * P blocks (P = H / R parts per head), block 512 threads = 16 warps x 8 value
 * columns x 4 key-row groups of 32 (DK = DV = 128): block (h, part) computes the WHOLE head's step
 * (the 64 KB state in registers, 32 values per thread, as k_gdn_step) so that it has all of o_h
 * for the norm and its slice of W_out without any exchange between blocks; it writes back only
 * its part's 128 / P state columns (and part 0 the conv ring), so the P blocks of a head read the
 * state P times (L2) but write it once. The state is double-buffered (gdn_state_copy: read copy
 * p & 1, write copy (p + 1) & 1), so a block that enters late still reads the old state; updated in
 * place (LILAC_CUDA_GDN_DB=0) a barrier keeps every write-back after every read of the old state
 * (session 35: without it a block that entered late read columns already updated). Then rows [part * R, part * R + R) of W_out's 128 columns of
 * head h: R x (64 qs bytes + the 16-byte scales of the row's superblock) = 40 KB at R = 512,
 * requested with cp.async at entry, before the wait, like the conv inputs of earlier positions
 * (only the in-projection's outputs are the previous kernel's). The state is loaded after the
 * wait by default (lgdn_args.pre): four blocks reading each head's 64 KB while the in-projection
 * streams its 14 MB slowed that projection more than it saved (session 8: 546.6 tok/s with the
 * state after the wait, 543.8 before, 539.5 for the two kernels this one replaces).
 *
 * The router folded in (session 9, lgdn_args.Bm != NULL): the MoE router's logits are linear in
 * the new residual, W_r diag(g_ffn) x_new / rms(x_new) with x_new = x_old + W_out y, so without
 * the 1/rms (top-k does not depend on it; k_lmoe_gu applies it to the weights) they are
 * B y + W_r diag(g_ffn) x_old with B = W_r diag(g_ffn) W_out precomputed at load (BF16 [NL][HV*DV]).
 * Both terms split by head like the out-projection: block (h, part) adds B's columns of head h
 * times y_h (fp32) and W_r's columns [h H/HV, (h+1) H/HV) times g_ffn x_old for logit rows
 * [part * NLR, part * NLR + NLR), as extra rows of its share, and the last block of the part sums
 * them in head order with its x rows. The x_old term needs no input of the previous kernel, so it
 * is computed before the wait. x_old is read by every block while the last arrivers write x: the
 * output goes to another buffer (x = xin + W y). The router's launch and its boundary go (~4 µs).
 *
 * Dynamic shared memory: [R * 64 qs][R * 16 meta][NLR * 256 B slice (fold)][qact of 128 elements].
 */
#ifndef LILAC_K_LGDN_CUH
#define LILAC_K_LGDN_CUH

#include "k_gdn.cuh"
#include "k_lean.cuh"
#include "k_lmoe_sk.cuh" /* the cluster primitives (sk_st_cluster, sk_cluster_arrive / _wait) */

#define LG_THREADS 512
#define LG_D 128 /* DK = DV */
#define LG_MAX_PARTS 16 /* row parts per head (the arrival counters the host allocates) */
#define LG_MAX_HEADS 64 /* v-heads the state barrier's counters cover (lean_gdn's hc) */
/* a share of head h for row o (x rows, then the fold's logit rows) in part [HV][ps]: the heads'
 * stores of a row part are coalesced. (Session 9 measured the transpose, [ps][HV] with a row's
 * heads adjacent so that the sum is 8 vector loads: 25 tok/s slower, the scattered 4-byte stores.) */
#define LG_PIDX(o, h) ((size_t)(h) * (FOLD ? L.ps : H) + (o))
#define LG_FOLD_MAXR 80
/* the state barrier (session 35; see k_lgdn): 0 only for the A/B of its cost (dev/lean_variant.sh
 * nobar -DLG_STATE_BAR=0), a build with the race back */
#ifndef LG_STATE_BAR
#define LG_STATE_BAR 1
#endif
#ifndef LN_GDN_DELAY
#define LN_GDN_DELAY 1000 /* ns from a block's entry to its pre-wait requests (0: at entry; see k_lgdn) */
#endif
/* The fold's code exists only in the k_lgdn<true> instance: compiled into the one kernel, it cost
 * 6.5 tok/s with the fold off (session 9: 559.5 vs 566.0 for the kernel without it) */
#define LG_BM (FOLD ? L.Bm : (const __nv_bfloat16 *)0) /* logit rows per part with the router fold (80 * 256 B of B slice) */

/* IN (LILAC_CUDA_GDN_IN=1, session 30; opt-in, not yet run on a device): the layer's INPUT projection
 * in this launch too, so that the in-projection -> step boundary goes (session 26's trace at 4K: the
 * in-projection's drain, a 0.5 µs gap and the step's 2.8 µs prologue, which waited on its inputs'
 * L2 round trip, x 30 GDN layers). The blocks of one k-head (ratio v-heads x P row parts: 2 x 4 = 8
 * at the real shapes) form a thread-block cluster. The k-head's in-projection rows are q (128), k
 * (128), and per v-head v (128), z (128), b (1) and a (1): 772 rows, 48 tiles of 16 rows plus 4
 * single rows. Block `rank` of the cluster dots tiles rank, rank + 8, ... (one q, one k, two v and
 * two z tiles of 16 rows: the same bytes per block) and rank < 2 ratio one b / a row, against x̂ =
 * RMSNorm(x) quantized to q8 by its own prologue (the chunk dots and the lane sums of k_lgemv, so
 * the q / k / v / z values are the in-projection's bits), and stores each value into all 8 blocks'
 * exchange buffers (distributed shared memory); one cluster barrier later every block holds its
 * k-head's 772 inputs and runs the step as before. The tiles are requested before the wait into a
 * ring that the W_out / B slices reuse once the dots are done (so that the block stays near k_lgdn's
 * ~90 KB and the neighbouring kernels' blocks still fit beside it); those slices are asked of the L2
 * at entry and copied after the last tile. x is now the previous kernel's output, so the fold's
 * x_old term and ATOM's x_old rows move after the wait. Only with FOLD and ATOM (the default
 * non-deterministic path). */
#define LG_IN_TR 16     /* rows per tile: one 64-column chunk per thread at H = 2048 */
#define LG_IN_MAXST 6   /* ring stages at most */
struct lgdn_in {
    gmat W[4];          /* the in-projection: qkv [2 QK + HV DV][H], z [HV DV][H], b [HV][H], a [HV][H] */
    const float *x;     /* [H] the layer's input (x_old, the previous kernel's output) */
    const float *g;     /* [H] the attention norm's gain */
    float eps;
    int nst, stage;     /* ring stages of `stage` bytes (a tile of LG_IN_TR rows of the widest type) */
    int tpb;            /* tiles per block: (16 + 16 ratio) / (ratio P) */
    int wpre, off_ring; /* wpre: the W / B slices in their own place, requested before the wait as k_lgdn does, the
                         * ring after them at off_ring (~58 KB more: no MoE block fits beside it;
                         * LILAC_CUDA_GDN_IN_WPRE=1); else the ring at 0 and the slices after the dots */
    int off_x, off_mini, off_xb, off_bar, off_red; /* dynamic shared memory: x̂'s qact, the b / a row (4 KB),
                         * the exchange buffer (256 + 258 ratio floats), nst + 1 mbarriers, 32 floats */
};

/* IN's addressing, host-callable (tests/cuda_host/test_lgdn_in.cu checks it against the channels the step
 * reads). The exchange buffer of k-head kh: [q 128][k 128][v of each of its ratio v-heads 128][z of each
 * 128][b of each][a of each] (256 + 258 ratio floats). */
/* v-head jj (< ratio) of k-head kh (tiled: llama.cpp's order, v-head h belongs to k-head h % HK) */
__host__ __device__ __forceinline__ int lg_in_head(int kh, int jj, int ratio, int HK, int tiled) { return tiled ? kh + jj * HK : kh * ratio + jj; }
/* tile t (< 16 + 16 ratio) of k-head kh: its segment (0 qkv, 1 z) and first row; returns its rows' place
 * in the exchange buffer (16 t) */
__host__ __device__ __forceinline__ int lg_in_tile(int t, int kh, int ratio, int HK, int tiled, int *seg, long *row0) {
    int nv = 8 * ratio;
    long QK = (long)HK * LG_D;
    if (t < 8) { *seg = 0; *row0 = (long)kh * LG_D + 16 * t; }
    else if (t < 16) { *seg = 0; *row0 = QK + (long)kh * LG_D + 16 * (t - 8); }
    else if (t < 16 + nv) { *seg = 0; *row0 = 2 * QK + (long)lg_in_head(kh, (t - 16) >> 3, ratio, HK, tiled) * LG_D + 16 * ((t - 16) & 7); }
    else { *seg = 1; *row0 = (long)lg_in_head(kh, (t - 16 - nv) >> 3, ratio, HK, tiled) * LG_D + 16 * ((t - 16 - nv) & 7); }
    return 16 * t;
}
/* the places of the step's inputs for v-head jv: conv channel i (< 384: q, k of the k-head, v of the
 * v-head, the order of k_lgdn's chan()), z_i, b and a */
__host__ __device__ __forceinline__ int lg_in_xch(int i, int jv) { return i < 2 * LG_D ? i : 2 * LG_D + jv * LG_D + i - 2 * LG_D; }
__host__ __device__ __forceinline__ int lg_in_xz(int i, int jv, int ratio) { return 2 * LG_D + (ratio + jv) * LG_D + i; }
__host__ __device__ __forceinline__ int lg_in_xb(int jv, int ratio) { return 2 * LG_D + 2 * ratio * LG_D + jv; }
__host__ __device__ __forceinline__ int lg_in_xa(int jv, int ratio) { return 2 * LG_D + 2 * ratio * LG_D + ratio + jv; }
/* the single row of block `rank` (< 2 ratio): segment 2 (b) or 3 (a) of v-head rank % ratio, whose place
 * is 256 + 256 ratio + rank (lg_in_xb / lg_in_xa) */
__host__ __device__ __forceinline__ int lg_in_mini_seg(int rank, int ratio) { return rank < ratio ? 2 : 3; }

struct lgdn_args {
    gdn_args g;          /* the step's arguments (T = 1; g.o is not used) */
    const float *z;      /* [HV * DV] the gate input of the gated norm (in-projection output) */
    const float *gain;   /* [DV] gated norm gain */
    float eps;
    gmat W;              /* out projection [H][HV * DV], Q4_K */
    float *x;            /* [H] the residual: x += W y */
    int R;               /* output rows per block */
    float *part;         /* [HV][H] the heads' shares of W y */
    unsigned *cnt;       /* [H / R] arrivals per row part (NULL: atomics into x, not reproducible) */
    unsigned *hc;        /* [HV] the state barrier's arrivals per head (zero at first use, never reset; NULL:
                          * the launch is in clusters of P and the barrier is the cluster's) */
    int pre;             /* requested before the wait: 1 the W slice, 2 the state, 4 the state into L2 only,
                          * 8 the B slice (fold) */
    const float *xin;    /* [H] the residual before the layer: x = xin + W y (xin == x: in place) */
    int ps;              /* rows of part: H, + P * NLR with the fold (part is [ps][HV]: a row's heads adjacent) */
    /* the router fold (Bm NULL: off; needs cnt and xin != x) */
    const __nv_bfloat16 *Bm; /* [NL][HV * DV] W_r diag(gf) W_out */
    const __nv_bfloat16 *Wr; /* [E][H] router rows */
    const __nv_bfloat16 *Ws; /* [1][H] shared-expert gate row, NULL when NL == E */
    const float *gf;     /* [H] ffn norm gain */
    int E, NL, NLR;      /* router rows, logit rows (E or E + 1), logit rows per part */
    int tpr;             /* threads per logit row: H / HV / 8 (a power of two <= 16) */
    float *lraw;         /* [NL] raw logits W_r diag(gf) x */
    unsigned long long *tr; /* optional trace record (LILAC_LN_TRACE builds) */
    unsigned stagger;    /* test hook (LILAC_CUDA_GDN_STAGGER, lean_gdn_stagger): ns that every block but
                          * part 0 waits at entry, so that part 0 writes its state columns back before
                          * its siblings read them unless the state barrier holds it (gpu_test --steps) */
    /* k_lgdn<true, 1 | 2> (the atomic fold): x (all zeros at entry) and lraw receive the shares by
     * fp32 atomics; the blocks zero zx [H] and zl [NL] before their wait, the buffers the NEXT GDN
     * layer's launch adds into (dead until then), so the zeros are in place one layer ahead */
    float *zx, *zl;
    lgdn_in in;          /* k_lgdn<true, ATOM, true> only */
};

/* ATOM (only with FOLD; opt-in, LILAC_CUDA_GDN_ATOM=1 or 2, session 25, not yet measured): no arrival
 * counters and no last block's sum in head order: every block adds its x rows (head 0's blocks with
 * x_old, x starting at zero) and its logit rows with fp32 atomics and is done. The kernel's tail was
 * ~2.8 µs of its ~7.9 after the wait (fence, counter, one block's L2 round trip and sum, in session
 * 24's trace); the price is the order of the sums, which varies from run to run (as the prefill MoE
 * down's already does by default), so --deterministic keeps the ordered form. ATOM 2: the x rows
 * four at a time (red.global.add.v4.f32: a quarter of the ~65K atomic operations per launch). */
/* The state barrier's counter form (k_lgdn, L.hc). Arrival, every thread: its state values are in
 * registers (a sum that uses them all: a load whose value has been used has been performed), the
 * block's barrier, then thread 0 counts with release semantics and returns the target its wait needs
 * (P arrivals a launch; the count wraps with unsigned arithmetic, P a power of two). */
template <int N>
__device__ __forceinline__ unsigned lg_arrive_count(const float (&s)[N], unsigned *c, int P) {
    float t = 0.0f;
#pragma unroll
    for (int i = 0; i < N; i++) t += s[i];
    asm volatile("" ::"f"(t)); /* the sum is kept: every load returned before the barrier */
    __syncthreads();
    unsigned old = 0;
    if (threadIdx.x == 0) asm volatile("atom.add.release.gpu.global.u32 %0, [%1], 1;" : "=r"(old) : "l"(c) : "memory");
    return (old / (unsigned)P + 1u) * (unsigned)P;
}
__device__ __forceinline__ unsigned lg_count_peek(const unsigned *c) { /* issued early, used late */
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
    return v;
}
/* The wait (thread 0, then the block's barrier before any write-back): v, peeked at the step's start,
 * is normally already at the target (the siblings counted before their griddepcontrol.wait), so the
 * step hides the load's round trip; else poll with acquire loads. A block that never comes traps after
 * 2 s instead of hanging the stream. The write-backs follow the loop's exit (a store is not performed
 * before the branch that guards it resolves) and the barrier after it. */
__device__ __forceinline__ void lg_wait_count(const unsigned *c, unsigned v, unsigned target) {
    unsigned long long t0 = 0;
    for (int n = 1; (int)(v - target) < 0; n++) {
        if (n == 1) t0 = ln_now();
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(c) : "memory");
        if ((n & 1023) == 0 && ln_now() - t0 > 2000000000ull) __trap();
    }
}

/* SBAR: the state barrier's code compiled in (for the state updated in place; lean_gdn launches the
 * SBAR = false instance for the double-buffered state: in k_lgdn<true> the barrier's code alone
 * costs 40 bytes of spills under the 64-register cap) */
template <bool FOLD, int ATOM = 0, bool IN = false, bool SBAR = true>
__global__ void __launch_bounds__(LG_THREADS, 2) k_lgdn(const __grid_constant__ lgdn_args L) {
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ float cv[3 * LG_D];  /* conv + SiLU of this head's q, k, v channels */
    __shared__ float zs[LG_D];      /* z of head h */
    __shared__ float os[LG_D];      /* o_h = S^T q */
    __shared__ __align__(16) float4 cws[3 * LG_D];  /* their conv weights */
    __shared__ __align__(16) float hs[3][3 * LG_D]; /* their raw inputs at positions p - 3, p - 2, p - 1 */
    __shared__ __align__(16) float gs[LG_D];        /* the gated norm's gain */
    const gdn_args &g = L.g;
    constexpr int RPL = LG_D / 4;
    ln_trace(L.tr, 0);
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    int P = gridDim.x / g.HV, h = blockIdx.x / P, part = blockIdx.x % P, R = L.R, r0 = part * R;
    int ratio = g.HV / g.HK, kh = g.tiled ? h % g.HK : h / ratio;
    int QK = g.HK * LG_D, CD = 2 * QK + g.HV * LG_D;
    /* IN: cluster kh of cl blocks; this block's rank = jv * P + part, jv its v-head among the k-head's */
    int cl = ratio * P, rank = IN ? (int)blockIdx.x % cl : 0, jv = 0;
    if constexpr (IN) {
        kh = blockIdx.x / cl;
        jv = rank / P;
        part = rank % P;
        r0 = part * R;
        h = lg_in_head(kh, jv, ratio, g.HK, g.tiled);
    }
    if (L.stagger && part != 0) ln_delay_ns(L.stagger);
    /* 1. the conv weights of the channels this block convolves (q, k of k-head kh, v of head h:
     * 384 channels), their raw inputs at the 3 earlier positions (zeros before position 0) and the
     * norm gain, into shared memory (held in registers across the wait they spilled). First
     * commit group. */
    int p = *g.pos, slot = p & 3;
    auto chan = [&](int i) { /* the i-th of the block's 384 channels */
        return i < LG_D ? kh * LG_D + i : (i < 2 * LG_D ? QK + kh * LG_D + i - LG_D : 2 * QK + h * LG_D + i - 2 * LG_D);
    };
    if (tid < 3 * LG_D) cp_async16(cws + tid, g.conv_w + (size_t)chan(tid) * 4, 16);
    else if (tid < 3 * LG_D + 72) { /* 3 positions x 96 granules of 4 channels: 72 threads x 4 */
        for (int k = 0; k < 4; k++) {
            int gi = (tid - 3 * LG_D) * 4 + k, jj = gi / 96, c4 = 4 * (gi % 96), pp = p - 3 + jj;
            cp_async16(hs[jj] + c4, g.ring + (size_t)(pp >= 0 ? (pp & 3) : 0) * CD + chan(c4), pp >= 0 ? 16 : 0);
        }
    } else if (tid < 3 * LG_D + 72 + LG_D / 4) {
        cp_async16(gs + 4 * (tid - 3 * LG_D - 72), L.gain + 4 * (tid - 3 * LG_D - 72), 16);
    }
    cp_async_commit();
    /* 2. this block's slice of W_out, 4 x 16 bytes of qs and the 16-byte scales per row (second
     * group), and the state: column j = 8w + lane % 8, key rows 32 rg .. 32 rg + 31. Before the
     * wait unless L.pre says otherwise (they compete with the in-projection's tiles for DRAM) */
    int nb = L.W.cols >> 8, sb = (h * LG_D) >> 8, half = ((h * LG_D) >> 7) & 1;
    unsigned char *tq = sm, *tm = sm + (size_t)R * 64;
    auto issue_w = [&]() {
        for (int i = tid; i < 4 * R; i += LG_THREADS)
            cp_async16(tq + 16 * i, L.W.q + ((size_t)(r0 + (i >> 2)) * nb + sb) * 128 + 64 * half + 16 * (i & 3), 16);
        for (int i = tid; i < R; i += LG_THREADS) cp_async16(tm + 16 * i, L.W.sc + ((size_t)(r0 + i) * nb + sb) * 16, 16);
        cp_async_commit();
    };
    int c = lane & 7, rg = lane >> 3, j = 8 * w + c;
    /* the state: read from copy p & 1, written to copy (p + 1) & 1 where it is double-buffered (g.S2:
     * no barrier needed, see below), else in place */
    float *Sin = gdn_state_copy(g.S, g.S2, p);
    size_t soff = ((size_t)h * LG_D + rg * RPL) * LG_D + j;
    const float *Sp = Sin + soff;
    float s[RPL];
    /* the fold's B slice: rows part * NLR .. + NLR of B, head h's 128 columns (256 B), zeros past NL */
    unsigned char *tb = sm + (size_t)R * 80;
    auto issue_b = [&]() {
        for (int i = tid; i < 16 * L.NLR; i += LG_THREADS) {
            int row = part * L.NLR + (i >> 4);
            bool ok = row < L.NL;
            cp_async16(tb + 16 * i, L.Bm + (ok ? (size_t)row * L.W.cols + h * LG_D + 8 * (i & 15) : 0), ok ? 16 : 0);
        }
        cp_async_commit();
    };
    /* IN: the block's in-projection tiles and its b / a row, requested at entry (thread 0) */
    float *xb = IN ? (float *)(sm + L.in.off_xb) : nullptr;
    uint64_t *ibar = IN ? (uint64_t *)(sm + L.in.off_bar) : nullptr;
    /* the block's i-th tile: tile rank + cl i of the k-head */
    auto in_tile = [&](int i, int *seg, long *row0) { return lg_in_tile(rank + cl * i, kh, ratio, g.HK, g.tiled, seg, row0); };
    auto in_issue = [&](int i) {
        int seg;
        long row0;
        in_tile(i, &seg, &row0);
        ln_copy_rows(L.in.W[seg], row0, LG_IN_TR, LG_IN_TR, sm + L.in.off_ring + (size_t)(i % L.in.nst) * L.in.stage, ibar + i % L.in.nst, true);
    };
    if constexpr (IN) {
        if (tid == 0) {
            mbar_ring_init(ibar, L.in.nst + 1);
            for (int i = 0; i < L.in.nst && i < L.in.tpb; i++) in_issue(i);
            if (rank < 2 * ratio) /* rank m: b (m < ratio) or a of v-head m % ratio, one row */
                ln_copy_rows(L.in.W[lg_in_mini_seg(rank, ratio)], lg_in_head(kh, rank % ratio, ratio, g.HK, g.tiled), 1, 1, sm + L.in.off_mini,
                             ibar + L.in.nst, true);
        }
        __syncthreads(); /* the barriers initialised before any thread waits on one */
        sk_cluster_arrive(); /* this block has started: its shared memory may take remote stores (the wait is
                              * before the first one) */
    }
#if LN_GDN_DELAY
    /* the pre-wait requests LN_GDN_DELAY ns after entry (session 22: +2.5 / +3.6 tok/s at 1000 ns
     * in two calls, 500 +1.4, 1500 +3.4): this block enters as the in-projection beside it passes its
     * wait, and that projection's x prologue and tiles are on the critical path; this block's
     * ~120 kB are needed only after its own wait, ~10 µs later */
    if (tid == 0) ln_delay_ns(LN_GDN_DELAY);
    __syncthreads();
#endif
    if (!IN && (L.pre & 1)) issue_w();
    if (!IN && LG_BM && (L.pre & 8)) issue_b();
    if (IN && L.in.wpre) {
        issue_w();
        if (LG_BM) issue_b();
    }
    if constexpr (IN) { /* the W / B slices go where the ring is: asked of the L2 now, copied after the tiles */
        for (int i = tid; i < R && !L.in.wpre; i += LG_THREADS) {
            asm volatile("prefetch.global.L2 [%0];" ::"l"(L.W.q + ((size_t)(r0 + i) * nb + sb) * 128 + 64 * half));
            asm volatile("prefetch.global.L2 [%0];" ::"l"(L.W.sc + ((size_t)(r0 + i) * nb + sb) * 16));
        }
        if (LG_BM)
            for (int i = tid; i < 3 * L.NLR; i += LG_THREADS) { /* B's rows (2 lines), and W_r's for the x_old term (1) */
                int row = part * L.NLR + i / 3, k = i % 3;
                if (row >= L.NL) continue;
                const void *p = k < 2 ? (const void *)(L.Bm + (size_t)row * L.W.cols + h * LG_D + 64 * k)
                                      : (const void *)((row < L.E ? L.Wr + (size_t)row * L.W.rows : L.Ws) + h * 8 * L.tpr);
                asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
            }
    }
    /* the fold's x_old term: thread (logit row lr, lr + 512 / tpr; 8 columns c8 of head h's slice),
     * reduced over the row's threads into la[] (shared: registers held across the step spilled) */
    __shared__ float la[FOLD ? LG_FOLD_MAXR : 1];
    auto fold_xold = [&]() {
        int lr = tid / L.tpr, c8 = tid % L.tpr;
        int cw = 8 * L.tpr, col = h * cw + 8 * c8;
        float4 x0 = *(const float4 *)(L.xin + col), x1 = *(const float4 *)(L.xin + col + 4);
        float4 g0 = *(const float4 *)(L.gf + col), g1 = *(const float4 *)(L.gf + col + 4);
        float xg[8] = {x0.x * g0.x, x0.y * g0.y, x0.z * g0.z, x0.w * g0.w, x1.x * g1.x, x1.y * g1.y, x1.z * g1.z, x1.w * g1.w};
#pragma unroll
        for (int q = 0; q < 2; q++) {
            int row = lr + q * (LG_THREADS / L.tpr), i = part * L.NLR + row;
            float t = 0.0f;
            if (row < L.NLR && i < L.NL) {
                const __nv_bfloat16 *wr = (i < L.E ? L.Wr + (size_t)i * L.W.rows : L.Ws) + col;
                t = bf16x8_fma(*(const uint4 *)wr, xg, t);
            }
            for (int o = 1; o < L.tpr; o <<= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
            if (c8 == 0 && row < L.NLR) la[row] = t;
        }
    };
    if (LG_BM && !IN) fold_xold();
    /* the head's state on its way into L2, a 1/P share per block (IN: also for pre & 2, since its state
     * registers are loaded only after the dots, the values not before the wait) */
    if (((L.pre & 4) || (IN && (L.pre & 2))) && tid < LG_D * LG_D * 4 / 128 / P)
        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)(Sin + (size_t)h * LG_D * LG_D) + 128 * ((size_t)part * (LG_D * LG_D * 4 / 128 / P) + tid)));
#ifdef LN_GSTATE_Q /* diagnostic (session 21; results garbage): a block loads only the state columns it
                    * writes back (16 of 64 kB), zeros for the rest: what a step split by value columns
                    * would save in the in-projection's window, before paying for its exchange */
    if (!IN && (L.pre & 2))
#pragma unroll
        for (int t = 0; t < RPL; t++) s[t] = w / (16 / P) == part ? Sp[(size_t)t * LG_D] : 0.0f;
#else
    if (!IN && (L.pre & 2))
#pragma unroll
        for (int t = 0; t < RPL; t++) s[t] = Sp[(size_t)t * LG_D];
#endif
    /* ATOM, head 0's blocks: x_old of the part's rows (several kernels back), in shared memory (held
     * in registers across the step they spilled) */
    __shared__ float xos[ATOM ? 512 : 1];
    if constexpr (ATOM) {
        int H0 = L.W.rows;
        for (int i = blockIdx.x * LG_THREADS + tid; i < H0 + L.NL; i += gridDim.x * LG_THREADS) {
            if (i < H0) L.zx[i] = 0.0f;
            else L.zl[i - H0] = 0.0f;
        }
        if (h == 0 && !IN)
            for (int i = tid; i < R; i += LG_THREADS) xos[i] = L.xin[r0 + i];
    }
    /* the state barrier's arrival (counter form, see below) before the wait where the state was loaded
     * before it: the round trip hides in the wait */
    const bool sbar = SBAR && LG_STATE_BAR && !g.S2; /* the state updated in place: a barrier (below) */
    const bool hcb = sbar && !IN && L.hc;
    unsigned hc_target = 0, hc_v = 0;
    if (hcb && (L.pre & 2)) hc_target = lg_arrive_count(s, L.hc + h, P);
    pdl_wait();
    pdl_trigger();
    ln_trace(L.tr, 1);
    if (hcb && tid == 0) hc_v = lg_count_peek(L.hc + h);
    if constexpr (IN) {
        /* x̂ = RMSNorm(x) g as q8 (ln_prologue: 1/rms is applied to the group scales) */
        gemv_args pa = {};
        pa.pro = PRO_RMSNORM; pa.x = L.in.x; pa.K = L.W.rows; pa.g = L.in.g; pa.eps = L.in.eps;
        qact Qx;
        float rn = ln_prologue(pa, sm + L.in.off_x, (float *)(sm + L.in.off_red), &Qx);
        ln_trace(L.tr, 40);
        /* the tiles: warp w dots tile row w, lane c its chunk c (H = 2048: 32 chunks of 64), the lane
         * sums of k_lgemv; lane r < cl stores the row's value into block r's exchange buffer */
        ln_act A;
        int act_t = -1, NST = L.in.nst;
        sk_cluster_wait(); /* every block of the cluster started (long since, normally) */
        for (int i = 0; i < L.in.tpb; i++) {
            int seg;
            long row0;
            int xo = in_tile(i, &seg, &row0);
            const gmat &Wi = L.in.W[seg];
            mbar_wait(ibar + i % NST, (uint32_t)((i / NST) & 1));
            if (Wi.type != act_t) {
                if (Wi.type == GT_Q4_K) ln_act_q4k(Qx, 0, lane, A);
                else ln_act_q6k(Qx, 0, lane, A);
                ln_act_scale(A, rn);
                act_t = Wi.type;
            }
            float v = ln_dot_tile(Wi.type, sm + L.in.off_ring + (size_t)(i % NST) * L.in.stage, LG_IN_TR, pa.K, w, lane, A, Qx.xf);
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane < cl) sk_st_cluster(xb + xo + w, (unsigned)lane, v);
            if (i + NST < L.in.tpb) { /* the same in every thread */
                __syncthreads(); /* stage i % NST consumed */
                if (tid == 0) {
                    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                    in_issue(i + NST);
                }
            }
        }
        if (rank < 2 * ratio && w == 0) { /* the b / a row: warp 0 */
            const gmat &Wm = L.in.W[lg_in_mini_seg(rank, ratio)];
            mbar_wait(ibar + NST, 0u);
            float v;
            if (Wm.type == GT_BF16) v = ln_dot_bf16(sm + L.in.off_mini + 128 * lane, Qx.xf + 64 * lane);
            else {
                if (Wm.type != act_t) {
                    if (Wm.type == GT_Q4_K) ln_act_q4k(Qx, 0, lane, A);
                    else ln_act_q6k(Qx, 0, lane, A);
                    ln_act_scale(A, rn);
                }
                v = ln_dot_tile(Wm.type, sm + L.in.off_mini, 1, pa.K, 0, lane, A, Qx.xf);
            }
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (Wm.type == GT_BF16) v *= rn;
            if (lane < cl) sk_st_cluster(xb + lg_in_xb(0, ratio) + rank, (unsigned)lane, v);
        }
        /* this thread's remote stores are done (release); the wait (acquire: every block's values in
         * every exchange buffer) after the work below, which needs none of them */
        sk_cluster_arrive();
        if (!L.in.wpre) {
            __syncthreads(); /* every warp is done with the ring: the W / B slices take its place */
            issue_w();
            if (LG_BM) issue_b();
        }
#pragma unroll
        for (int t = 0; t < RPL; t++) s[t] = Sp[(size_t)t * LG_D]; /* in flight while the fold's term waits on its loads */
        if (LG_BM) fold_xold();
        if (ATOM && h == 0)
            for (int i = tid; i < R; i += LG_THREADS) xos[i] = L.xin[r0 + i];
        sk_cluster_wait();
        ln_trace(L.tr, 46);
    }
    if (!IN && !(L.pre & 1)) issue_w();
    if (!IN && LG_BM && !(L.pre & 8)) issue_b();
    if (!IN && !(L.pre & 2))
#pragma unroll
        for (int t = 0; t < RPL; t++) s[t] = Sp[(size_t)t * LG_D];
    /* The state barrier, only where the state is updated in place (LILAC_CUDA_GDN_DB=0; the default
     * double-buffered state, g.S2, reads one copy and writes the other, session 36): every thread of
     * the head's P blocks has its state values (release) before
     * any writes its columns back (the wait below, acquire). Without it a block that enters late
     * (PDL staggers the entries; session 35 saw it with -DLN_GEMV_TRIG=2 under PDL: a different
     * digest on every run) reads columns a sibling has already updated. Two forms: L.hc, an arrival
     * counter per head (lean_gdn takes it only where the whole grid fits on the device at once, so
     * the wait cannot deadlock: a block not yet resident finds room once the kernel before ends, and
     * the kernel after cannot start before every block here has passed its griddepcontrol.wait); or
     * the head's blocks as one cluster (resident together by construction), measured 11 % slower
     * on an H200 (627 vs 703 tok/s at 4K: the clusters' placement costs the overlap with the
     * in-projection), so only the fallback and the IN form's. The counter form's first version
     * (fence in every thread, the count after the wait, an acquire poll before the write-back) cost
     * 2.8 % on an H100 (624 vs 642): its round trips sat on the step's critical path. This one cost
     * 1.4 % on an H200 (694.7 vs 704.5 at 4K). A third (a relaxed add, only the writing warps waiting,
     * lane 0 polling, no block barrier) measured slower still: 687.7 vs 703.7 (session 35, call 5). */
    if (hcb && !(L.pre & 2)) {
        hc_target = lg_arrive_count(s, L.hc + h, P);
        if (tid == 0) hc_v = lg_count_peek(L.hc + h);
    } else if (!hcb && sbar) sk_cluster_arrive();
    /* the first group: the conv inputs (the W and B slices may still be in flight) */
    if (LG_BM) cp_async_wait<2>();
    else cp_async_wait<1>();
    __syncthreads();
    /* 3. the in-projection's outputs: conv + SiLU; part 0 keeps the raw inputs in the ring (q/k
     * channels only from the first v-head of their k-head, as k_gdn_step) */
    if (tid < 3 * LG_D) {
        int ch = chan(tid);
        float raw;
        if constexpr (IN) raw = xb[lg_in_xch(tid, jv)];
        else raw = g.qkv[ch];
        float4 cw = cws[tid];
        float acc = cw.w * raw;
        acc += cw.x * hs[0][tid];
        acc += cw.y * hs[1][tid];
        acc += cw.z * hs[2][tid];
        cv[tid] = silu_f(acc);
        bool own = part == 0 && (tid >= 2 * LG_D || h == (g.tiled ? kh : kh * ratio));
        if (own) g.ring[(size_t)slot * CD + ch] = raw;
    } else {
        if constexpr (IN) zs[tid - 3 * LG_D] = xb[lg_in_xz(tid - 3 * LG_D, jv, ratio)];
        else zs[tid - 3 * LG_D] = L.z[h * LG_D + tid - 3 * LG_D];
    }
    float bh, ah;
    if constexpr (IN) {
        bh = xb[lg_in_xb(jv, ratio)];
        ah = xb[lg_in_xa(jv, ratio)];
    } else {
        bh = g.b[h];
        ah = g.a[h];
    }
    float beta = sigmoid_f(bh);
    float alpha = expf(__ldg(g.ssm_a + h) * softplus_f(ah + __ldg(g.dt_bias + h)));
    __syncthreads();
    /* 4. the recurrence (the arithmetic of k_gdn_step, in its order) */
    float sq = 0.0f, sk = 0.0f;
#pragma unroll
    for (int i = 0; i < RPL / 8; i++) {
        float qv = cv[lane + 32 * i], kv = cv[LG_D + lane + 32 * i];
        sq += qv * qv;
        sk += kv * kv;
    }
    sq = warp_sum(sq);
    sk = warp_sum(sk);
    float rq = rsqrtf(sq + 1e-6f) * rsqrtf((float)LG_D), rk = rsqrtf(sk + 1e-6f);
    const float *qs = cv + rg * RPL, *ks = cv + LG_D + rg * RPL;
    float u0 = 0.0f, u1 = 0.0f;
#pragma unroll
    for (int i = 0; i < RPL; i += 2) {
        s[i] *= alpha; u0 = fmaf(s[i], ks[i] * rk, u0);
        s[i + 1] *= alpha; u1 = fmaf(s[i + 1], ks[i + 1] * rk, u1);
    }
    float u = u0 + u1;
    u += __shfl_xor_sync(0xffffffffu, u, 8);
    u += __shfl_xor_sync(0xffffffffu, u, 16);
    float delta = beta * (cv[2 * LG_D + j] - u);
    float o0 = 0.0f, o1 = 0.0f;
#pragma unroll
    for (int i = 0; i < RPL; i += 2) {
        s[i] = fmaf(ks[i] * rk, delta, s[i]); o0 = fmaf(s[i], qs[i] * rq, o0);
        s[i + 1] = fmaf(ks[i + 1] * rk, delta, s[i + 1]); o1 = fmaf(s[i + 1], qs[i + 1] * rq, o1);
    }
    float o = o0 + o1;
    o += __shfl_xor_sync(0xffffffffu, o, 8);
    o += __shfl_xor_sync(0xffffffffu, o, 16);
    if (rg == 0) os[j] = o;
    if (hcb) { /* every block of the head has read the old state (the count above) */
        if (tid == 0) lg_wait_count(L.hc + h, hc_v, hc_target);
        __syncthreads();
    } else if (sbar) sk_cluster_wait();
    if (w / (16 / P) == part) { /* this part's state columns */
        float *Sw = gdn_state_copy(g.S, g.S2, p + 1) + soff;
#pragma unroll
        for (int t = 0; t < RPL; t++) Sw[(size_t)t * LG_D] = s[t];
    }
    cp_async_wait<0>(); /* this thread's W copies; the barrier publishes everyone's */
    __syncthreads();
    ln_trace(L.tr, 3);
    /* 5. y = rmsnorm(o_h) * gain * silu(z_h) (the gated head norm of ln_prologue) quantized to q8 by
     * warp 0, a lane 4 elements */
    float *xf, *dx, *s16;
    int8_t *xq;
    qact_carve(sm + (size_t)R * 80 + (LG_BM ? (size_t)L.NLR * 2 * LG_D : 0), LG_D, &xf, &xq, &dx, &s16);
    if (w == 0) {
        int e = 4 * lane;
        float4 v = *(const float4 *)(os + e), gv = *(const float4 *)(gs + e), zv = *(const float4 *)(zs + e);
        float r = rsqrtf(warp_sum(v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w) / (float)LG_D + L.eps);
        v.x = v.x * r * gv.x * silu_f(zv.x);
        v.y = v.y * r * gv.y * silu_f(zv.y);
        v.z = v.z * r * gv.z * silu_f(zv.z);
        v.w = v.w * r * gv.w * silu_f(zv.w);
        ln_quant_store4(v, e, lane, xf, xq, dx, s16);
    }
    __syncthreads();
    qact Q = {xf, xq, dx, s16};
    ln_trace(L.tr, 4);
    /* 6. the head's share of rows r0 .. r0 + R: thread (row pair, chunk cc of the head's two), rows
     * i, i + 256, ... ; the superblock's chunk index is 2 * half + cc. Shares go to part[h][row];
     * the last of the HV blocks of this row part to arrive adds them to x in head order (so x is
     * the same bits on every run), or, without cnt, every block adds its share with an atomic. */
    int cc = tid & 1, H = L.W.rows;
#ifdef LN_ICTEST /* diagnostic (session 21): the fold's block twice (a loop: the same code), stamps 44 and 45
                  * (once in the atomic form: a second pass would add its shares twice) */
#pragma unroll 1
    for (int rep = 0; rep < (ATOM ? 1 : 2); rep++) {
#endif
    if (LG_BM) { /* the fold: B's head-h columns times y_h (fp32) join the x_old term, reduced over
                 * the row's tpr threads; the share goes after the x rows */
        int lr = tid / L.tpr, c8 = tid % L.tpr;
#pragma unroll
        for (int q = 0; q < 2; q++) {
            int row = lr + q * (LG_THREADS / L.tpr);
            float t = c8 == 0 && row < L.NLR ? la[row] : 0.0f;
            if (row < L.NLR)
                for (int ch = c8; ch < 16; ch += L.tpr) {
                    float4 y0 = *(const float4 *)(xf + 8 * ch), y1 = *(const float4 *)(xf + 8 * ch + 4);
                    float yv[8] = {y0.x, y0.y, y0.z, y0.w, y1.x, y1.y, y1.z, y1.w};
                    t = bf16x8_fma(*(const uint4 *)(tb + (size_t)row * 2 * LG_D + 16 * ch), yv, t);
                }
            for (int o = 1; o < L.tpr; o <<= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
            if constexpr (ATOM) {
                if (c8 == 0 && row < L.NLR && part * L.NLR + row < L.NL) atomicAdd(L.lraw + part * L.NLR + row, t);
            } else if (c8 == 0 && row < L.NLR) __stcg(L.part + LG_PIDX(H + part * L.NLR + row, h), t);
        }
    }
#ifdef LN_ICTEST
    ln_trace(L.tr, 44 + rep);
    __syncthreads();
    }
#endif
    ln_trace(L.tr, 41); /* the fold's logit shares stored */
    ln_act A;
    ln_act_q4k(Q, 0, cc, A);
    for (int row = tid >> 1; row < R; row += LG_THREADS / 2) {
        float v = ln_dot_q4k(tq + (size_t)row * 64 + 32 * cc, tm + (size_t)row * 16, 2 * half + cc, A);
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        if constexpr (ATOM == 2) { /* lanes 0, 2, 4, 6 of each group of 8 hold rows row .. row + 3 (row % 4 == 0 there) */
            if (h == 0 && cc == 0) v += xos[row];
            float v1 = __shfl_down_sync(0xffffffffu, v, 2), v2 = __shfl_down_sync(0xffffffffu, v, 4), v3 = __shfl_down_sync(0xffffffffu, v, 6);
            if ((tid & 7) == 0)
                asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(L.x + r0 + row), "f"(v), "f"(v1), "f"(v2), "f"(v3) : "memory");
            continue;
        }
        if (cc == 0) {
            if constexpr (ATOM) atomicAdd(L.x + r0 + row, h == 0 ? v + xos[row] : v);
            else if (L.cnt) __stcg(L.part + LG_PIDX(r0 + row, h), v);
            else atomicAdd(L.x + r0 + row, v);
        }
    }
    ln_trace(L.tr, 42); /* the out-projection's shares stored */
    if (!ATOM && L.cnt) {
        __shared__ int last;
        __threadfence();
        __syncthreads();
        /* arrivals count up forever: the last of each group of HV sees a multiple of HV (2^32 % HV
         * == 0 for the power-of-two head counts the host allows, so the wrap is harmless) */
        if (tid == 0) last = (atomicAdd(L.cnt + part, 1u) + 1u) % (unsigned)g.HV == 0u;
        __syncthreads();
        ln_trace(L.tr, 43); /* arrival counted */
        if (last) {
            __threadfence();
            if (!FOLD) { /* (the session-8 loop: measured as fast as one batch of loads here) */
                for (int row = tid; row < R; row += LG_THREADS) {
                    float t = 0.0f;
                    for (int hh = 0; hh < g.HV; hh++) t += __ldcg(L.part + (size_t)hh * H + r0 + row);
                    L.x[r0 + row] += t;
                }
            } else {
            /* the fold's logit rows of this part first: 4 threads a row, each summing a quarter of
             * the heads (8) in order, then the quarters pairwise (fixed orders: the same bits on
             * every run). Then thread tid: x row r0 + tid (R <= 512), its 32 heads' shares loaded
             * before the first add (one L2 round trip; the sum in head order). Session 9's version
             * summed the logit quarter before loading the x row (two round trips: loading both
             * spilled there); with the loads hoisted as below, 64 registers hold both. */
            float lt = 0.0f;
            int lrow = tid >> 2, q4 = tid & 3;
            bool lon = LG_BM && lrow < L.NLR;
            /* session 10: every load of the tail issued before any sum, one L2 round trip instead of
             * two (the tail 3.7 -> 2.2 µs, +5 tok/s: bench/results/2026-12-01-h200-s10 call 12); the
             * same sums in the same order. The general loop below for other head counts and parts. */
            if (g.HV == 32 && R == LG_THREADS) {
                float vl[8], v[32];
                const float *pp = L.part + LG_PIDX(H + part * L.NLR + (lon ? lrow : 0), 8 * q4);
#pragma unroll
                for (int u = 0; u < 8; u++) vl[u] = lon ? __ldcg(pp + (size_t)u * L.ps) : 0.0f;
#pragma unroll
                for (int u = 0; u < 32; u++) v[u] = __ldcg(L.part + LG_PIDX(r0 + tid, u));
                float xo = L.xin[r0 + tid], t = 0.0f;
#pragma unroll
                for (int u = 0; u < 8; u++) lt += vl[u];
#pragma unroll
                for (int u = 0; u < 32; u++) t += v[u];
                L.x[r0 + tid] = xo + t;
            } else {
            if (lon) {
                float v[8];
                const float *pp = L.part + LG_PIDX(H + part * L.NLR + lrow, 8 * q4);
#pragma unroll
                for (int u = 0; u < 8; u++) v[u] = __ldcg(pp + (size_t)u * L.ps);
#pragma unroll
                for (int u = 0; u < 8; u++) lt += v[u];
            }
            for (int row = tid; row < R; row += LG_THREADS) {
                float t = 0.0f;
                for (int h0 = 0; h0 < g.HV; h0 += 32) {
                    float v[32];
#pragma unroll
                    for (int u = 0; u < 32; u++) v[u] = h0 + u < g.HV ? __ldcg(L.part + LG_PIDX(r0 + row, h0 + u)) : 0.0f;
#pragma unroll
                    for (int u = 0; u < 32; u++) t += v[u];
                }
                L.x[r0 + row] = L.xin[r0 + row] + t;
            }
            }
            if (LG_BM) {
                lt += __shfl_xor_sync(0xffffffffu, lt, 1);
                lt += __shfl_xor_sync(0xffffffffu, lt, 2);
                int i = part * L.NLR + lrow;
                if (lon && q4 == 0 && i < L.NL) L.lraw[i] = lt;
            }
            }
        }
    }
    ln_trace(L.tr, 2);
}

#endif
