/*
 * k_lmoe_sk.cuh — a decode step's MoE (gate/up + SwiGLU, down + weighted combine + residual add) as
 * ONE kernel, split by K through thread-block clusters (session 26; opt-in LILAC_CUDA_MOE_SK=1;
 * written without a GPU: not yet run).
 *
 * Why: in session 24's in-graph trace every MoE layer pays, after gate/up's last tile, the MoE down's
 * boundary (~1 µs) and its post-wait chain (~4.3 µs: h from L2, its q8 prologue, the dots, the
 * ordered sum and the residual store), 40 times a token: ~200 µs of the 1.56 ms step, more than the
 * ~135 µs that separate us from 700 tok/s. The down's weights can be known as early as gate/up's
 * (the top-k), so nothing but the split of the work forces the boundary.
 *
 * How: a cluster of SK_CL (8) blocks owns a "unit": UH = SK_CL x TH rows of h of one expert (TH =
 * LN_THREADS / (H / 64) gate/up rows per block, k_lmoe_gu's tile; UH = 128 at H = 2048), i.e. UH
 * columns of that expert's down matrix. Block j of the cluster
 *   1. computes its TH rows of h exactly as k_lmoe_gu does (the same ring of gate/up tiles);
 *   2. stores them into every block of the cluster (distributed shared memory) and meets the
 *      cluster barrier: each block now holds the unit's UH values of h;
 *   3. quantizes them to q8 (the groups of 32 and the bits of k_lmoe_down's prologue);
 *   4. dots them with rows [j H / SK_CL, (j + 1) H / SK_CL) of the down matrix restricted to the
 *      unit's UH columns (a thread per (row, 64-column chunk), the same ln_dot_q4k / ln_dot_q6k), and
 *      adds routing weight x partial into the residual with fp32 reductions (red.global.add).
 * The down slice of a row is one contiguous run per plane of the device layout (UH = 128: half of
 * a 256-column block; Q4_K 64 qs bytes + the block's 16 meta bytes, 80 B for 72 B of weights;
 * Q6_K 64 ql + 32 qh + 8 scale bytes + the 4-byte word holding d, 108 B for 105), so no repacked
 * layout is needed; the slices come by cp.async (16 / 8 / 4-byte copies, every thread), requested
 * with the gate/up tiles of the same unit (shared-expert units before griddepcontrol.wait).
 *
 * Order: the residual x is also this kernel's input (the ffn RMSNorm in every block's prologue), so a
 * block adds into x only after every block of the grid is past its prologue: a grid-wide counter
 * (never reset; a launch's G increments make one epoch), polled once before the first reduction,
 * normally long satisfied by then. The sums' order varies from run to run (as GDN_ATOM's and the
 * prefill MoE down's do), so --deterministic keeps the two ordered kernels.
 *
 * grid = clusters x SK_CL blocks of LN_THREADS (clusters: as many as fit at once, lean_init), dynamic
 * smem nst * stage + nsd * dslice + qact_smem_bytes(H) + qact_smem_bytes(UH). Shapes: those of
 * k_lmoe_gu, UH in {128, 256}, FF and FS multiples of UH, down Q4_K or Q6_K (lean_moe_sk checks).
 */
#ifndef LILAC_K_LMOE_SK_CUH
#define LILAC_K_LMOE_SK_CUH

#define SK_CL 8       /* blocks per cluster (the portable maximum) */
#define SK_MAX_UH 256 /* h rows of a unit at most */
#define SK_MAX_SD 4   /* down slice buffers at most */
#ifndef SK_V4
#define SK_V4 0       /* 1: the residual rows four per red.global.add.v4.f32 (an experiment, -DSK_V4=1) */
#endif

/* ---- cluster primitives (sm_90; the compute_80 PTX traps) */
__device__ __forceinline__ unsigned sk_cluster_rank() {
    unsigned r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
    return r;
}
__device__ __forceinline__ unsigned sk_cluster_id() {
    unsigned r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
#endif
    return r;
}
__device__ __forceinline__ unsigned sk_cluster_count() {
    unsigned r = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
#endif
    return r;
}
/* *p (a shared-memory address of this block) in block `rank` of the cluster = v */
__device__ __forceinline__ void sk_st_cluster(float *p, unsigned rank, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(smem_u32(p)), "r"(rank));
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(ra), "f"(v) : "memory");
#else
    __trap();
