/*
 * lean.cu — the lean decode kernels (k_lean.cuh) and their launch geometry, in a translation unit
 * of their own (the kernel headers are included in a namespace so that this object and
 * cuda_backend.cu do not both define the shared kernels; see persist.cu).
 *
 * Geometry: LN_BPS blocks per SM at most (grid = min(tiles, SMs x LN_BPS)), each at most ln_cap bytes
 * of dynamic shared memory and <= 64 registers per thread, so that two consecutive kernels' blocks
 * are resident on an SM together (the point of the design, k_lean.cuh).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lean.h"

namespace ln_impl {
#include "k_lean.cuh"
#include "k_fused.cuh"
#include "k_lgdn.cuh"
#include "k_lmoe_sk.cuh"
#include "k_lattn.cuh"
}
using namespace ln_impl;

template <typename... KArgs, typename... Args>
static void ln_launch(void (*kern)(KArgs...), int grid, int threads, size_t smem, int pdl, cudaStream_t st, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kern, args...);
}

int lean_trace_built(void) {
#ifdef LILAC_LN_TRACE
    return 1;
#else
    return 0;
#endif
}

/* Dynamic shared memory per block of the GEMV / MoE kernels (lean_init). */
static size_t ln_cap = LN_SMEM_MAX;
/* launches that ask for ln_cap bytes, so that two blocks of one launch cannot share an SM (lean_init;
 * LILAC_CUDA_LN_PAD bits): 1 every launch; 2 dense GEMVs with K >= 4096 (the attention
 * out-projection, which the trace saw two blocks to an SM beside the combine's: the SM that runs
 * two ends last); 4 the router's. Default 6 (session 17: +4.0 / +0.3 tok/s at 4K); the padding
 * changes only where blocks run, not what they compute */
static int ln_pad = 0;
static int ln_pair = 1;   /* k_lgemv's paired Q4_K tiles (lean_init; LILAC_CUDA_LN_PAIR=0 off) */
static int ln_npre = 1;   /* k_lgemv stages requested before the wait (lean_init; 0: all) */
static int ln_dpair = 1;  /* k_lmoe_down: tiles of two passes (lean_init) */
static int ln_head = 1;   /* the lm head through registers, k_lhead, where it applies (lean_init) */
static size_t fz_dyn = 0; /* dynamic shared memory of a k_fused_moe block (lean_init; 0: off) */
static int sk_ok = 0;     /* k_lmoe_sk's attributes set (lean_init) */
static int la_ok = 0;     /* k_lattn_out's attributes set (lean_init) */
static int gi_ok = 0;     /* k_lgdn<true, ATOM, true>'s attributes set (lean_init) */
#define GI_SMEM (160 * 1024) /* its dynamic shared memory at most */
static const int gi_smem = GI_SMEM;
#define LN_SMEM_LIMIT (220 * 1024) /* at most (<= 227 KB on sm_90) */

cudaError_t lean_init(size_t smem_cap, int carveout, int pad, int npre, int pair, int dpair, int head) {
    ln_pad = pad;
    ln_head = head;
    ln_dpair = dpair;
    ln_npre = npre;
    ln_pair = pair;
    ln_cap = smem_cap == 0 ? LN_SMEM_MAX : (smem_cap < 32768 ? 32768 : (smem_cap > LN_SMEM_LIMIT ? LN_SMEM_LIMIT : smem_cap));
    int lim = (int)ln_cap;
    cudaError_t e = cudaFuncSetAttribute(k_lgemv<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, lim);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_lgemv<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, LN_SMEM_HEAD);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_lgemv_fb<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, lim);
    if (e == cudaSuccess) e = cudaFuncSetAttribute(k_lgemv_fb<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, lim);
    const void *mk[12] = {(const void *)k_lmoe_gu<false>, (const void *)k_lmoe_gu<true>, (const void *)k_lmoe_down<GT_Q4_K, false>,
                          (const void *)k_lmoe_down<GT_Q6_K, false>, (const void *)k_lmoe_down<GT_Q4_K, true>, (const void *)k_lmoe_down<GT_Q6_K, true>,
                          (const void *)k_lmoe_gu<false, true>, (const void *)k_lmoe_gu<true, true>, (const void *)k_lmoe_down<GT_Q4_K, false, true>,
                          (const void *)k_lmoe_down<GT_Q6_K, false, true>, (const void *)k_lmoe_down<GT_Q4_K, true, true>,
                          (const void *)k_lmoe_down<GT_Q6_K, true, true>};
    for (int i = 0; i < 12 && e == cudaSuccess; i++) e = cudaFuncSetAttribute(mk[i], cudaFuncAttributeMaxDynamicSharedMemorySize, lim);
    if (carveout != 0 && e == cudaSuccess) { /* keep every SM at its largest shared-memory split */
        e = cudaFuncSetAttribute(k_lgemv<false>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        if (e == cudaSuccess) e = cudaFuncSetAttribute(k_lgemv_fb<1>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        if (e == cudaSuccess) e = cudaFuncSetAttribute(k_lgemv_fb<2>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        if (e == cudaSuccess) e = cudaFuncSetAttribute(k_lgemv<true>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        for (int i = 0; i < 12 && e == cudaSuccess; i++) e = cudaFuncSetAttribute(mk[i], cudaFuncAttributePreferredSharedMemoryCarveout, 100);
    }
    if (e != cudaSuccess) return e;
    /* the fused MoE kernel: one block per SM with the most dynamic shared memory an SM allows; left
     * off (fz_dyn 0, lean_moe_fused launches nothing) where one block does not fit */
    int dev = 0, optin = 0;
    cudaFuncAttributes fa;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess &&
        cudaFuncGetAttributes(&fa, k_fused_moe<GT_Q4_K>) == cudaSuccess) {
        size_t dyn = ((size_t)optin - fa.sharedSizeBytes - 1024) & ~(size_t)1023;
        int occ4 = 0, occ6 = 0;
        if (cudaFuncSetAttribute(k_fused_moe<GT_Q4_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn) == cudaSuccess &&
            cudaFuncSetAttribute(k_fused_moe<GT_Q6_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn) == cudaSuccess &&
            cudaFuncSetAttribute(k_fused_moe<GT_Q4_K>, cudaFuncAttributePreferredSharedMemoryCarveout, 100) == cudaSuccess &&
            cudaFuncSetAttribute(k_fused_moe<GT_Q6_K>, cudaFuncAttributePreferredSharedMemoryCarveout, 100) == cudaSuccess &&
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ4, k_fused_moe<GT_Q4_K>, FZ_THREADS, dyn) == cudaSuccess &&
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ6, k_fused_moe<GT_Q6_K>, FZ_THREADS, dyn) == cudaSuccess && occ4 >= 1 &&
            occ6 >= 1)
            fz_dyn = dyn;
    }
    /* k_lgdn: 13 KB static + up to 41 KB dynamic is past the 48 KB default; each form with the state barrier
     * (in place) and without (double-buffered state) */
    {
        void (*lg[8])(lgdn_args) = {k_lgdn<false>, k_lgdn<true>, k_lgdn<true, 1>, k_lgdn<true, 2>,
                                    k_lgdn<false, 0, false, false>, k_lgdn<true, 0, false, false>, k_lgdn<true, 1, false, false>, k_lgdn<true, 2, false, false>};
        for (int i = 0; i < 8 && e == cudaSuccess; i++) {
            e = cudaFuncSetAttribute(lg[i], cudaFuncAttributeMaxDynamicSharedMemorySize, 512 * 80 + ((i & 3) ? LG_FOLD_MAXR * 2 * LG_D : 0) + (int)qact_smem_bytes(LG_D));
            if (carveout != 0 && e == cudaSuccess) e = cudaFuncSetAttribute(lg[i], cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        }
    }
    if (e != cudaSuccess) return e;
    /* the split-K MoE (k_lmoe_sk.cuh): up to LN_SMEM_LIMIT; a refused attribute leaves it off */
    const void *sk[4] = {(const void *)k_lmoe_sk<GT_Q4_K, false>, (const void *)k_lmoe_sk<GT_Q4_K, true>, (const void *)k_lmoe_sk<GT_Q6_K, false>,
                         (const void *)k_lmoe_sk<GT_Q6_K, true>};
    sk_ok = 1;
    for (int i = 0; i < 4; i++)
        if (cudaFuncSetAttribute(sk[i], cudaFuncAttributeMaxDynamicSharedMemorySize, LN_SMEM_LIMIT) != cudaSuccess ||
            (carveout != 0 && cudaFuncSetAttribute(sk[i], cudaFuncAttributePreferredSharedMemoryCarveout, 100) != cudaSuccess))
            sk_ok = 0;
    /* the attention combine + out-projection (k_lattn.cuh): its largest plan; refused: left off */
    la_ok = 1;
    for (int i = 0; i < 12; i++) {
        const void *ks[12] = {(const void *)k_lattn_out<false>, (const void *)k_lattn_out<true>, (const void *)k_lattn_out<false, true>,
                              (const void *)k_lattn_out<true, true>, (const void *)k_lattn_out<false, true, true>,
                              (const void *)k_lattn_out<true, true, true>, (const void *)k_lattn_out<false, true, true, true>,
                              (const void *)k_lattn_out<true, true, true, true>, (const void *)k_lattn_out<false, true, true, false, true>,
                              (const void *)k_lattn_out<true, true, true, false, true>,
                              (const void *)k_lattn_out<false, true, true, true, false, true>,
                              (const void *)k_lattn_out<true, true, true, true, false, true>};
        const void *k = ks[i];
        if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)lattn_smem(LA_MAXR, LA_MAXNLR, true, 256)) != cudaSuccess ||
            (carveout != 0 && cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100) != cudaSuccess))
            la_ok = 0;
    }
    /* the GDN layer with its in-projection (k_lgdn<true, ATOM, true>): refused: left off */
    gi_ok = 1;
    for (int i = 0; i < 2; i++) {
        const void *k = i ? (const void *)k_lgdn<true, 2, true> : (const void *)k_lgdn<true, 1, true>;
        if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, GI_SMEM) != cudaSuccess ||
            (carveout != 0 && cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, 100) != cudaSuccess))
            gi_ok = 0;
    }
    cudaGetLastError(); /* a refused attribute only leaves the fused kernel off */
    return cudaSuccess;
}

