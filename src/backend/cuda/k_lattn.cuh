/*
 * k_lattn.cuh — decode: the attention layer's split combine and out-projection (with the MoE router
 * folded in) as ONE launch split by head, adding into zeroed buffers by fp32 atomics
 * (LILAC_CUDA_ATT_COUT=1; session 28, written without a device, not yet measured).
 *
 * Why: after flash decoding (k_attn_decode_fd) an attention layer runs the combine (k_attn_combine)
 * and the out-projection (k_lgemv_fb<2>, the router's raw logits folded in). Session 27's trace at
 * 4K (GDN_ATOM=1): flash decoding done -> combine done ~3 µs, then the out-projection's wait returns
 * 2.2 µs later (its blocks enter only as flash decoding's leave: registers), its prologue takes 3.2
 * and its tiles 4: ~12 µs per layer, x 10 layers. A GDN layer does the same work (step, gated norm,
 * out-projection, fold) in one launch (k_lgdn<true, 1>) of ~5 µs after its wait. This kernel is that
 * shape for attention:
 *
 *   grid NH x P blocks (P = H / R row parts), 512 threads; block (head h, part p):
 *   before the wait: zero the residual and logit buffers of the NEXT layer in the chain of atomic
 *     forms (zx, zl: a GDN layer's under GDN_ATOM or an attention layer's; dead until that layer's
 *     launch, so the zeros are one layer ahead, as k_lgdn's atomic form does); request by
 *     cp.async W_o's rows r0 .. r0 + R of super-block h (head h's 256 columns are exactly one Q4_K
 *     super-block per row: 128 B of quants + 16 B of scales, no partial blocks) and B's head-h columns
 *     of the part's NLR logit rows (B = W_r diag(g) W_o, precomputed at load); the x_old term of those
 *     logit rows over head h's H / NH columns of x_old (la[]); head 0's blocks keep x_old of their
 *     rows (xos[]); warps 0-1 read the output gate sigmoid(gate) of their 4 dims (the q/gate
 *     projection is two kernels back, complete before this grid starts: flash decoding triggers
 *     after its own wait, as k_attn_combine relies on).
 *   after the wait: head h's merge of the ns partials (one L2 round trip: each thread loads LA_CB
 *     float4 partials, 64 dim quads x 8 split groups; warp 0 turns the (max, sum) pairs into the
 *     splits' weights meanwhile), y = merged * gate quantized to q8 exactly as the out-projection's
 *     plain prologue quantizes those 256 dims (ln_quant_store4: the same codes and scales), then
 *     logit rows: la + B_h y (fp32 y) by atomicAdd into lraw (16 heads' shares per row), and W_o's
 *     rows: W_h y (Q4_K x q8 chunk dots, ln_dot_q4k) + x_old (head 0) by atomicAdd into x.
 *
 * The sums' order varies from run to run (atomics), as with GDN_ATOM: never in a deterministic run.
 * Estimated (paper): ~9 µs less per attention layer if the blocks enter beside flash decoding,
 * which needs FD_MINB_MMA=2 (flash decoding at 128 registers: 256 x 128 + 512 x 64 = 64K) — else
 * they enter as flash decoding leaves, like the combine today, and only the out-projection's
 * boundary and prologue go.
 */
#ifndef LILAC_K_LATTN_CUH
#define LILAC_K_LATTN_CUH

#include "k_lean.cuh"
#include "k_lmoe_sk.cuh" /* the cluster primitives (the CL form) */

#define LA_HD 256      /* head dim the kernel is built for (one Q4_K super-block of W_o per row and head) */
#define LA_THREADS 512
#define LA_GROUPS 8    /* split groups of the merge (x 64 quads of 4 dims = 512 threads) */
#ifndef LA_CB
#define LA_CB 9        /* partials a thread loads at once: 72 splits in one round trip (66 + 1 on the H200) */
#endif
#define LA_MAXS 1024   /* splits at most (the weights' shared array) */
#define LA_MAXR 512    /* rows per block at most */
#define LA_MAXNLR 96   /* logit rows per part at most */
#ifndef LA_DIAG_PART
#define LA_DIAG_PART 0 /* 1: a diagnostic build (results wrong, timing only; session 32) whose blocks merge only
                        * 1/P of their head's splits: the ceiling of a merge that splits the partials'
                        * loads over the head's P blocks (each block now loads all of them: ~67 KB at 4K) */