#endif
}
/* *p (a shared-memory address of this block) read in block `rank` of the cluster (k_lattn_out's CL form) */
__device__ __forceinline__ float4 sk_ld_cluster4(const float *p, unsigned rank) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(smem_u32(p)), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(ra) : "memory");
#else
    __trap();
#endif
    return v;
}
/* the cluster barrier in two halves: arrive (release: this thread's stores, remote ones included,
 * become visible to the cluster) and wait (acquire); every thread of every block takes both */
__device__ __forceinline__ void sk_cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void sk_cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
/* 8- and 4-byte asynchronous copies (cp.async.ca: the only form below 16 bytes) */
__device__ __forceinline__ void sk_cp8(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void sk_cp4(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
/* until at most n (0 .. 3) of this thread's committed groups are in flight */
__device__ __forceinline__ void sk_cp_wait(int n) {
    if (n <= 0) cp_async_wait<0>();
    else if (n == 1) cp_async_wait<1>();
    else if (n == 2) cp_async_wait<2>();
    else cp_async_wait<3>();
}

/* ---- a unit's down slice: UH columns [f0, f0 + UH) of R rows of a down matrix (FF = 256 nbd
 * columns), UH = 128 (half of a 256-column block: f0 % 256 is 0 or 128) or 256 (f0 % 256 == 0).
 * Buffer layout (planes of R rows each):
 *   Q4_K [R][UH/2 qs][R][16 meta]
 *   Q6_K [R][UH/2 ql][R][UH/4 qh][R][UH/16 scales][R][4: the aligned word that holds d]
 * These helpers are the whole of the slice's addressing (the kernel and tests/cuda_host use them). */
__host__ __device__ static inline int sk_slice_row_bytes(int WT, int UH) {
    return WT == GT_Q4_K ? UH / 2 + 16 : UH / 2 + UH / 4 + UH / 16 + 4;
}
/* pieces per row: Q4_K UH/32 x 16 qs bytes + the meta; Q6_K UH/32 x 16 ql + UH/64 x 16 qh + the
 * scales (8 or 16 bytes) + the d word (4) */
__host__ __device__ static inline int sk_slice_pieces(int WT, int UH) { return WT == GT_Q4_K ? UH / 32 + 1 : UH / 32 + UH / 64 + 2; }
struct sk_piece {
    int plane;     /* 0 gmat.q, 1 gmat.qh, 2 gmat.sc, 3 gmat.d (as bytes) */
    int bytes;     /* 16, 8 or 4 */
    size_t src;    /* byte offset in that plane */
    unsigned dst;  /* byte offset in the slice buffer */
};
/* Piece p of buffer row r (matrix row g0 + r). */
__host__ __device__ static inline sk_piece sk_slice_piece(int WT, int UH, int R, int nbd, long g0, int f0, int r, int p) {
    size_t blk = (size_t)(g0 + r) * nbd + (f0 >> 8);
    int half = UH == 128 ? (f0 >> 7) & 1 : 0, ql16 = UH / 32;
    sk_piece pc;
    if (p < ql16) { /* qs / ql: the unit's 64 or 128 bytes of the block's 128 */
        pc.plane = 0; pc.bytes = 16; pc.src = blk * 128 + 64 * half + 16 * p; pc.dst = (unsigned)(r * (UH / 2) + 16 * p);
    } else if (WT == GT_Q4_K) { /* the block's meta: d, dmin, the 12 scale bytes */
        pc.plane = 2; pc.bytes = 16; pc.src = blk * 16; pc.dst = (unsigned)(R * (UH / 2) + r * 16);
    } else if (p < ql16 + UH / 64) { /* qh: the half's 32 bytes of the block's 64, or all */
        int q = p - ql16;
        pc.plane = 1; pc.bytes = 16; pc.src = blk * 64 + 32 * half + 16 * q; pc.dst = (unsigned)(R * (UH / 2) + r * (UH / 4) + 16 * q);
    } else if (p == ql16 + UH / 64) { /* the scales: the half's 8 of the block's 16, or all */
        pc.plane = 2; pc.bytes = UH / 16; pc.src = blk * 16 + 8 * half; pc.dst = (unsigned)(R * (UH / 2 + UH / 4) + r * (UH / 16));
    } else { /* the 4-byte aligned word that holds the block's fp16 d */
        pc.plane = 3; pc.bytes = 4; pc.src = (blk * 2) & ~(size_t)3; pc.dst = (unsigned)(R * (UH / 2 + UH / 4 + UH / 16) + r * 4);
    }
    return pc;
}
/* Where chunk dc (64 columns: [f0 + 64 dc, +64) for Q4_K; for Q6_K the chunk's two 32-column
 * groups, see k_lean.cuh) of buffer row dr sits: q the 32 qs / ql bytes; m the Q4_K meta or the Q6_K
 * 32 qh bytes of its half; sc the Q6_K half's 8 scales; d the d word, dh which half of it is d; j
 * the chunk's index in its block (ln_dot_q4k's j; Q6_K: j & 1 is ln_dot_q6k's s). */
struct sk_chunk {
    unsigned q, m, sc, d;
    int j, dh;
};
__host__ __device__ static inline sk_chunk sk_slice_chunk(int WT, int UH, int R, int nbd, long g0, int f0, int dr, int dc) {
    sk_chunk ch;
    ch.j = ((f0 & 255) >> 6) + dc;
    ch.q = (unsigned)(dr * (UH / 2) + 32 * dc);
    if (WT == GT_Q4_K) {
        ch.m = (unsigned)(R * (UH / 2) + dr * 16);
        ch.sc = ch.d = 0;
        ch.dh = 0;
    } else {
        int n = (ch.j >> 1) & 1, n0 = UH == 128 ? n : 0; /* the chunk's half of the block; the slice's first */
        ch.m = (unsigned)(R * (UH / 2) + dr * (UH / 4) + 32 * (n - n0));
        ch.sc = (unsigned)(R * (UH / 2 + UH / 4) + dr * (UH / 16) + 8 * (n - n0));
        ch.d = (unsigned)(R * (UH / 2 + UH / 4 + UH / 16) + dr * 4);
        ch.dh = (int)((((size_t)(g0 + dr) * nbd + (f0 >> 8))) & 1);
    }
    return ch;
}

struct lmoe_sk_args {
    moe_args m;
    int nst;      /* gate/up ring stages */
    int stage;    /* bytes per gate/up stage: 2 * TH * H/256 * 144 */
    int nsd;      /* down slice buffers */
    int dslice;   /* bytes per slice buffer: (H / SK_CL) * sk_slice_row_bytes */
    unsigned long long *ctr; /* blocks past their prologue, all launches (device, zero at load) */
    unsigned long long *tr;
    /* the next layer's input projection into L2 (the bytes k_lmoe_down's PFNEXT asked for; each block
     * its 1/G share, at the routed requests); pfn 0: none */
    const unsigned char *pfp[8];
    unsigned long long pfb[8];
    int pfn;
};

/* RAW: the router is folded into the kernel before (k_lgdn): the logits are raw (no 1/rms) and x is
 * that kernel's output, so the prologue comes after the wait (k_lmoe_gu's RAW form). */
/* SK_REGS: a register cap other than the launch bounds' 64 (at 64, 16-52 bytes of spills; the full
 * shared-memory plan leaves no room beside the block anyway, so more registers cost no co-residence) */
template <int WT, bool RAW>
#ifdef SK_REGS
__global__ void __maxnreg__(SK_REGS) k_lmoe_sk(const __grid_constant__ lmoe_sk_args L) {
#else
__global__ void __launch_bounds__(LN_THREADS, 2) k_lmoe_sk(const __grid_constant__ lmoe_sk_args L) {
#endif
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t bar[LN_MAX_ST];
    __shared__ float red[32];
    __shared__ int ids[QK_MAX_TOPK];
    __shared__ float wts[QK_MAX_TOPK + 1];
    __shared__ __align__(16) float hx[2][SK_MAX_UH]; /* the unit's h, written by the cluster's blocks */
    const moe_args &a = L.m;
    ln_trace(L.tr, 0);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, NST = L.nst, NSD = L.nsd;
    const int C = a.H >> 6, TH = LN_THREADS / C, nb = a.H >> 8, UH = SK_CL * TH, NCH = UH >> 6;
    const int R = a.H / SK_CL, nbd = a.FF >> 8; /* down rows per block; 256-column blocks per down row */
    /* this thread's row of a slice and its first piece (R | LN_THREADS: no division per copy) */
    const int SP = sk_slice_pieces(WT, UH), sr = tid % R, sp0 = tid / R;
    const unsigned rank = sk_cluster_rank();
    const int cid = (int)sk_cluster_id(), NC = (int)sk_cluster_count();
    const int nsu = a.FS / UH, upe = a.FF / UH, U = nsu + a.k * upe;
    const int mine = U > cid ? (U - 1 - cid) / NC + 1 : 0; /* units of this cluster: cid, cid + NC, ... */
    const size_t mat = (size_t)TH * nb * 144;              /* gate rows, then up rows */
    unsigned char *slices = sm + (size_t)NST * L.stage;
    unsigned char *qxb = slices + (size_t)NSD * L.dslice;  /* the block's q8 of x̂ (the prologue) */
    unsigned char *qub = qxb + ((qact_smem_bytes(a.H) + 15) & ~(size_t)15); /* q8 of the unit's h */
    /* unit i of this cluster: shared expert (slot k) or routed slot sl, and its first h row in FF */
    auto unit = [&](int i, int *sl, int *f0) {
        int u = cid + i * NC;
        if (u < nsu) { *sl = a.k; *f0 = u * UH; }
        else { u -= nsu; *sl = u / upe; *f0 = (u % upe) * UH; }
    };
    auto issue = [&](int i) { /* gate/up stage i (thread 0) */
        int sl, f0;
        unit(i, &sl, &f0);
        const gmat *g = sl == a.k ? &a.sgate : &a.gate, *u = sl == a.k ? &a.sup : &a.up;
        long r0 = (sl == a.k ? 0L : (long)ids[sl] * a.FF) + f0 + (long)rank * TH;
        unsigned char *dst = sm + (size_t)(i % NST) * L.stage;
        uint64_t *b = &bar[i % NST];
        mbar_expect_tx(b, (uint32_t)(2 * mat));
        ln_copy_rows(*g, r0, TH, TH, dst, b, false);
        ln_copy_rows(*u, r0, TH, TH, dst + mat, b, false);
    };
    auto issue_slice = [&](int i) { /* down slice of unit i (every thread; one commit group) */
        int sl, f0;
        unit(i, &sl, &f0);
        const gmat &W = sl == a.k ? a.sdown : a.down;
        long g0 = (sl == a.k ? 0L : (long)ids[sl] * a.H) + (long)rank * R; /* first row of W */
        unsigned char *dst = slices + (size_t)(i % NSD) * L.dslice;
        for (int p = sp0; p < SP; p += LN_THREADS / R) { /* row sr: pieces sp0, sp0 + 512 / R, ... */
            sk_piece pc = sk_slice_piece(WT, UH, R, nbd, g0, f0, sr, p);
            const unsigned char *src = (pc.plane == 0 ? W.q : pc.plane == 1 ? W.qh : pc.plane == 2 ? W.sc : (const unsigned char *)W.d) + pc.src;
            if (pc.bytes == 16) cp_async16(dst + pc.dst, src, 16);
            else if (pc.bytes == 8) sk_cp8(dst + pc.dst, src);
            else sk_cp4(dst + pc.dst, src);
        }
        cp_async_commit();
    };

    /* ---- before the wait: the shared expert's tiles and slices (weights only) */
    int pre = 0, nsl = 0; /* gate/up stages requested before the wait; slices requested so far (uniform) */
    auto shared_unit = [&](int i) { return cid + i * NC < nsu; };
    if (tid == 0) {
        mbar_ring_init(bar, NST);
        while (pre < NST && pre < mine && shared_unit(pre)) issue(pre++);
    }
    pre = 0;
    while (pre < NST && pre < mine && shared_unit(pre)) pre++;
    while (nsl < NSD && nsl < mine && shared_unit(nsl)) issue_slice(nsl++);
    if (mine > 0) sk_cluster_arrive(); /* every block of the cluster started (before any remote store) */
    float lsh = 0.0f, rn;
    gemv_args pa = {};
    pa.pro = PRO_RMSNORM; pa.x = a.x; pa.K = a.H; pa.g = a.g; pa.eps = a.eps;
    qact Q;
    int rr = tid / C, c = tid % C;
    if (!RAW) {
        rn = ln_prologue(pa, qxb, red, &Q); /* x is final: two kernels back */
        pdl_wait();
        pdl_trigger();
        ln_trace(L.tr, 1);
        if (warp == 0) {
            ln_topk(a.logits, a.E, a.k, ids, wts);
            if (tid == 0) wts[a.k] = a.FS ? sigmoid_f(a.logits[a.E]) : 0.0f;
            ln_trace(L.tr, 44);
        }
        __syncthreads();
        ln_trace(L.tr, 3);
        if (tid == 0)
            for (int i = pre; i < NST && i < mine; i++) issue(i);
        if (tid == 0 && L.pfn) ln_prefetch_share(L.pfp, L.pfb, L.pfn, blockIdx.x, gridDim.x);
    } else {
        /* warp 0: the top-k and the first routed stage; the other warps: the prologue (k_lmoe_gu) */
        __syncthreads(); /* the ring's barriers initialised */
        pdl_wait();
        pdl_trigger();
        ln_trace(L.tr, 1);
        if (warp == 0) {
            if (tid == 0 && a.FS) lsh = a.logits[a.E];
            ln_topk<false, false>(a.logits, a.E, a.k, ids, wts);
            ln_trace(L.tr, 44);
            if (tid == 0 && pre < NST && pre < mine) issue(pre);
        }
        rn = ln_prologue<false, 1>(pa, qxb, red, &Q);
        if (tid == 0)
            for (int i = pre + 1; i < NST && i < mine; i++) issue(i);
        /* the next layer's input projection into L2, ~1 µs after the wait (where k_lmoe_down's entry
         * asked for it: session 24 measured later as worse), before this thread's slice copies */
        if (tid == 0 && L.pfn) ln_prefetch_share(L.pfp, L.pfb, L.pfn, blockIdx.x, gridDim.x);
        ln_trace(L.tr, 3);
        if (tid == 0) { /* the logits are W_r x̂ * rms: the weights need rn */
            ln_softmax_k(wts, a.k, rn);
            wts[a.k] = a.FS ? sigmoid_f(lsh * rn) : 0.0f;
        }
    }
    /* the routed slices (ids[] published by the prologue's barrier) */
    while (nsl < NSD && nsl < mine) issue_slice(nsl++);
    /* this block is done reading x: count it (release: the fence orders every thread's prologue
     * loads, which the prologue's barrier completed, before the increment) */
    unsigned long long tgt = 0;
    if (tid == 0) {
        __threadfence();
        unsigned long long old = atomicAdd(L.ctr, 1ull), G = gridDim.x;
        tgt = (old / G + 1) * G;
    }
    __syncthreads(); /* wts final (RAW: thread 0 above) */
    if (blockIdx.x == 0 && tid < a.k) {
        if (a.ids_out) a.ids_out[tid] = ids[tid];
        if (a.w_out) a.w_out[tid] = wts[tid];
    }
    if (mine > 0) sk_cluster_wait();

    /* down: thread (row dr, chunk dc) of the block's R rows x the unit's NCH 64-column chunks */
    const int dr = tid / NCH, dc = tid % NCH;
    qact QU;
    {
        float *xf, *dx, *s16;
        int8_t *xq;
        qact_carve(qub, UH, &xf, &xq, &dx, &s16);
        QU = qact{xf, xq, dx, s16};
    }
    for (int i = 0; i < mine; i++) {
        int sl, f0;
        unit(i, &sl, &f0);
        mbar_wait(&bar[i % NST], (uint32_t)((i / NST) & 1));
        if (i == 0) ln_trace(L.tr, 4);
        if (i == mine - 1) ln_trace(L.tr, 6);
        const unsigned char *base = sm + (size_t)(i % NST) * L.stage;
        ln_act A; /* this thread's slice of x̂, reloaded from shared memory per unit (k_lmoe_gu keeps it in
                   * registers: here the down's own slice would make both spill) */
        ln_act_q4k(Q, 0, c, A);
        ln_act_scale(A, rn);
        float vg = ln_dot_tile(GT_Q4_K, base, TH, a.H, rr, c, A, NULL);
        float vu = ln_dot_tile(GT_Q4_K, base + mat, TH, a.H, rr, c, A, NULL);
        for (int o = (C < 32 ? C : 32) >> 1; o > 0; o >>= 1) { /* every lane of the row's C gets the sums */
            vg += __shfl_xor_sync(0xffffffffu, vg, o);
            vu += __shfl_xor_sync(0xffffffffu, vu, o);
        }
        /* h row rr of this block's TH into every block of the cluster: lane c of the row's C to rank c */
        if (c < SK_CL) sk_st_cluster(&hx[i & 1][rank * TH + rr], (unsigned)c, silu_f(vg) * vu);
        sk_cluster_arrive();
        if (i + NST < mine) { /* the same in every thread */
            __syncthreads(); /* stage i % NST consumed */
            if (tid == 0) {
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                issue(i + NST);
            }
        }
        sk_cluster_wait(); /* hx[i & 1] holds the unit's UH values of h */
        if (warp < UH / 128) {
            float4 v = *(const float4 *)&hx[i & 1][128 * warp + 4 * lane];
            ln_quant_store4(v, 128 * warp + 4 * lane, lane, (float *)QU.xf, (int8_t *)QU.xq, (float *)QU.dx, (float *)QU.s16);
        }
        sk_cp_wait(nsl - i - 1); /* slice i landed (this thread's copies); later ones may fly */
        if (i == 0 && tid == 0) { /* every block past its prologue: x may change now */
            /* bounded: a block that never counts (a bug) fails the launch instead of hanging it */
            for (unsigned spins = 0; *(volatile unsigned long long *)L.ctr < tgt; spins++) {
                if (spins > (1u << 24)) __trap();
                __nanosleep(64);
            }
            __threadfence();
        }
        __syncthreads(); /* the q8 of h, every thread's slice copies, the counter */
        ln_act AD;
        if (WT == GT_Q4_K) ln_act_q4k(QU, 0, dc, AD);
        else ln_act_q6k(QU, 0, dc, AD);
        const unsigned char *sb = slices + (size_t)(i % NSD) * L.dslice;
        long g0 = (sl == a.k ? 0L : (long)ids[sl] * a.H) + (long)rank * R;
        sk_chunk ch = sk_slice_chunk(WT, UH, R, nbd, g0, f0, dr, dc);
        float v;
        if (WT == GT_Q4_K) v = ln_dot_q4k(sb + ch.q, sb + ch.m, ch.j & 3, AD);
        else v = ln_dot_q6k(sb + ch.q, sb + ch.m, (const int8_t *)(sb + ch.sc), __half2float(((const __half *)(sb + ch.d))[ch.dh]), ch.j & 1, AD);
        for (int o = NCH >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        v *= wts[sl];
#if SK_V4 /* four consecutive rows per reduction (red.global.add.v4.f32, as GDN_ATOM=2): the row
           * dr + q sits NCH q lanes up; a quarter of the operations */
        float v1 = __shfl_down_sync(0xffffffffu, v, NCH), v2 = __shfl_down_sync(0xffffffffu, v, 2 * NCH),
              v3 = __shfl_down_sync(0xffffffffu, v, 3 * NCH);
        if (dc == 0 && (dr & 3) == 0)
            asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(a.out + (long)rank * R + dr), "f"(v), "f"(v1), "f"(v2), "f"(v3)
                         : "memory");
#else
        if (dc == 0) atomicAdd(a.out + (long)rank * R + dr, v);
#endif
        if (i + 1 < mine) {
            __syncthreads(); /* the slice buffer and the q8 of h are free */
            if (nsl < mine) issue_slice(nsl++);
        }
    }
    ln_trace(L.tr, 2);
}

#endif