static int ln_min(int a, int b) { return a < b ? a : b; }
static size_t ln_maxz(size_t a, size_t b) { return a > b ? a : b; }
/* Dynamic shared memory of a launch that needs `need` bytes: with ln_pad the whole ln_cap, so that
 * two blocks of one kernel cannot share an SM whatever else is resident. */
static size_t ln_smem(size_t need, bool pad = false) { return ((ln_pad & 1) || pad) && need < ln_cap ? ln_cap : need; }

/* Rows per tile of a K-column matrix of type WT: one chunk per thread where the tile fits a stage
 * (Q4_K), fewer rows for the wider rows of Q6_K / BF16; Q6_K tiles keep their fp16 d copy a multiple
 * of 16 bytes (rows * nb % 8 == 0). 0: not possible. */
static int ln_tile_rows(int WT, int K, int rows, int threads, size_t stage) {
    int nb = K >> 8, tr = threads / (K >> 6), rb = ln_row_bytes(WT, K);
    while (tr > 0 && (size_t)tr * rb > stage) tr--;
    if (WT == GT_Q6_K) {
        while (tr > 0 && (tr * nb) % 8) tr--;
        if ((rows * nb) % 8) return 0;
    }
    return tr;
}

/* The tiles of a GEMV (segments, rows per tile, first tile of each) in stages of `stage` bytes:
 * the number of tiles, 0 when the kernel does not handle the shapes or types. */
static int ln_gemv_plan(const gemv_args &a, size_t stage, lgemv_args *L) {
    int K = a.K, C = K >> 6;
    if (a.nseg < 1 || K % 256 || (C & (C - 1)) || C > LN_THREADS) return 0;
    if (a.pro == PRO_HEADNORM_GATED && a.hd != 32 && a.hd != 64 && a.hd != 128) return 0; /* ln_prologue's heads */
    memset(L, 0, sizeof(*L));
    L->a = a;
    int T = 0;
    for (int s = 0; s < a.nseg; s++) {
        const gmat &W = a.seg[s].W;
        if ((W.type != GT_Q4_K && W.type != GT_Q6_K && W.type != GT_BF16) || W.cols != K || W.rows < 1) return 0;
        if (a.exact && W.type != GT_BF16) return 0; /* exact (router) logits: only BF16 rows dot the fp32 input here */
        /* BF16: rows split over the whole block where 8 elements per thread cover them (k_lgemv) */
        int tr = W.type == GT_BF16 && (8 * LN_THREADS) % K == 0 && 8 * LN_THREADS / K <= 15 ? 8 * LN_THREADS / K
                                                                                              : ln_tile_rows(W.type, K, W.rows, LN_THREADS, stage);
        /* Q4_K rows of <= 32 chunks in a stage that holds twice a thread-per-chunk tile: paired
         * (k_lgemv: a thread dots two rows) */
        if (W.type == GT_Q4_K && C <= 32 && stage >= (size_t)2 * (LN_THREADS / C) * ln_row_bytes(GT_Q4_K, K)) tr = 2 * (LN_THREADS / C);
        if (tr < 1) return 0;
        L->tr[s] = tr;
        L->t0[s] = T;
        T += (W.rows + tr - 1) / tr;
    }
    L->t0[a.nseg] = T;
    L->stage = (int)stage;
    return T;
}