#endif
#ifndef LA_EARLY
#define LA_EARLY 1     /* 0: a diagnostic build (dev/lean_variant.sh lane -DLA_EARLY=0) that waits first and
                        * issues nothing before the wait, to see whether the pre-wait requests delay the
                        * wait's release (session 32) */
#endif

struct lattn_args {
    const float *part_o;  /* [splits][NH][LA_HD] flash decoding's unnormalised partials */
    const float *part_ml; /* [splits][NH][2] their running maximum and sum */
    const float *qg;      /* [NH][2 LA_HD] q, then the output gate's pre-activation */
    const int *pos;       /* the current position: n = *pos + 1 keys */
    int nsplit, minpos, xs; /* the partials: attn_fd_used(nsplit, minpos, n) + xs of them */
    int NH;
    gmat W;               /* W_o [H][NH * LA_HD], Q4_K */
    int R;                /* rows per block (H = P R) */
    const float *xin;     /* [H] x_old, the layer's input residual (not written here) */
    float *x;             /* [H] zeros at entry; ends as x_old + W_o y */
    /* the router fold: lraw [NL] zeros at entry, ends as W_r diag(gf) x (raw logits, no 1/rms) */
    const __nv_bfloat16 *Bm; /* [NL][NH * LA_HD] */
    const __nv_bfloat16 *Wr; /* [E][H] router rows */
    const __nv_bfloat16 *Ws; /* [1][H] shared-expert gate row, NULL when NL == E */
    const float *gf;      /* [H] ffn norm gain */
    int E, NL, NLR;       /* router rows, logit rows, logit rows per part */
    int tpr;              /* threads per logit row of the x_old term: H / NH / 8 (a power of two <= 32) */
    float *lraw;
    float *zx, *zl;       /* [H], [NL]: the next chain layer's x and lraw (GDN or attention), zeroed here */
    unsigned long long *tr;
    /* PK: the static slices of every block packed at load (k_lattn_pack): block b's lattn_pk_bytes at
     * pk + b * lattn_pk_bytes, exactly the shared-memory image of tq | tm | tb | twr */
    const unsigned char *pk;
};

/* The CL form's share of the merge: block `part` of a head's P takes splits lattn_cl_split(part, P, j)
 * for j < lattn_cl_count(ns, part, P): every split of [0, ns) exactly once over the P blocks
 * (tests/cuda_host/test_lattn_pack.cu checks it) */
__host__ __device__ static inline int lattn_cl_count(int ns, int part, int P) { return ns > part ? (ns - part + P - 1) / P : 0; }
__host__ __device__ static inline int lattn_cl_split(int part, int P, int j) { return part + P * j; }

/* One block's packed slices: W_o's R rows of super-block h (R x 128 B quants, R x 16 B scales), B's
 * head-h columns of the part's NLR logit rows (NLR x 512 B) and the router rows' head-h columns
 * (NLR x CPH BF16); rows past NL zero. */
__host__ __device__ static inline size_t lattn_pk_bytes(int R, int NLR, int CPH) {
    return (size_t)R * 144 + (size_t)NLR * 2 * LA_HD + (size_t)NLR * CPH * 2;
}

/* dynamic shared memory: W slice (R x 144), B slice (NLR x 512), [XL: the router rows' head-h columns
 * (NLR x CPH BF16)], the merge's group sums [8][256], the splits' weights [LA_MAXS], the q8 activation
 * of 256 values, [XL: x_old's and the norm gain's head-h columns (CPH floats each) and the output
 * gate's pre-activation (LA_HD floats)]. CPH = H / NH columns per head. */