int lean_gemv(const void *args, int nsm, int pdl, cudaStream_t st, unsigned long long *tr, const lean_fb *fb, int launch) {
    const gemv_args &a = *(const gemv_args *)args;
    lgemv_args L;
    if (fb && (a.argmax || a.exact || !fb->x || (fb->mode == 1 && (a.pro != PRO_RMSNORM || a.K % 4 || a.K != fb->H)) ||
               (fb->mode == 2 && (a.K % 2048 || fb->H % 2048 || !fb->B || !fb->lraw || !fb->Wr || !fb->g || fb->NL < 1))))
        return 0;
    if (!fb && ln_head && a.argmax && a.nseg == 1 && a.seg[0].W.type == GT_Q6_K && a.K == 2048 && a.seg[0].W.cols == 2048 &&
        a.seg[0].epi != EPI_ADD && a.pro == PRO_RMSNORM && qact_smem_bytes(a.K) <= 48 * 1024) {
        /* the lm head through registers (k_lhead): one block per SM, a warp per row */
        memset(&L, 0, sizeof(L));
        L.a = a;
        L.trace = tr;
        ln_launch(k_lhead, nsm * LN_LHEAD_BPS, LN_LHEAD_THREADS, qact_smem_bytes(a.K), pdl, st, L);
        return 1;
    }
    /* the lm head (argmax) takes stages of whole Q6_K tiles: 16 rows of 2048 = 27 KB, every thread
     * busy; rows of <= 32 chunks take stages of paired Q4_K tiles (36 KB at K = 2048) */
    size_t stage = a.argmax ? LN_STAGE_HEAD : (ln_pair && (a.K >> 6) <= 32 ? 2 * LN_STAGE : LN_STAGE);
    int T = ln_gemv_plan(a, stage, &L);
    if (T == 0) return 0;
    L.trace = tr;
    int G = ln_min(T, nsm * (a.argmax ? LN_HEAD_BPS : LN_BPS)), mine = (T + G - 1) / G;
    size_t qb = qact_smem_bytes(a.K), cap = a.argmax ? LN_SMEM_HEAD : ln_cap;
    if (qb + stage > cap) return 0;
    L.nst = ln_min(ln_min(LN_MAX_ST, mine), (int)((cap - qb) / stage));
    L.npre = ln_npre;
    size_t need = (size_t)L.nst * L.stage + qb;
    bool pad = ((ln_pad & 2) && a.K >= 4096) || ((ln_pad & 4) && a.exact);
    if (fb && fb->mode == 1) {
        if (!launch) return 1;
        L.fxs = fb->x;
        ln_launch(k_lgemv_fb<1>, G, LN_THREADS, ln_smem(need, pad), pdl, st, L);
        return 1;
    }
    if (fb) { /* the fold's rows after the activation: two rows of K BF16 per block */
        need = (need + 15) & ~(size_t)15;
        if (fb->NL > 2 * G || need + (size_t)4 * a.K > ln_cap) return 0;
        if (!launch) return 1;
        L.fB = (const __nv_bfloat16 *)fb->B;
        L.flraw = fb->lraw;
        L.fNL = fb->NL;
        L.fboff = (int)need;
        L.fWr = (const __nv_bfloat16 *)fb->Wr;
        L.fWs = (const __nv_bfloat16 *)fb->Ws;
        L.fg = fb->g;
        L.fx = fb->x;
        L.fH = fb->H;
        ln_launch(k_lgemv_fb<2>, G, LN_THREADS, ln_smem(need + (size_t)4 * a.K, pad), pdl, st, L);
        return 1;
    }
    ln_launch(a.argmax ? k_lgemv<true> : k_lgemv<false>, G, LN_THREADS, a.argmax ? need : ln_smem(need, pad), pdl, st, L);
    return 1;
}

/* The lean MoE geometry (gate/up tile rows TH, down rows per tile R and stage bytes); 0 when the
 * kernels do not handle the shapes or types. */
static int ln_moe_geom(const moe_args &m, int *pTH, int *pR, size_t *pdstage) {
    int H = m.H, C = H >> 6, WT = m.down.type;
    /* gate/up: Q4_K, 8 <= H/64 <= 32 (a tile is 256/C h rows of gate and of up) */
    if (H % 256 || C < 8 || C > 32 || m.E > 256 || m.E < m.k || m.k < 1 || m.k > QK_MAX_TOPK) return 0;
    if (m.gate.type != GT_Q4_K || m.up.type != GT_Q4_K || m.gate.cols != H || m.up.cols != H) return 0;
    int TH = LN_THREADS / C; /* k_lmoe_gu: TH gate + TH up rows per tile */
    if (m.FF % TH || (m.FS && m.FS % TH)) return 0;
    if (m.FS && (m.sgate.type != GT_Q4_K || m.sup.type != GT_Q4_K || m.FS != m.FF || m.sdown.type != WT)) return 0;
    /* down: Q4_K / Q6_K rows of FF columns, 8 <= FF/64 <= 32 */
    int Cd = m.FF >> 6, nslot = m.k + (m.FS ? 1 : 0);
    if ((WT != GT_Q4_K && WT != GT_Q6_K) || m.FF % 256 || Cd < 8 || Cd > 32 || m.down.cols != m.FF) return 0;
    int R = (LN_DOWN_THREADS / Cd) / nslot, nbd = m.FF >> 8;
    if (WT == GT_Q6_K)
        while (R > 0 && (R * nbd) % 8) R--;
    if (R < 1 || H % R) return 0;
    size_t dstage = (size_t)nslot * R * ln_row_bytes(WT, m.FF);
    int kf = m.k * m.FF + m.FS;
    size_t qh = qact_smem_bytes(kf), qx = qact_smem_bytes(H);
    if (dstage % 16 || qh + dstage > ln_cap || qx + 2 * (size_t)TH * (H >> 8) * 144 > ln_cap) return 0;
    *pTH = TH;
    *pR = R;
    *pdstage = dstage;
    return 1;
}

/* The down's rows per tile (pr * R: two passes where the tile still fits next to the activation and
 * the rows split evenly) and its stage bytes. */
static int ln_down_tr(const moe_args &m, int R, size_t dstage, int *ppr, size_t *pstage) {
    size_t qh = qact_smem_bytes(m.k * m.FF + m.FS);
    int pr = ln_dpair && m.H % (2 * R) == 0 && qh + 2 * dstage <= ln_cap ? 2 : 1;
    if (ppr) *ppr = pr;
    if (pstage) *pstage = dstage * pr;
    return pr * R;
}

/* Planes of TR rows of W as one tile, in ln_copy_rows' shared-memory layout: offsets and widths. */
static int ln_tile_planes(const gmat &W, int TR, const unsigned char *src[4], size_t w[4], size_t off[4]) {
    size_t nb = (size_t)(W.cols >> 8), n = (size_t)TR * nb;
    if (W.type == GT_Q4_K) {
        src[0] = W.q; w[0] = n * 128; off[0] = 0;
        src[1] = W.sc; w[1] = n * 16; off[1] = n * 128;
        return 2;
    }
    if (W.type == GT_Q6_K) {
        src[0] = W.q; w[0] = n * 128; off[0] = 0;
        src[1] = W.qh; w[1] = n * 64; off[1] = n * 128;
        src[2] = W.sc; w[2] = n * 16; off[2] = n * 192;
        src[3] = (const unsigned char *)W.d; w[3] = n * 2; off[3] = n * 208;
        return 4;
    }
    return 0;
}

/* Copies every TR-row tile of W (rows / TR tiles) into dst + t * pitch + at, plane by plane. */
static int ln_pack_mat(const gmat &W, int TR, unsigned char *dst, size_t pitch, size_t at, cudaStream_t st) {
    const unsigned char *src[4];
    size_t w[4], off[4];
    int np = ln_tile_planes(W, TR, src, w, off);
    if (!np || W.rows % TR) return 0;
    for (int i = 0; i < np; i++)
        if (cudaMemcpy2DAsync(dst + at + off[i], pitch, src[i], w[i], w[i], (size_t)(W.rows / TR), cudaMemcpyDeviceToDevice, st) != cudaSuccess)
            return 0;
    return 1;
}

size_t lean_pack_bytes(const void *args, int which) {
    const moe_args &m = *(const moe_args *)args;
    int TH, R;
    size_t dstage;
    if (!ln_moe_geom(m, &TH, &R, &dstage)) return 0;
    size_t gu = 2 * (size_t)TH * (m.H >> 8) * 144; /* a gate/up stage */
    int TR = ln_down_tr(m, R, dstage, NULL, NULL);
    size_t dn = (size_t)TR * ln_row_bytes(m.down.type, m.FF); /* one slot of a down stage */
    switch (which) {
    case 0: return (size_t)m.E * m.FF / TH * gu;
    case 1: return (size_t)m.FS / TH * gu;
    case 2: return (size_t)m.E * m.H / TR * dn;
    default: return m.FS ? (size_t)m.H / TR * dn : 0;
    }
}

int lean_pack(const void *args, const lean_pack_t *pk, cudaStream_t st) {
    const moe_args &m = *(const moe_args *)args;
    int TH, R;
    size_t dstage;
    if (!ln_moe_geom(m, &TH, &R, &dstage)) return 0;
    size_t gu = 2 * (size_t)TH * (m.H >> 8) * 144;
    int TR = ln_down_tr(m, R, dstage, NULL, NULL);
    size_t dn = (size_t)TR * ln_row_bytes(m.down.type, m.FF);
    int ok = 1;
    if (pk->gu) ok &= ln_pack_mat(m.gate, TH, (unsigned char *)pk->gu, gu, 0, st) && ln_pack_mat(m.up, TH, (unsigned char *)pk->gu, gu, gu / 2, st);
    if (pk->sgu) ok &= ln_pack_mat(m.sgate, TH, (unsigned char *)pk->sgu, gu, 0, st) && ln_pack_mat(m.sup, TH, (unsigned char *)pk->sgu, gu, gu / 2, st);
    if (pk->dn) ok &= ln_pack_mat(m.down, TR, (unsigned char *)pk->dn, dn, 0, st);
    if (pk->sdn) ok &= ln_pack_mat(m.sdown, TR, (unsigned char *)pk->sdn, dn, 0, st);
    return ok;
}

int lean_moe(const void *args, int nsm, int pdl, cudaStream_t st, int which, unsigned long long *tr, float *wraw, const lean_pf *pf,
             const lean_pack_t *pk) {
    const moe_args &m = *(const moe_args *)args;
    int TH, R, H = m.H, WT = m.down.type;
    size_t dstage;
    if (!ln_moe_geom(m, &TH, &R, &dstage)) return 0;
    int kf = m.k * m.FF + m.FS;
    size_t qh = qact_smem_bytes(kf), qx = qact_smem_bytes(H);
    if (which & 1) {
        lmoe_args L = {};
        L.m = m;
        L.tr = tr;
        L.wraw = wraw;
        L.gup = pk ? (const unsigned char *)pk->gu : NULL;
        L.sgup = pk ? (const unsigned char *)pk->sgu : NULL;
        int T = m.FS / TH + m.k * (m.FF / TH), G = ln_min(T, nsm * LN_BPS), mine = (T + G - 1) / G;
        L.stage = 2 * TH * (H >> 8) * 144;
        L.nst = ln_min(ln_min(LN_MAX_ST, mine), (int)((ln_cap - qx) / L.stage));
        bool P = L.gup || L.sgup;
        ln_launch(wraw ? (P ? k_lmoe_gu<true, true> : k_lmoe_gu<true>) : (P ? k_lmoe_gu<false, true> : k_lmoe_gu<false>), G, LN_THREADS,
                  ln_smem((size_t)L.nst * L.stage + qx), pdl, st, L);
    }
    if (which & 2) {
        lmoe_down_args D = {};
        D.m = m;
        D.tr = tr;
        D.R = R;
        D.wraw = wraw;
        if (pf && pf->when && pf->n > 0) {
            D.pfn = pf->n < 8 ? pf->n : 8;
            D.pfwhen = pf->when;
            for (int i = 0; i < D.pfn; i++) { D.pfp[i] = (const unsigned char *)pf->p[i]; D.pfb[i] = pf->bytes[i]; }
        }
        ln_down_tr(m, R, dstage, &D.pr, &dstage);
        D.stage = (int)dstage;
        D.dnp = pk ? (const unsigned char *)pk->dn : NULL;
        D.sdnp = pk ? (const unsigned char *)pk->sdn : NULL;
        int T = H / (D.pr * R), G = ln_min(T, nsm * LN_BPS), mine = (T + G - 1) / G;
        D.nst = ln_min(ln_min(LN_MAX_ST, mine), (int)((ln_cap - qh) / dstage));
        bool P = D.dnp || D.sdnp;
        ln_launch(P ? (WT == GT_Q4_K ? (wraw ? k_lmoe_down<GT_Q4_K, true, true> : k_lmoe_down<GT_Q4_K, false, true>)
                                     : (wraw ? k_lmoe_down<GT_Q6_K, true, true> : k_lmoe_down<GT_Q6_K, false, true>))
                    : (WT == GT_Q4_K ? (wraw ? k_lmoe_down<GT_Q4_K, true> : k_lmoe_down<GT_Q4_K, false>)
                                     : (wraw ? k_lmoe_down<GT_Q6_K, true> : k_lmoe_down<GT_Q6_K, false>)),
                  G, LN_DOWN_THREADS, ln_smem((size_t)D.nst * dstage + qh), pdl, st, D);
    }
    return 1;
}

/* ---- the split-K MoE (k_lmoe_sk.cuh) */

/* The kernel instance for a down type and the router fold (raw logits). */
static void (*sk_kernel(int WT, int raw))(lmoe_sk_args) {
    if (WT == GT_Q4_K) return raw ? k_lmoe_sk<GT_Q4_K, true> : k_lmoe_sk<GT_Q4_K, false>;
    return raw ? k_lmoe_sk<GT_Q6_K, true> : k_lmoe_sk<GT_Q6_K, false>;
}

/* A launch of `grid` blocks of LN_THREADS in clusters of SK_CL (at: room for 2 attributes), with
 * programmatic dependent launch when pdl != 0. */
/* a launch of `grid` blocks of `threads` in clusters of cl, with PDL when pdl (at: 2 attributes) */
static void ln_config_cl(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *at, int grid, int threads, int cl, size_t smem, cudaStream_t st, int pdl) {
    *cfg = cudaLaunchConfig_t{};
    cfg->gridDim = dim3((unsigned)grid);
    cfg->blockDim = dim3((unsigned)threads);
    cfg->dynamicSmemBytes = smem;
    cfg->stream = st;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)cl;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    cfg->attrs = at;
    cfg->numAttrs = pdl ? 2 : 1;
}
static void sk_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *at, int grid, size_t smem, cudaStream_t st, int pdl) {
    ln_config_cl(cfg, at, grid, LN_THREADS, SK_CL, smem, st, pdl);
}