__host__ __device__ static inline size_t lattn_smem(int R, int NLR, bool XL = false, int CPH = 0) {
    size_t b = (size_t)R * 144 + (size_t)NLR * 2 * LA_HD + (size_t)LA_GROUPS * LA_HD * 4 + (size_t)LA_MAXS * 4 + qact_smem_bytes(LA_HD);
    return XL ? b + (size_t)NLR * CPH * 2 + (size_t)CPH * 8 + (size_t)LA_HD * 4 : b;
}

/* V4 (LILAC_CUDA_ATT_COUT=2): x's rows four per red.global.add.v4.f32, a quarter of the operations.
 * XL (LILAC_CUDA_COUT_XL=1; session 31): nothing before the wait but the zeros and cp.async requests.
 * The router rows' x_old term (step 3) is computed after the wait from shared memory, beside B_h y, and
 * the output gate and head 0's x_old rows arrive by cp.async too. Why: the blocks enter only as flash
 * decoding's leave (registers), and step 3's global loads (x_old, then the router rows in two dependent
 * passes from DRAM, then the gate) held the last block's wait ~6.5 µs past flash decoding's end (H100
 * trace, session 31: "gap" 6.55 against 0.5-1.3 for the other kernels). */
/* PK (LILAC_CUDA_COUT_PACK=1; session 31, not yet run; XL's form): W_o's, B's and the router rows'
 * slices as ONE bulk copy of the block's packed image (L.pk), issued by thread 0 on an mbarrier. Why:
 * session 31's timeline has every block entered before flash decoding ends, yet the last passes its
 * wait 6.2 µs after (the combine of the ATT_COUT=0 path: 0.25); with ~53-62 KB of 16-byte cp.async
 * per block, two blocks per SM, the threads' issue itself may wait on the SM's requests in flight
 * (DRAM-paced), and the wait comes after it. A bulk copy's issue does not wait for its bytes. */
/* SPLIT (LILAC_CUDA_COUT_PACK=2; session 32, not yet run; PK's form): the image as two bulk copies on two
 * barriers, B's and the router rows' slices first (step 6 reads them), W_o's second (step 7), each
 * waited for just before its step instead of both before step 5. Why: under PK the cout kernel's wait
 * passes 0.8 µs after flash decoding ends (was 5.4), but its prologue grew 3.1 -> 4.6 µs (H200 trace,
 * session 32): the image now lands after the wait, while the merge's partials load too. */
/* CL (LILAC_CUDA_COUT_CL=1; session 32, not yet run; PK's form): a head's P blocks are one thread-block
 * cluster (P <= 8) and share the merge: block `part` loads only splits part, part + P, .. (one P-th of
 * the head's partials, ~8 KB at 4K instead of ~67 KB), merges them against its own maximum, publishes
 * (o[256], max, den) in its shared memory, and after a cluster barrier every block combines the P
 * shares read through distributed shared memory (8 KB). Why: under PK the prologue after the wait grew
 * to 4.6 µs while the head's 8 blocks each load all its partials (8.6 MB of L2 -> SM traffic per layer
 * for 1 MB of data) beside the image landing; -DLA_DIAG_PART=1 measures the ceiling. The sums' order
 * differs from the one-block merge (the atomic form's results vary anyway). */
/* One thread's 4 dims of a partial: FP32 (flash decoding's unnormalised o) or, PH, FP16 o / l
 * (k_attn_decode_fd<.., PH>; LILAC_CUDA_FD_PH=1) at the same element index i */
template <bool PH> __device__ __forceinline__ float4 lattn_ld_part(const float *po, size_t i) {
    if constexpr (PH) {
        uint2 u = __ldcg((const uint2 *)((const __half *)po + i));
        float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
        return make_float4(a.x, a.y, b.x, b.y);
    } else {
        return __ldcg((const float4 *)(po + i));
    }
}