/* Clusters of SK_CL blocks that fit on the device at once with `smem` bytes each (0: none), cached
 * per instance and size: the grid must not exceed it, since a block that waits for the grid-wide
 * counter needs every other block resident. */
static int sk_max_clusters(void (*kern)(lmoe_sk_args), size_t smem) {
    static struct { void (*k)(lmoe_sk_args); size_t smem; int n; } memo[8];
    static int nmemo = 0;
    for (int i = 0; i < nmemo; i++)
        if (memo[i].k == kern && memo[i].smem == smem) return memo[i].n;
    int dev = 0, nsm = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[2];
    sk_config(&cfg, at, nsm / SK_CL > 0 ? nsm / SK_CL * SK_CL : SK_CL, smem, 0, 0);
    if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess) n = 0;
    cudaGetLastError();
    if (nmemo < 8) memo[nmemo++] = {kern, smem, n};
    return n;
}

int lean_moe_sk(const void *args, int nsm, int pdl, cudaStream_t st, unsigned long long *tr, int raw, const lean_pf *pf,
                unsigned long long *ctr, size_t cap, int launch) {
    const moe_args &m = *(const moe_args *)args;
    int TH, R, WT = m.down.type;
    size_t dstage;
    if (!sk_ok || !ctr || !ln_moe_geom(m, &TH, &R, &dstage)) return 0;
    /* a unit is SK_CL gate/up tiles: 128 or 256 h rows, half or all of a 256-column block of the down */
    int UH = SK_CL * TH, H = m.H;
    if ((UH != 128 && UH != 256) || m.FF % UH || m.FS % UH || H % SK_CL || (H / SK_CL) * (UH / 64) != LN_THREADS ||
        LN_THREADS % (H / SK_CL))
        return 0;
    if (WT == GT_Q6_K && (m.FF >> 8) % 2) return 0; /* the 4-byte copy of d stays inside the matrix */
    lmoe_sk_args L;
    memset(&L, 0, sizeof(L));
    L.m = m;
    L.ctr = ctr;
    L.tr = tr;
    L.stage = 2 * TH * (H >> 8) * 144;
    L.dslice = (H / SK_CL) * sk_slice_row_bytes(WT, UH);
    int U = m.FS / UH + m.k * (m.FF / UH), nc0 = nsm / SK_CL > 0 ? nsm / SK_CL : 1, mine = (U + nc0 - 1) / nc0;
    size_t qx = (qact_smem_bytes(H) + 15) & ~(size_t)15, qu = qact_smem_bytes(UH);
    if (cap == 0 || cap > LN_SMEM_LIMIT) cap = LN_SMEM_LIMIT;
    /* every unit's tile and slice requested at once where they fit, else the deeper ring gives up a
     * buffer first (a unit needs its tile and its slice together) */
    L.nst = ln_min(mine, LN_MAX_ST);
    L.nsd = ln_min(mine, SK_MAX_SD);
    auto need = [&]() { return (size_t)L.nst * L.stage + (size_t)L.nsd * L.dslice + qx + qu; };
    while (need() > cap && (L.nst > 1 || L.nsd > 1)) {
        if (L.nsd >= L.nst && L.nsd > 1) L.nsd--;
        else L.nst--;
    }
    if (need() > cap) return 0;
    void (*kern)(lmoe_sk_args) = sk_kernel(WT, raw);
    /* at most one block per SM (two blocks of this kernel on one SM would do twice the work there),
     * so the grid is the same for every launch that fits once per SM: one counter epoch = one G */
    int nc = ln_min(sk_max_clusters(kern, need()), nsm / SK_CL);
    if (nc < 1) return 0;
    nc = ln_min(nc, U);
    if (!launch) return 1;
    if (pf && pf->when && pf->n > 0) {
        L.pfn = pf->n < 8 ? pf->n : 8;
        for (int i = 0; i < L.pfn; i++) { L.pfp[i] = (const unsigned char *)pf->p[i]; L.pfb[i] = pf->bytes[i]; }
    }
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[2];
    sk_config(&cfg, at, nc * SK_CL, need(), st, pdl);
    return cudaLaunchKernelEx(&cfg, kern, L) == cudaSuccess;
}

/* Rows of every BF16 segment on the split path (tr * K == 8 * LN_THREADS) and K / 64 <= 32: the
 * shapes fz_gemv_tile handles. */
static int fz_gemv_ok(const lgemv_args &L) {
    if ((L.a.K >> 6) > 32) return 0;
    for (int s = 0; s < L.a.nseg; s++)
        if (L.a.seg[s].W.type == GT_BF16 && L.tr[s] * L.a.K != 8 * LN_THREADS) return 0;
    return 1;
}

int lean_moe_fused(const void *moe, const void *router, const void *tail, int nsm, int pdl, cudaStream_t st, unsigned long long *gbar,
                   unsigned long long *tr) {
    const moe_args &m = *(const moe_args *)moe;
    const gemv_args &ra = *(const gemv_args *)router;
    int TH, R, WT = m.down.type;
    size_t dstage;
    if (!fz_dyn || !gbar || !ln_moe_geom(m, &TH, &R, &dstage)) return 0;
    TH = (LN_THREADS / 2) / (m.H >> 6); /* k_fused_moe's gate/up tiles: TH gate rows + TH up rows over the block */
    if (m.FF % TH || m.FS % TH) return 0;
    /* down tiles for FZ_THREADS threads: R rows x nslot slots x FF/64 chunks, the last tile of H
     * possibly short (Q6_K: R * FF/256 % 8 == 0 for the d copies, and R | H) */
    int nslot = m.k + (m.FS ? 1 : 0), nbd = m.FF >> 8;
    R = (FZ_THREADS / (m.FF >> 6)) / nslot;
    if (WT == GT_Q6_K) {
        while (R > 0 && (R * nbd) % 8) R--;
        if (R > 0 && m.H % R) return 0;
    }
    if (R < 1) return 0;
    dstage = (size_t)nslot * R * ln_row_bytes(WT, m.FF);
    fz_args F;
    memset(&F, 0, sizeof(F));
    F.m = m;
    F.R = R;
    F.dstage = (int)dstage;
    F.gbar = gbar;
    F.tr = tr;
    /* the router: its prologue is the MoE's (the ffn norm of x), its rows BF16 on the split path
     * (so the Q4_K activation slice of the gate/up tiles is never replaced) */
    int nR = ln_gemv_plan(ra, LN_STAGE, &F.r);
    if (!nR || ra.K != m.H || ra.pro != PRO_RMSNORM || ra.x != m.x || ra.g != m.g || ra.argmax || !fz_gemv_ok(F.r)) return 0;
    for (int s = 0; s < ra.nseg; s++)
        if (ra.seg[s].W.type != GT_BF16) return 0;
    int nT = 0;
    if (tail) {
        const gemv_args &ta = *(const gemv_args *)tail;
        lgemv_args T;
        nT = ta.pro == PRO_RMSNORM && !ta.argmax ? ln_gemv_plan(ta, LN_STAGE, &T) : 0;
        if (nT && fz_gemv_ok(T)) F.t = T;
        else nT = 0;
    }
    F.c[FZ_R] = 0;
    F.c[FZ_S] = nR;
    F.c[FZ_G] = F.c[FZ_S] + m.FS / TH;
    F.c[FZ_D] = F.c[FZ_G] + m.k * (m.FF / TH);
    F.c[FZ_T] = F.c[FZ_D] + (m.H + R - 1) / R;
    F.c[FZ_NK] = F.c[FZ_T] + nT;
    int G = nsm;
    if ((F.c[FZ_NK] + G - 1) / G > FZ_MAXT) return 0;
    size_t qa = qact_smem_bytes(m.H), qk = qact_smem_bytes(m.k * m.FF + m.FS);
    if (qk > qa) qa = qk;
    if (nT && qact_smem_bytes(F.t.a.K) > qa) qa = qact_smem_bytes(F.t.a.K);
    qa = (qa + 127) & ~(size_t)127;
    if (qa + 64 * 1024 > fz_dyn) return 0;
    F.cap = (int)((fz_dyn - qa) & ~(size_t)127);
    /* the T tiles' region (at most ceil(nT / G) tiles per block) must leave room for two of the
     * largest other tiles */
    size_t big = dstage > (size_t)LN_STAGE ? dstage : (size_t)LN_STAGE, bigT = 0;
    for (int s = 0; s < F.r.a.nseg; s++) big = ln_maxz(big, (size_t)F.r.tr[s] * ln_row_bytes(F.r.a.seg[s].W.type, F.r.a.K));
    for (int s = 0; nT && s < F.t.a.nseg; s++) bigT = ln_maxz(bigT, (size_t)F.t.tr[s] * ln_row_bytes(F.t.a.seg[s].W.type, F.t.a.K));
    if (2 * big > (size_t)F.cap) return 0;
    if (nT && (size_t)((nT + G - 1) / G) * bigT + 2 * big > (size_t)F.cap) { /* no room: without the tail */
        nT = 0;
        memset(&F.t, 0, sizeof(F.t));
        F.c[FZ_NK] = F.c[FZ_T];
    }
    ln_launch(WT == GT_Q4_K ? k_fused_moe<GT_Q4_K> : k_fused_moe<GT_Q6_K>, G, FZ_THREADS, (size_t)F.cap + qa, pdl, st, F);
    return nT ? 2 : 1;
}

size_t lean_gdn_part_floats(int HV, int H, int NL) { return (size_t)HV * (H + NL + LG_MAX_PARTS); }

static unsigned lg_stagger_ns;
void lean_gdn_stagger(unsigned ns) { lg_stagger_ns = ns; }

/* whether all `grid` blocks of kern (LG_THREADS threads, smem dynamic bytes) fit on the device at once,
 * memoized: the counter form of k_lgdn's state barrier waits for blocks that must find room */
static bool lg_grid_fits(void (*kern)(lgdn_args), int grid, size_t smem) {
    static struct { void (*k)(lgdn_args); size_t smem; int n; } memo[8];
    static int nmemo = 0;
    int n = -1;
    for (int i = 0; i < nmemo; i++)
        if (memo[i].k == kern && memo[i].smem == smem) n = memo[i].n;
    if (n < 0) {
        int dev = 0, nsm = 0, per = 0;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, kern, LG_THREADS, smem) == cudaSuccess)
            n = nsm * per;
        else
            n = 0;
        cudaGetLastError();
        if (nmemo < 8) memo[nmemo++] = {kern, smem, n};
    }
    return grid <= n;
}

int lean_gdn(const void *gdn, int dk, const void *out, float *part, unsigned *cnt, unsigned *hc, int pre, int pdl, cudaStream_t st,
             unsigned long long *tr, int launch, const lean_fold *fold) {
    const gdn_args &g = *(const gdn_args *)gdn;
    const gemv_args &o = *(const gemv_args *)out;
    if (dk != LG_D || g.DV != LG_D || g.T != 1 || g.HK < 1 || g.HV % g.HK) return 0;
    if (o.pro != PRO_HEADNORM_GATED || o.nseg != 1 || o.hd != LG_D || o.K != g.HV * LG_D || o.argmax) return 0;
    const gemv_seg &sg = o.seg[0];
    int H = sg.W.rows;
    if (sg.W.type != GT_Q4_K || sg.W.cols != o.K || sg.epi != EPI_ADD) return 0;
    /* rows per block: a multiple of 256 (thread pairs x rows), parts per head dividing 16 warps */
    int R = H % 512 == 0 ? 512 : (H % 256 == 0 ? 256 : 0);
    if (R == 0 || 16 % (H / R) || (g.HV & (g.HV - 1)) || g.HV < 4 || H / R > LG_MAX_PARTS) return 0; /* shares as float4 */
    if (H / R > 8 && !g.S2) return 0; /* the in-place state's barrier fallback: a head's blocks as one cluster, 8 at most, portably */
    int P = H / R, NL = 0, NLR = 0, tpr = 0;
    if (fold) { /* the router fold: a logit row is tpr threads of 8 columns of x_old, at most two
                 * rows per thread and NLR * 256 B of B slice in shared memory; ordered sums (cnt), or
                 * atomics into zeroed buffers that the launch zeroes one GDN layer ahead (zx, zl) */
        NL = fold->E + (fold->ws ? 1 : 0);
        NLR = (NL + P - 1) / P;
        tpr = H % g.HV == 0 ? H / g.HV / 8 : 0;
        if ((!cnt && (!fold->zx || !fold->zl || fold->zx == sg.y || fold->zl == fold->lraw)) || !fold->B || !fold->wr || !fold->xin || !fold->lraw || fold->xin == sg.y || tpr < 1 || tpr > 16 ||
            (tpr & (tpr - 1)) || H % (8 * g.HV) || 2 * (LG_THREADS / tpr) < NLR || 4 * NLR > LG_THREADS || g.HV != 32)
            return 0;
    }
    lgdn_in I;
    memset(&I, 0, sizeof(I));
    size_t dyn = (size_t)R * 80 + (fold ? (size_t)NLR * 2 * LG_D : 0) + qact_smem_bytes(LG_D);
    if (fold && fold->in) { /* the in-projection in the launch: clusters of ratio x P blocks per k-head */
        const gemv_args &a = *(const gemv_args *)fold->in;
        int ratio = g.HV / g.HK, cl = ratio * P;
        if (!gi_ok || cnt || a.pro != PRO_RMSNORM || a.nseg != 4 || a.K != H || H != 64 * 32 /* a tile row: one warp's 32 chunks */ || a.x != fold->xin ||
            cl != 8 || 2 * ratio > cl || (16 + 16 * ratio) % cl || a.argmax || a.exact)
            return 0;
        /* qkv [2 QK + HV DV], z [HV DV], b [HV], a [HV]: Q4_K / Q6_K tiles, the b / a rows also BF16 */
        const int want[4] = {2 * g.HK * LG_D + g.HV * LG_D, g.HV * LG_D, g.HV, g.HV};
        size_t rb = 0;
        for (int s = 0; s < 4; s++) {
            const gmat &W = a.seg[s].W;
            bool tile_t = W.type == GT_Q4_K || W.type == GT_Q6_K;
            if (W.rows != want[s] || W.cols != H || !(tile_t || (s >= 2 && W.type == GT_BF16))) return 0;
            if (s < 2) rb = ln_maxz(rb, (size_t)ln_row_bytes(W.type, H));
            I.W[s] = W;
        }
        I.x = a.x;
        I.g = a.g;
        I.eps = a.eps;
        I.tpb = (16 + 16 * ratio) / cl;
        I.stage = (int)(LG_IN_TR * rb);
        I.nst = ln_min(I.tpb, ln_min(LG_IN_MAXST, fold->in_nst > 0 ? fold->in_nst : 3));
        /* [ring (its start later the W / B slices and y's qact)][x̂'s qact][b / a row][exchange][bars][red], or
         * with wpre [W / B slices, y's qact][ring][x̂'s qact]... */
        I.wpre = fold->in_wpre != 0;
        I.off_ring = I.wpre ? (int)((dyn + 15) & ~(size_t)15) : 0;
        size_t o = I.wpre ? (size_t)I.off_ring + (size_t)I.nst * I.stage : ln_maxz((size_t)I.nst * I.stage, dyn);
        o = (o + 15) & ~(size_t)15;
        I.off_x = (int)o;
        o += (qact_smem_bytes(H) + 15) & ~(size_t)15;
        I.off_mini = (int)o;
        o += (size_t)H * 2; /* the widest row: BF16 */
        I.off_xb = (int)o;
        o += ((size_t)(2 * LG_D + 2 * ratio * LG_D + 2 * ratio) * 4 + 15) & ~(size_t)15;
        I.off_bar = (int)o;
        o += (size_t)(LG_IN_MAXST + 1) * 8;
        I.off_red = (int)o;
        o += 32 * 4;
        if (o > (size_t)gi_smem) return 0;
        dyn = o;
    }
    if (!launch) return 1;
    lgdn_args L;
    memset(&L, 0, sizeof(L));
    L.in = I;
    L.g = g;
    L.z = o.z;
    L.gain = o.g;
    L.eps = o.eps;
    L.W = sg.W;
    L.x = sg.y;
    L.R = R;
    L.part = part;
    L.cnt = cnt;
    L.pre = pre;
    L.tr = tr;
    L.stagger = lg_stagger_ns;
    L.xin = sg.y;
    L.ps = H;
    if (fold) {
        L.xin = fold->xin;
        L.ps = H + P * NLR;
        L.Bm = (const __nv_bfloat16 *)fold->B;
        L.Wr = (const __nv_bfloat16 *)fold->wr;
        L.Ws = (const __nv_bfloat16 *)fold->ws;
        L.gf = fold->g;
        L.E = fold->E;
        L.NL = NL;
        L.NLR = NLR;
        L.tpr = tpr;
        L.lraw = fold->lraw;
        if (!cnt) { L.zx = fold->zx; L.zl = fold->zl; }
    }
    if (fold && fold->in) { /* clusters of 8 (sk_config: the split-K MoE's launch) */
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute at[2];
        sk_config(&cfg, at, g.HV * P, dyn, st, pdl);
        cudaLaunchKernelEx(&cfg, fold->atom == 2 ? k_lgdn<true, 2, true> : k_lgdn<true, 1, true>, L);
        return 1;
    }
    /* k_lgdn's state barrier, for the state updated in place only (g.S2 NULL; the double-buffered state
     * needs none): the per-head counters where the whole grid fits at once, else clusters of P (a
     * head's blocks resident together; 11 % slower, session 35) */
    bool bar = LG_STATE_BAR && !g.S2;
    /* (the forms without the barrier's code: compiled in, it costs the fold's form 40 bytes of spills at its
     * 64-register cap, session 36) */
    void (*kern)(lgdn_args) = bar ? (fold ? (cnt ? k_lgdn<true> : fold->atom == 2 ? k_lgdn<true, 2> : k_lgdn<true, 1>) : k_lgdn<false>)
                                  : (fold ? (cnt ? k_lgdn<true, 0, false, false> : fold->atom == 2 ? k_lgdn<true, 2, false, false> : k_lgdn<true, 1, false, false>)
                                          : k_lgdn<false, 0, false, false>);
    L.hc = bar && hc && g.HV <= LG_MAX_HEADS && lg_grid_fits(kern, g.HV * P, dyn) ? hc : NULL;
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[2];
    ln_config_cl(&cfg, at, g.HV * P, LG_THREADS, bar && !L.hc ? P : 1, dyn, st, pdl);
    cudaLaunchKernelEx(&cfg, kern, L);
    return 1;
}