/* PH (session 33, with SPLIT): the partials as FP16 o / l, so a split's weight is exp(m - M) l */
template <bool V4 = false, bool XL = false, bool PK = false, bool SPLIT = false, bool CL = false, bool PH = false>
__global__ void __launch_bounds__(LA_THREADS, 2) k_lattn_out(const __grid_constant__ lattn_args L) {
    static_assert(!PK || XL, "the packed form is XL's (the router rows' slices after the wait)");
    static_assert(!SPLIT || PK, "the split copies are the packed form's");
    static_assert(!PH || (SPLIT && !CL), "the FP16 partials are the two-copy form's");
    static_assert(!CL || (PK && !SPLIT), "the cluster merge is the packed form's");
    extern __shared__ __align__(16) unsigned char sm[];
    __shared__ __align__(8) uint64_t pbar; /* PK: the packed image's arrival (SPLIT: W_o's part) */
    __shared__ __align__(8) uint64_t pbar2; /* SPLIT: B's and the router rows' part */
    __shared__ float la[LA_MAXNLR];  /* x_old term of the part's logit rows over head h's columns */
    __shared__ __align__(16) float xos[LA_MAXR]; /* head 0's blocks: x_old of the part's rows */
    __shared__ float inv_den;        /* 1 / the splits' weighted sum */
    __shared__ __align__(16) float clo[CL ? LA_HD + 4 : 4]; /* CL: this block's share of the merge (relative to
                                                           * its own maximum), then (max, den) */
    ln_trace(L.tr, 0);
#if !LA_EARLY
    pdl_wait();
    pdl_trigger();
#endif
    int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    int P = gridDim.x / L.NH, h = blockIdx.x / P, part = blockIdx.x % P, R = L.R, r0 = part * R;
    int H = L.W.rows, nb = L.W.cols >> 8;
    const int CPH = 8 * L.tpr; /* head h's columns of x (H / NH) */
    unsigned char *tq = sm, *tm = sm + (size_t)R * 128, *tb = tm + (size_t)R * 16;
    unsigned char *twr = tb + (size_t)L.NLR * 2 * LA_HD; /* XL: [NLR][CPH] BF16 router rows */
    float *red = (float *)(twr + (XL ? (size_t)L.NLR * CPH * 2 : 0)); /* [LA_GROUPS][LA_HD] */
    float *wts = red + LA_GROUPS * LA_HD;                      /* [LA_MAXS] split weights, then (m, l) pairs */
    float *xf, *dx, *s16;
    int8_t *xq;
    qact_carve((unsigned char *)(wts + LA_MAXS), LA_HD, &xf, &xq, &dx, &s16);
    /* XL: [CPH] x_old, [CPH] gain, [LA_HD] gate pre-activation */
    float *txo = (float *)((unsigned char *)(wts + LA_MAXS) + qact_smem_bytes(LA_HD)), *tgf = txo + CPH, *tgt = tgf + CPH;

    /* 1. the next chain layer's buffers (cuda_backend.cu layer_znext): zeros (nobody reads or adds to
     * them until its launch) */
    for (int i = blockIdx.x * LA_THREADS + tid; i < H + L.NL; i += gridDim.x * LA_THREADS) {
        if (i < H) L.zx[i] = 0.0f;
        else L.zl[i - H] = 0.0f;
    }
    /* 2. W_o's rows r0 .. r0 + R, super-block h (8 x 16 B of quants, 16 B of scales per row), and B's
     * head-h columns of the part's logit rows (zeros past NL); PK: those and the router rows' slices in
     * one bulk copy */
    if (PK && tid == 0) {
        uint32_t pb = (uint32_t)lattn_pk_bytes(R, L.NLR, CPH), wb = (uint32_t)R * 144; /* wb: tq | tm */
        const unsigned char *src = L.pk + (size_t)blockIdx.x * pb;
        mbar_init(&pbar, 1);
        if (SPLIT) mbar_init(&pbar2, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        if (SPLIT) { /* tb | twr first: step 6 */
            mbar_expect_tx(&pbar2, pb - wb);
            ln_g2s(sm + wb, src + wb, pb - wb, &pbar2);
            mbar_expect_tx(&pbar, wb);
            ln_g2s(sm, src, wb, &pbar);
        } else {
            mbar_expect_tx(&pbar, pb);
            ln_g2s(sm, src, pb, &pbar);
        }
    }
    for (int i = tid; !PK && i < 8 * R; i += LA_THREADS)
        cp_async16(tq + 16 * i, L.W.q + ((size_t)(r0 + (i >> 3)) * nb + h) * 128 + 16 * (i & 7), 16);
    for (int i = tid; !PK && i < R; i += LA_THREADS) cp_async16(tm + 16 * i, L.W.sc + ((size_t)(r0 + i) * nb + h) * 16, 16);
    for (int i = tid; !PK && i < 32 * L.NLR; i += LA_THREADS) {
        int row = part * L.NLR + (i >> 5);
        bool ok = row < L.NL;
        cp_async16(tb + 16 * i, L.Bm + (ok ? (size_t)row * L.W.cols + h * LA_HD + 8 * (i & 31) : 0), ok ? 16 : 0);
    }
    if (XL) { /* 3'. the x_old term's operands and the gate, for after the wait */
        int cr = CPH / 8; /* 16-byte pieces per router row slice */
        for (int i = tid; !PK && i < cr * L.NLR; i += LA_THREADS) {
            int row = i / cr, j = i % cr, gi = part * L.NLR + row;
            bool ok = gi < L.NL;
            const __nv_bfloat16 *src = ok ? (gi < L.E ? L.Wr + (size_t)gi * H : L.Ws) + h * CPH + 8 * j : L.Wr;
            cp_async16(twr + (size_t)row * CPH * 2 + 16 * j, src, ok ? 16 : 0);
        }
        for (int i = tid; i < CPH / 4; i += LA_THREADS) {
            cp_async16(txo + 4 * i, L.xin + h * CPH + 4 * i, 16);
            cp_async16(tgf + 4 * i, L.gf + h * CPH + 4 * i, 16);
        }
        if (tid < LA_HD / 4) cp_async16(tgt + 4 * tid, L.qg + (size_t)h * 2 * LA_HD + LA_HD + 4 * tid, 16);
        if (h == 0)
            for (int i = tid; i < R / 4; i += LA_THREADS) cp_async16(xos + 4 * i, L.xin + r0 + 4 * i, 16);
    }
    cp_async_commit();
    /* 3. the x_old term: thread (logit row lr, + 512 / tpr, ...; 8 columns c8 of head h's H / NH) */
    if (!XL) {
        int tpr = L.tpr, lr = tid / tpr, c8 = tid % tpr, col = h * 8 * tpr + 8 * c8;
        float4 x0 = *(const float4 *)(L.xin + col), x1 = *(const float4 *)(L.xin + col + 4);
        float4 g0 = *(const float4 *)(L.gf + col), g1 = *(const float4 *)(L.gf + col + 4);
        float xg[8] = {x0.x * g0.x, x0.y * g0.y, x0.z * g0.z, x0.w * g0.w, x1.x * g1.x, x1.y * g1.y, x1.z * g1.z, x1.w * g1.w};
        for (int q = 0; q * (LA_THREADS / tpr) < L.NLR; q++) { /* the same trip count in every thread */
            int row = lr + q * (LA_THREADS / tpr), i = part * L.NLR + row;
            float t = 0.0f;
            if (row < L.NLR && i < L.NL) t = bf16x8_fma(*(const uint4 *)((i < L.E ? L.Wr + (size_t)i * H : L.Ws) + col), xg, t);
            for (int o = 1; o < tpr; o <<= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
            if (c8 == 0 && row < L.NLR) la[row] = t;
        }
    }
    if (!XL && h == 0)
        for (int i = tid; i < R; i += LA_THREADS) xos[i] = L.xin[r0 + i];
    float4 gt = make_float4(0.0f, 0.0f, 0.0f, 0.0f); /* warps 0-1: the gate of dims 4 tid .. 4 tid + 3 */
    if (!XL && tid < LA_HD / 4) {
        float4 gq = *(const float4 *)(L.qg + (size_t)h * 2 * LA_HD + LA_HD + 4 * tid);
        gt = make_float4(sigmoid_f(gq.x), sigmoid_f(gq.y), sigmoid_f(gq.z), sigmoid_f(gq.w));
    }
    ln_trace(L.tr, 40); /* the pre-wait work done (trace builds; "stamps after the wait" shows it negative) */
#if LA_EARLY
    pdl_wait();
    pdl_trigger();
#endif
    ln_trace(L.tr, 1);

    /* 4. the merge: thread (quad dq: dims 4 dq .. + 3, group g: splits g, g + 8, ..); its partials'
     * loads first (one round trip), the (m, l) pairs into shared memory */
    int n = *L.pos + 1, ns = attn_fd_used(L.nsplit, L.minpos, n) + L.xs;
#if LA_DIAG_PART
    ns = (ns + P - 1) / P;
#endif
    /* CL: this block's splits are lattn_cl_split(part, P, j) (j < ns); the indices below are local j */
    if (CL) ns = lattn_cl_count(ns, part, P);
    int dq = tid & 63, g = tid >> 6;
    float4 po[LA_CB];
#pragma unroll
    for (int k = 0; k < LA_CB; k++) {
        int s = g + LA_GROUPS * k;
        po[k] = s < ns ? lattn_ld_part<PH>(L.part_o, ((size_t)(CL ? lattn_cl_split(part, P, s) : s) * L.NH + h) * LA_HD + 4 * dq)
                       : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float2 *mls = (float2 *)red; /* the (m, l) pairs, in the group sums' space until step 5 */
    for (int s = tid; s < ns; s += LA_THREADS) mls[s] = __ldcg((const float2 *)(L.part_ml + 2 * ((size_t)(CL ? lattn_cl_split(part, P, s) : s) * L.NH + h)));
    __syncthreads();
    if (w == 0) { /* the weights exp(m_s - M) / sum_s exp(m_s - M) l_s (empty splits: m = -inf, weight 0) */
        float M = -INFINITY;
        for (int s = lane; s < ns; s += 32) M = fmaxf(M, mls[s].x);
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float den = 0.0f;
        for (int s = lane; s < ns; s += 32) {
            float2 t = mls[s];
            float e = t.x == -INFINITY ? 0.0f : __expf(t.x - M);
            wts[s] = PH ? e * t.y : e;
            den = fmaf(e, t.y, den);
        }
        den = warp_sum(den);
        if (lane == 0) inv_den = den > 0.0f ? 1.0f / den : 0.0f;
        if (CL && lane == 0) { clo[LA_HD] = M; clo[LA_HD + 1] = den; }
    }
    __syncthreads();
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < LA_CB; k++) {
        int s = g + LA_GROUPS * k;
        float e = s < ns ? wts[s] : 0.0f;
        acc.x = fmaf(e, po[k].x, acc.x); acc.y = fmaf(e, po[k].y, acc.y);
        acc.z = fmaf(e, po[k].z, acc.z); acc.w = fmaf(e, po[k].w, acc.w);
    }
    for (int s = g + LA_GROUPS * LA_CB; s < ns; s += LA_GROUPS) { /* more splits than one round trip takes */
        float e = wts[s];
        float4 t = lattn_ld_part<PH>(L.part_o, ((size_t)(CL ? lattn_cl_split(part, P, s) : s) * L.NH + h) * LA_HD + 4 * dq);
        acc.x = fmaf(e, t.x, acc.x); acc.y = fmaf(e, t.y, acc.y);
        acc.z = fmaf(e, t.z, acc.z); acc.w = fmaf(e, t.w, acc.w);
    }
    /* (mls, in red's space, was read by warp 0 before the barrier above) */
    *(float4 *)(red + g * LA_HD + 4 * dq) = acc;
    if (XL) cp_async_wait<0>(); /* the gate (step 5) and the x_old term's operands (step 6) */
    if (PK && !SPLIT) mbar_wait(&pbar, 0); /* the packed slices (step 6 on) */
    __syncthreads();
    if (XL && tid < LA_HD / 4) {
        float4 gq = *(const float4 *)(tgt + 4 * tid);
        gt = make_float4(sigmoid_f(gq.x), sigmoid_f(gq.y), sigmoid_f(gq.z), sigmoid_f(gq.w));
    }
    /* 5. y = merged / den * gate, quantized by warps 0-1 (8 lanes a 32-dim group, as the plain
     * prologue of the out-projection does) */
    if (tid < LA_HD / 4) {
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < LA_GROUPS; k++) {
            float4 t = *(const float4 *)(red + k * LA_HD + 4 * tid);
            v.x += t.x; v.y += t.y; v.z += t.z; v.w += t.w;
        }
        if constexpr (CL) {
            *(float4 *)(clo + 4 * tid) = v;
        } else {
            float inv = inv_den;
            v = make_float4(v.x * inv * gt.x, v.y * inv * gt.y, v.z * inv * gt.z, v.w * inv * gt.w);
            ln_quant_store4(v, 4 * tid, lane, xf, xq, dx, s16);
        }
    }
    if constexpr (CL) { /* every block's share published; the P shares combined by warps 0-1 */
        sk_cluster_arrive();
        sk_cluster_wait();
        if (tid < LA_HD / 4) {
            float M = -INFINITY;
            for (int q = 0; q < P; q++) M = fmaxf(M, sk_ld_cluster4(clo + LA_HD, (unsigned)q).x);
            float den = 0.0f;
            float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int q = 0; q < P; q++) {
                float4 md = sk_ld_cluster4(clo + LA_HD, (unsigned)q), t = sk_ld_cluster4(clo + 4 * tid, (unsigned)q);
                float e = md.x == -INFINITY ? 0.0f : __expf(md.x - M); /* a block without splits: max -inf, nothing */
                den = fmaf(e, md.y, den);
                v.x = fmaf(e, t.x, v.x); v.y = fmaf(e, t.y, v.y); v.z = fmaf(e, t.z, v.z); v.w = fmaf(e, t.w, v.w);
            }
            float inv = den > 0.0f ? 1.0f / den : 0.0f;
            v = make_float4(v.x * inv * gt.x, v.y * inv * gt.y, v.z * inv * gt.z, v.w * inv * gt.w);
            ln_quant_store4(v, 4 * tid, lane, xf, xq, dx, s16);
        }
        sk_cluster_arrive(); /* this block's reads of the others' shares done (the wait: before it exits) */
    }
    cp_async_wait<0>(); /* this thread's copies; the barrier publishes everyone's */
    __syncthreads();
    ln_trace(L.tr, 3);
    ln_trace(L.tr, 4); /* no tiles of its own to wait for: the trace's columns stay readable */
    /* 6. logit rows: la + B_h y, a row per 32 threads (8 columns each), its share by atomicAdd */
    if (SPLIT) mbar_wait(&pbar2, 0);
    for (int r = w; r < L.NLR; r += LA_THREADS / 32) {
        float4 y0 = *(const float4 *)(xf + 8 * lane), y1 = *(const float4 *)(xf + 8 * lane + 4);
        float yv[8] = {y0.x, y0.y, y0.z, y0.w, y1.x, y1.y, y1.z, y1.w};
        float t = bf16x8_fma(*(const uint4 *)(tb + (size_t)r * 2 * LA_HD + 16 * lane), yv, 0.0f);
        if (XL) /* the x_old term: W_r's head-h columns of row r times (x_old g) there */
            for (int j = lane; j < CPH / 8; j += 32) {
                float4 x0 = *(const float4 *)(txo + 8 * j), x1 = *(const float4 *)(txo + 8 * j + 4);
                float4 g0 = *(const float4 *)(tgf + 8 * j), g1 = *(const float4 *)(tgf + 8 * j + 4);
                float xg[8] = {x0.x * g0.x, x0.y * g0.y, x0.z * g0.z, x0.w * g0.w, x1.x * g1.x, x1.y * g1.y, x1.z * g1.z, x1.w * g1.w};
                t = bf16x8_fma(*(const uint4 *)(twr + (size_t)r * CPH * 2 + 16 * j), xg, t);
            }
        t = warp_sum(t);
        if (lane == 0 && part * L.NLR + r < L.NL) atomicAdd(L.lraw + part * L.NLR + r, (XL ? 0.0f : la[r]) + t);
    }
    ln_trace(L.tr, 41);
    /* 7. W_o's rows: thread (row, chunk cc of the 4 in the super-block), the row's 4 chunks summed
     * over 4 lanes; head 0 adds x_old */
    qact Q = {xf, xq, dx, s16};
    ln_act A;
    int cc = tid & 3;
    if (SPLIT) mbar_wait(&pbar, 0);
    ln_act_q4k(Q, 0, cc, A);
    for (int row = tid >> 2; row < R; row += LA_THREADS / 4) {
        float v = ln_dot_q4k(tq + (size_t)row * 128 + 32 * cc, tm + (size_t)row * 16, cc, A);
        v += __shfl_xor_sync(0xffffffffu, v, 1);
        v += __shfl_xor_sync(0xffffffffu, v, 2);
        if (h == 0) v += xos[row];
        if constexpr (V4) { /* lanes 0, 4, 8, 12 (and 16, ..) hold rows row .. row + 3 (row % 4 == 0 at lanes 0, 16) */
            float v1 = __shfl_down_sync(0xffffffffu, v, 4), v2 = __shfl_down_sync(0xffffffffu, v, 8), v3 = __shfl_down_sync(0xffffffffu, v, 12);
            if ((lane & 15) == 0)
                asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(L.x + r0 + row), "f"(v), "f"(v1), "f"(v2), "f"(v3) : "memory");
        } else if (cc == 0) atomicAdd(L.x + r0 + row, v);
    }
    if constexpr (CL) sk_cluster_wait(); /* no block leaves while another may still read its shares */
    ln_trace(L.tr, 2);
}