/* k_lattn_out's arguments for a (everything but the trace); 0 where the kernel does not take the shapes */
static int la_plan(const lean_attn *a, lattn_args *L) {
    if (!la_ok || a->HD != LA_HD || a->NH < 1) return 0;
    const gmat &W = *(const gmat *)a->wo;
    int H = W.rows, NH = a->NH;
    if (W.type != GT_Q4_K || W.cols != NH * LA_HD || H % 128 || H % (8 * NH)) return 0;
    /* rows per block: 512 where that still leaves 64 blocks (16 heads x 4 parts at H 2048), else about one
     * block per SM over the heads. Fewer blocks a head means each head's flash-decoding partials are
     * loaded fewer times; the lab times 512 slower alone (6.72 vs 5.39 us, fewer blocks), but in the
     * engine, where the kernel overlaps its predecessor under PDL, it won +0.6 % at 4K (session 34, H100;
     * -0.3 % at 256, within noise), so it is the default since session 35 */
    int R = H % 512 == 0 && H / 512 * NH >= 64 ? 512 : H % 256 == 0 && H / 256 * NH >= 64 ? 256 : 128;
    if (a->rows) R = a->rows; /* LILAC_CUDA_COUT_R: 128 / 256 / 512 */
    if (R > LA_MAXR || R > H || H % R || (R != 128 && R != 256 && R != 512)) return 0;
    int P = H / R, NL = a->E + (a->ws ? 1 : 0), NLR = (NL + P - 1) / P, tpr = H / NH / 8;
    if (NLR > LA_MAXNLR || tpr < 1 || tpr > 32 || (tpr & (tpr - 1)) || a->nsplit < 1 || a->nsplit + a->xs > LA_MAXS) return 0;
    if (!a->part_o || !a->part_ml || !a->qg || !a->pos || !a->xin || !a->x || !a->B || !a->wr || !a->g || !a->lraw || !a->zx || !a->zl ||
        a->xin == a->x || a->zx == a->x || a->zl == a->lraw)
        return 0;
    memset(L, 0, sizeof(*L));
    L->part_o = a->part_o;
    L->part_ml = a->part_ml;
    L->qg = a->qg;
    L->pos = a->pos;
    L->nsplit = a->nsplit;
    L->minpos = a->minpos;
    L->xs = a->xs;
    L->NH = NH;
    L->W = W;
    L->R = R;
    L->xin = a->xin;
    L->x = a->x;
    L->Bm = (const __nv_bfloat16 *)a->B;
    L->Wr = (const __nv_bfloat16 *)a->wr;
    L->Ws = (const __nv_bfloat16 *)a->ws;
    L->gf = a->g;
    L->E = a->E;
    L->NL = NL;
    L->NLR = NLR;
    L->tpr = tpr;
    L->lraw = a->lraw;
    L->zx = a->zx;
    L->zl = a->zl;
    L->pk = (const unsigned char *)a->pk;
    return 1;
}