/* The source of 16-byte piece i of block blk's packed image (k_lattn_out<V4, true, true>): the bytes
 * the cp.async form copies to sm + 16 i (tq | tm | tb | twr), or NULL for a zero piece (rows past NL).
 * Host-callable: tests/cuda_host/test_lattn_pack.cu checks it against the kernel's own addressing. */
__host__ __device__ static inline const void *lattn_pk_src(const lattn_args &L, int blk, int i) {
    int P = (int)(L.W.rows / L.R), h = blk / P, part = blk % P, R = L.R, r0 = part * R;
    int H = L.W.rows, nb = L.W.cols >> 8, CPH = 8 * L.tpr, cr = CPH / 8;
    if (i < 8 * R) return L.W.q + ((size_t)(r0 + (i >> 3)) * nb + h) * 128 + 16 * (i & 7);
    i -= 8 * R;
    if (i < R) return L.W.sc + ((size_t)(r0 + i) * nb + h) * 16;
    i -= R;
    if (i < 32 * L.NLR) {
        int row = part * L.NLR + (i >> 5);
        return row < L.NL ? (const void *)(L.Bm + (size_t)row * L.W.cols + h * LA_HD + 8 * (i & 31)) : NULL;
    }
    i -= 32 * L.NLR;
    int row = i / cr, j = i % cr, gi = part * L.NLR + row;
    return gi < L.NL ? (const void *)((gi < L.E ? L.Wr + (size_t)gi * H : L.Ws) + h * CPH + 8 * j) : NULL;
}

/* The packed image of k_lattn_out<V4, true, true> (at load): block b = h P + part writes its
 * lattn_pk_bytes at pk + b * bytes. grid NH x P, any block size. */
__global__ void k_lattn_pack(const __grid_constant__ lattn_args L, unsigned char *pk) {
    int n = (int)(lattn_pk_bytes(L.R, L.NLR, 8 * L.tpr) / 16);
    uint4 *dst = (uint4 *)(pk + (size_t)blockIdx.x * n * 16);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const void *src = lattn_pk_src(L, blockIdx.x, i);
        dst[i] = src ? *(const uint4 *)src : make_uint4(0u, 0u, 0u, 0u);
    }
}

#endif