static long la_cl_launches = 0;
/* k_lattn_out's CL form: a launch in clusters of P blocks (a head's), 0 (nothing launched) where no such
 * cluster can be resident with smem bytes a block (cudaOccupancyMaxActiveClusters, cached) */
static int la_launch_cl(void (*kern)(lattn_args), int G, int P, size_t smem, int pdl, cudaStream_t st, const lattn_args &L) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)G);
    cfg.blockDim = dim3(LA_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[2];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = (unsigned)P;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    static struct { void (*k)(lattn_args); size_t smem; int P, n; } memo[8];
    static int nmemo = 0;
    int n = -1;
    for (int i = 0; i < nmemo && n < 0; i++)
        if (memo[i].k == kern && memo[i].smem == smem && memo[i].P == P) n = memo[i].n;
    if (n < 0) {
        if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess) n = 0;
        cudaGetLastError();
        if (nmemo < 8) memo[nmemo++] = {kern, smem, P, n};
    }
    if (n < 1) return 0;
    cfg.numAttrs = pdl ? 2 : 1;
    cudaLaunchKernelEx(&cfg, kern, L);
    la_cl_launches++;
    return 1;
}

long lean_attn_cl_launches(void) { return la_cl_launches; }

int lean_attn_out(const lean_attn *a, int pdl, cudaStream_t st, unsigned long long *tr, int launch) {
    lattn_args L;
    if (!la_plan(a, &L) || (a->ph && !(a->pk && a->pk_split))) return 0;
    if (!launch) return 1;
    L.tr = tr;
    int G = L.NH * (L.W.rows / L.R);
    size_t smem = lattn_smem(L.R, L.NLR, a->xl || a->pk, 8 * L.tpr);
    int P = L.W.rows / L.R;
    if (a->pk && a->cl && !a->pk_split && P <= 8 &&
        la_launch_cl(a->v4 ? k_lattn_out<true, true, true, false, true> : k_lattn_out<false, true, true, false, true>, G, P, smem, pdl, st, L))
        return 1;
    if (a->pk && a->pk_split && a->ph)
        ln_launch(a->v4 ? k_lattn_out<true, true, true, true, false, true> : k_lattn_out<false, true, true, true, false, true>, G, LA_THREADS, smem, pdl, st, L);
    else if (a->pk && a->pk_split) ln_launch(a->v4 ? k_lattn_out<true, true, true, true> : k_lattn_out<false, true, true, true>, G, LA_THREADS, smem, pdl, st, L);
    else if (a->pk) ln_launch(a->v4 ? k_lattn_out<true, true, true> : k_lattn_out<false, true, true>, G, LA_THREADS, smem, pdl, st, L);
    else if (a->xl) ln_launch(a->v4 ? k_lattn_out<true, true> : k_lattn_out<false, true>, G, LA_THREADS, smem, pdl, st, L);
    else ln_launch(a->v4 ? k_lattn_out<true> : k_lattn_out<false>, G, LA_THREADS, smem, pdl, st, L);
    return 1;
}

size_t lean_attn_pack_bytes(const lean_attn *a) {
    lattn_args L;
    if (!la_plan(a, &L)) return 0;
    return (size_t)L.NH * (L.W.rows / L.R) * lattn_pk_bytes(L.R, L.NLR, 8 * L.tpr);
}

cudaError_t lean_attn_pack(const lean_attn *a, void *pk, cudaStream_t st) {
    lattn_args L;
    if (!la_plan(a, &L) || !pk) return cudaErrorInvalidValue;
    k_lattn_pack<<<L.NH * (L.W.rows / L.R), 256, 0, st>>>(L, (unsigned char *)pk);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? cudaStreamSynchronize(st) : e;
}

/* ---- the router fold's precomputation (at load; not a hot path) */

/* out[r][k] = dequant(W)[r][k] (* g[k] when g): a thread per 16 elements */
__global__ void k_fold_dequant(gmat W, const float *g, float *out) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x, per = W.cols / 16;
    if (i >= (long)W.rows * per) return;
    long r = i / per;
    int k0 = (int)(i % per) * 16;
    float f[16];
    gmat_dequant16(W, r, k0, f);
    for (int e = 0; e < 16; e++) out[r * W.cols + k0 + e] = g ? f[e] * g[k0 + e] : f[e];
}

/* B[i][c] = sum_k A[i][k] W[k][c] (fp32 accumulation, rounded once to BF16): 32 x 32 output tiles,
 * K in steps of 32 through shared memory. A [NL][H], W [H][K]. */
__global__ void k_fold_mm(const float *A, const float *W, __nv_bfloat16 *B, int NL, int H, int K) {
    __shared__ float as[32][33], ws[32][33];
    int tx = threadIdx.x & 31, ty = threadIdx.x >> 5; /* 32 x 8 threads, 4 outputs each */
    int i0 = blockIdx.y * 32, c0 = blockIdx.x * 32;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < H; k0 += 32) {
        for (int r = ty; r < 32; r += 8) {
            as[r][tx] = i0 + r < NL ? A[(size_t)(i0 + r) * H + k0 + tx] : 0.0f;
            ws[r][tx] = W[(size_t)(k0 + r) * K + c0 + tx];
        }
        __syncthreads();
        for (int k = 0; k < 32; k++) {
            float w = ws[k][tx];
            for (int j = 0; j < 4; j++) acc[j] = fmaf(as[ty + 8 * j][k], w, acc[j]);
        }
        __syncthreads();
    }
    for (int j = 0; j < 4; j++)
        if (i0 + ty + 8 * j < NL) B[(size_t)(i0 + ty + 8 * j) * K + c0 + tx] = __float2bfloat16(acc[j]);
}

cudaError_t lean_fold_precompute(void *B, const void *wr, const void *ws, const float *g, int E, int H, const void *wout_gmat,
                                 float *tmp, cudaStream_t st) {
    const gmat &Wo = *(const gmat *)wout_gmat;
    int K = Wo.cols, NL = E + (ws ? 1 : 0);
    if (Wo.rows != H || K % 32 || H % 32) return cudaErrorInvalidValue;
    float *Wf = tmp, *Af = tmp + (size_t)H * K;
    gmat R = {GT_BF16, E, H, (const uint8_t *)wr, NULL, NULL, NULL};
    long n = (long)H * K / 16;
    k_fold_dequant<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(Wo, NULL, Wf);
    n = (long)E * H / 16;
    k_fold_dequant<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(R, g, Af);
    if (ws) {
        gmat S = {GT_BF16, 1, H, (const uint8_t *)ws, NULL, NULL, NULL};
        k_fold_dequant<<<(unsigned)((H / 16 + 255) / 256), 256, 0, st>>>(S, g, Af + (size_t)E * H);
    }
    k_fold_mm<<<dim3(K / 32, (NL + 31) / 32), 256, 0, st>>>(Af, Wf, (__nv_bfloat16 *)B, NL, H, K);
    cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaStreamSynchronize(st);
}
