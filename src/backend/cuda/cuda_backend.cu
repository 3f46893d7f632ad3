/*
 * cuda_backend.cu — the CUDA backend: weight upload/repack, device sessions, and the one forward
 * function per path (decode_step for one token, prefill_chunk for a chunk of tokens) that sequence
 * the kernels of k_*.cuh. Everything the forward needs is allocated when the backend or a sequence
 * is created; nothing is allocated per token.
 *
 * Decode: one CUDA graph per sequence (captured at its first decode), replayed per token. The token
 * id lives on the device: forward() copies it in; cuda_backend_generate() lets the graph's last
 * kernel turn the argmax (fused into the lm_head GEMV) into the next step's input. Per layer:
 * GEMV(qkv|z|b|a or q|k|v, RMSNorm prologue) -> GDN step / attention (prep, split-K, combine) ->
 * GEMV(out, gated-norm prologue, residual add) -> GEMV(router|shared gate) -> MoE gate/up -> MoE
 * down (+ residual). That is 6 (GDN) or 8 (attention) kernels per layer with the per-block-prologue
 * kernels (LILAC_CUDA_QACT=0). The default (issue 6) quantizes each GEMV input once (k_qact, into
 * q1/q2) and runs prologue-free kernels after it (k_gemvq.cuh): k_gemv_q for the GEMVs (fp32 dots for
 * the router), the bulk-copy k_moe_gateup_tma / k_moe_down_tma for the MoE (k_moe_*_q where shapes
 * do not fit), all chained with programmatic dependent launch; the bulk-copy GEMV k_gemv_tma is
 * opt-in (LILAC_CUDA_TMA=1, measured slower).
 *
 * Prefill: chunks of at most max_batch tokens; tensor-core GEMMs with in-tile dequant, a counting
 * sort of (token, slot) pairs by expert and grouped expert GEMMs, the GDN recurrence over the chunk
 * with the state in registers, flash attention over the cache.
 *
 * Weight types on the device: Q4_K, Q6_K, Q8_0 (repacked to structure-of-arrays, see
 * cu_common.cuh), BF16 (F32/F16/BF16 sources). Q4_0 (exactly), Q5_K and MLX4/MLX8 (to 8 bits, lossy
 * ~0.4 % of a block's range) are converted on the host to Q8_0 at load.
 */
extern "C" {
#include "../../base/base.h"
#include "../../model/qwen35.h"
#include "../backend.h"
#include "cuda_backend.h"
}
#include "../../model/qwen35_synth.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "k_attn.cuh"
#include "k_attn_dec.cuh"
#include "k_gdn.cuh"
#include "k_gdn_chunk.cuh"
#include "k_flash2.cuh"
#include "k_gemm.cuh"
#include "k_gemm2.cuh"
#include "k_gemv.cuh"
#include "k_gemvq.cuh"
#include "k_misc.cuh"
#include "k_persist.cuh"
#include "lean.h"

#define LN_TR_MAX 1024
#define LN_TRS_HOST 52 /* LN_TRS of k_lean.cuh */

#define CU_TRY(call)                                                                                      \
    do {                                                                                                  \
        cudaError_t e__ = (call);                                                                         \
        if (e__ != cudaSuccess)                                                                           \
            return ll_err(LL_ERR_DEVICE, "cuda: %s: %s (%s:%d)", #call, cudaGetErrorString(e__), __FILE__, \
                          __LINE__);                                                                      \
    } while (0)

#define GEN_CAP 65536

/* ------------------------------------------------------------------ structures */

struct dlayer {
    float *attn_norm, *ffn_norm;                  /* [H] */
    gmat wq, wk, wv, wo;
    float *q_norm, *k_norm;                       /* [HD] */
    gmat wqkv, wz, wb, wa, wout;
    float *conv, *dt_bias, *ssm_a, *gdn_norm;
    gmat router, shgate;                          /* [E, H], [1, H] */
    gmat egate, eup, edown;                       /* fused experts [E*FF, H], [E*FF, H], [E*H, FF] */
    gmat sgate, sup, sdown;
    int gdn_idx, attn_idx;                        /* index among GDN / attention layers */
    __nv_bfloat16 *fold_B;                        /* GDN layers with the router fold: [E + 1][HV * DV] W_r diag(g_ffn) W_out */
    lean_pack_t pack;                             /* moe_pack: the MoE weights tile-packed (lean_pack), NULLs otherwise */
    unsigned char *cout_pk;                       /* attention layers under cout_pk: k_lattn_out's packed slices
                                                   * (lean_attn_pack), NULL otherwise */
    size_t cout_pk_bytes;                         /* their size */
};

#define PROF_MAX 2048 /* kernels recorded per profiled step (a 40-layer prefill chunk launches ~1,000) */
struct prof_ctx {
    int on;
    cudaEvent_t ev[2 * PROF_MAX];
    const char *name[PROF_MAX];
    double bytes[PROF_MAX], flops[PROF_MAX];
    int n;
};

struct cu_seq {
    int n_ctx, pos;                               /* host mirror of the position */
    int *d_pos;
    __nv_bfloat16 *kv;                            /* [n_attn][2][NKV][n_ctx][HD] (kv_q8: rows of kv_row_bytes bytes) */
    float *S;                                     /* [1 + gdn_db][n_gdn][HV][DK][DV]: the state after n tokens is
                                                   * copy n & 1 where double-buffered (gdn_state_copy), else copy 0 */
    float *ring;                                  /* [n_gdn][4][CD] */
    float *part_o, *part_ml;                      /* [max_splits][NH][HD], [max_splits][NH][2] */
    int CH, max_splits;
    cudaGraphExec_t graph;
    cudaGraphExec_t graph_k;                      /* graph_steps decode steps in one graph (generate; NULL: none) */
    pk_params *pk;                                /* the persistent decode kernel's parameters (host; passed by value) */
    size_t bytes;
};

struct cu_backend {
    ll_backend base;
    const qwen_model *m;
    qwen_hparams hp;
    int dev, nsm, cc_major;
    char devname[256];
    cudaStream_t st;
    gmat tok_embd, lm_head;
    float *out_norm;
    float *inv_freq;
    float *rope_cs;                       /* [n_rot/2][2] the decode step's RoPE cos / sin (k_embed; NULL: LILAC_CUDA_ROPE_CS=0) */
    dlayer L[QWEN_MAX_LAYERS];
    int n_gdn, n_attn;
    double weight_bytes, decode_bytes;
    double moe_gu_bytes, moe_d_bytes;     /* per-layer bytes, for the profile */
    int no_prefetch;                      /* 1 (default): the plain GEMV/MoE kernels; LILAC_CUDA_PREFETCH=1: the _pf ones */
    int pdl;                              /* programmatic dependent launch (LILAC_CUDA_PDL=0 turns it off) */
    int pdl_off;                          /* a race hunt's mask: PDL off for one family of launches only
                                           * (LILAC_CUDA_PDL_OFF, PDLK_*; session 35, diagnostic) */
    int qmode;                            /* 1 (default): q8 activation written once by k_qact, prologue-free
                                           * k_gemv_q / k_moe_*_q (LILAC_CUDA_QACT=0: the per-block prologue kernels) */
    int gq_rb;                            /* k_gemv_q rows per warp batch (LILAC_CUDA_GQ_RB: 1, 2, 4) */
    qbuf q1, q2;
    int tma, tma_kb, tma_st, tma_self;              /* bulk-copy GEMV (LILAC_CUDA_TMA=1 on), tile KB, stages, self-quantizing */
    int fuse_hq;                          /* MoE gate/up writes the q8 of h (no k_qact before down) */
    int fd_ns;                            /* splits of the flash-decoding attention kernel (0: the older kernel) */
    int lean;                             /* 1 (default on sm_90+): the lean decode kernels (lean.cu); LILAC_CUDA_LEAN=0 off */
    unsigned long long *ln_tr;            /* LILAC_CUDA_LN_TRACE=1: [LN_TR_MAX][LN_TRS_HOST] trace records of a step */
    const char *ln_names[LN_TR_MAX];
    int fd_xs;                            /* flash-decoding (fused, 8-head blocks): one block per kv head takes the appended
                                           * position alone (attn_dec_args.xs; default since session 17; LILAC_CUDA_FD_XS=0 off) */
    int fd_minpos;                        /* flash-decoding: fewest positions per split (LILAC_CUDA_FD_MINPOS; default 0: every split, 64 measured no faster) */
    int fuse;                             /* the fused MoE kernel (k_fused.cuh: router .. down + the next layer's projection in one launch; default, LILAC_CUDA_FUSE=0 off) */
    unsigned long long *fz_bar;           /* its grid barrier counter (device) */
    int fd_fg;                            /* query heads per flash-decoding block: 8 (default) or 4 (LILAC_CUDA_FD_FG=4: fits next to the projection before it) */
    int fd_mma;                           /* flash-decoding with the tensor-core loop (HD 256, 8 heads per kv head; LILAC_CUDA_FD_MMA=0: the per-position loop) */
    int cout_r;                           /* att_cout: W_o rows per cout block (LILAC_CUDA_COUT_R = 128, 256 or 512;
                                           * 0 the plan's own, 256 on the 35B: 8 blocks a head), session 33, opt-in */
    int fd_ph;                            /* LILAC_CUDA_FD_PH=1 (session 33, opt-in, not yet run): flash decoding stores its
                                           * partials as FP16 o / l where the two-copy cout form reads them
                                           * (k_attn_decode_fd<.., PH>, k_lattn_out<.., PH>): half the merge's loads */
    int comb_nd;                          /* the attention combine's dims per block (LILAC_CUDA_COMB_ND: 32 default: twice the
                                           * blocks of half the threads, +2.3 tok/s at 4K, session 19; 64 as before) */
    int fd_nsdiv;                         /* with fd_fg 4: splits = the 8-head blocks' / fd_nsdiv (LILAC_CUDA_FD_NSDIV, default 2) */
    int cout_cl;                          /* cout_pk: a head's blocks as one cluster sharing the merge's partial loads
                                           * (LILAC_CUDA_COUT_CL=1, session 32, opt-in, not yet run) */
    int pf_cout;                          /* and the next attention layer's packed cout slices (LILAC_CUDA_PF_COUT=1,
                                           * session 32, opt-in) */
    int pfnext;                           /* the MoE down prefetches the next input projection into L2: 0 off, 1 after its wait, 2 at entry (default) */
    int gdn_fuse;                         /* GDN step + out-projection in one launch (k_lgdn.cuh; default; LILAC_CUDA_GDN_FUSE=0 off,
                                           * 2: the heads' shares by fp32 atomics, not reproducible) */
    int gdn_pre;                          /* k_lgdn: 1 W slice, 2 state, 4 state into L2, 8 the fold's B slice requested before
                                           * the wait (LILAC_CUDA_GDN_PRE; default 11 since session 15: 586.4-590.0 tok/s vs
                                           * 581.8-583.5 for 9 and 587.8 for 15 at 4K, bench/results/2026-12-02-h200-s15; session 8
                                           * had measured the state before the wait slower, 543.8 vs 546.6, before the fold) */
    float *gdn_part;                      /* k_lgdn: [HV][lean_gdn_part_floats / HV] the heads' shares of the output
                                           * projection (and of the router logits with the fold) */
    int gdn_fold;                         /* the MoE router folded into the layer's mixer (lean.h lean_fold), one launch
                                           * fewer per layer: LILAC_CUDA_FOLD bits 1 GDN layers (k_lgdn), 2 attention
                                           * layers (the combine and the out-projection); default 1. Measured
                                           * (bench/results/2026-11-30-h200-s9, call 12): =1 578.6 / 579.0 tok/s vs
                                           * 574.9 / 574.7 without, =2 557.5 / 557.7; =1 holds 63 MB more weights
                                           * (B); session 10 made it the default (bench/results/2026-12-01-h200-s10) */
    float *x2;                            /* [H] the other residual buffer (the fold writes x_new beside x_old) */
    float *moe_w;                         /* [k + 1] routing weights gate/up hands to down with the fold */
    unsigned *gdn_cnt;                    /* k_lgdn: arrival counters (LG_MAX_PARTS; zeroed once) */
    unsigned *gdn_hc;                     /* k_lgdn: the state barrier's arrivals per head (LG_MAX_HEADS; zeroed once) */
    int gdn_atom;                         /* the GDN fold's shares by fp32 atomics, no ordered tail (k_lgdn<true, 1 | 2>;
                                           * opt-in LILAC_CUDA_GDN_ATOM=1 (2: four rows per reduction), never with
                                           * --deterministic; session 25,
                                           * written without a device, not yet measured) */
    float *gdn_xl, *gdn_rl;               /* gdn_atom: each GDN layer's residual [n_gdn][H] and raw router logits
                                           * [n_gdn][E + 1], zeros when its launch starts (zeroed at load, then by the
                                           * GDN launch before it, cyclically) */
    int moe_pack;                         /* the MoE weights also tile-packed, one bulk copy per stage (gate/up) or
                                           * slot (down) instead of one per plane (lean_pack): LILAC_CUDA_MOE_PACK, a
                                           * mask: 1 gate/up, 2 the down, 0 off (the default: no measured gain);
                                           * "auto": 1 where max(4 GiB, 1/8 of the card) stays free (session 29; extra
                                           * memory, ~12 GB on the 35B: the planes stay for prefill); same bits */
    int att_cout;                         /* the attention layers' combine + out-projection + router fold as one launch
                                           * split by head, atomics into zeroed buffers (k_lattn.cuh, lean_attn_out):
                                           * LILAC_CUDA_ATT_COUT=1 the default since session 29 (+7..8 tok/s on an H100;
                                           * 0 off, 2: four-float reductions), never with --deterministic */
    int cout_xl;                          /* att_cout: the router's x_old term after the wait, its operands (and the
                                           * gate) by cp.async, so nothing but requests precedes the wait
                                           * (LILAC_CUDA_COUT_XL; k_lattn_out<V4, true>; session 31) */
    int cout_pk;                          /* att_cout: W_o's, B's and the router rows' slices packed at load per block
                                           * (dlayer.cout_pk, ~7 MB per attention layer) and requested by one bulk copy
                                           * (LILAC_CUDA_COUT_PACK, default -1: where memory allows as 2, two bulk copies
                                           * per block on two barriers (k_lattn_out<V4, true, true, true>; session 32,
                                           * the default since session 33), 1 forced as one copy (k_lattn_out<V4, true,
                                           * true>; session 31, the default in session 32), 2 forced, 0 off) */
    int gdn_in;                           /* GDN layers with the input projection inside the fused GDN launch (k_lgdn<true,
                                           * ATOM, true>: clusters of 8 blocks per k-head exchange the projection's
                                           * outputs through distributed shared memory): opt-in LILAC_CUDA_GDN_IN=1, only
                                           * with gdn_atom; cu_init counts the layers that take it (0: off). Session 30,
                                           * written without a device, not yet run */
    int gdn_in_nst;                       /* its ring stages (LILAC_CUDA_GDN_IN_NST, 0: lean_gdn's default) */
    int gdn_in_wpre;                      /* its W_out / B slices before the wait in their own place (LILAC_CUDA_GDN_IN_WPRE=1) */
    int step_pdl;                         /* the decode step's k_finish (after the lm head) and, inside a multi-step graph,
                                           * the next step's k_embed launched with PDL (LILAC_CUDA_STEP_PDL=1; session 30,
                                           * not yet measured; the same bits) */
    int graph_steps;                      /* decode steps per graph launch in generate (LILAC_CUDA_GRAPH_STEPS, 1..64;
                                           * default 1): K steps captured back to back in one graph, so that K - 1 of
                                           * every K step boundaries are kernel boundaries inside a graph instead of a
                                           * graph's end and the next one's start (session 30, not yet measured: a
                                           * traced step's first entry to last done was ~48 µs shorter than the
                                           * untraced time per token, session 26 call 4) */
    float *att_xl, *att_rl;               /* att_cout: each attention layer's residual [n_attn][H] and raw logits
                                           * [n_attn][E + 1], zeros when its launch starts (zeroed at load, then by
                                           * the attention launch before it, cyclically) */
    int moe_sk;                           /* the decode MoE as one launch split by K (k_lmoe_sk.cuh, lean_moe_sk): opt-in
                                           * LILAC_CUDA_MOE_SK=1, never with --deterministic; session 26, written
                                           * without a device, not yet measured. After load: 1 only where the
                                           * kernel takes the model's MoE shapes */
    size_t sk_cap;                        /* its dynamic shared memory per block at most (LILAC_CUDA_MOE_SK_SMEM, KB; 0: 220) */
    unsigned long long *sk_ctr;           /* its grid-wide counters, layer l's at sk_ctr[16 l] (zero at load, never reset) */
    int fd_fused;                         /* flash-decoding with the q/k norm + RoPE + cache append fused in (default; LILAC_CUDA_ATTN_FUSED=0) */
    int lean_head;                        /* the lm head through k_lgemv too (default; 27 KB Q6_K stages: 146 vs 172 µs for k_gemv_q, LILAC_CUDA_LEAN_HEAD=0) */
    int ln_n, ln_steps, ln_print_at;      /* trace: records used, graphed steps, LILAC_CUDA_LN_TRACE=N prints after step N */
    int moe_tma, moe_tr;                  /* bulk-copy MoE kernels (LILAC_CUDA_MOE_TMA=0 off), rows per tile */                          /* decode: quantized activations [Kmax] (two, alternating, see decode_step) */
    size_t alloc_bytes, mem_peak;
    void **allocs; size_t n_allocs, cap_allocs;
    /* host-resident weights (pinned, mapped: kernels read them over PCIe). The token embedding
     * table (decode reads one row per token) lives here unless LILAC_CUDA_EMBED_DEVICE=1: it is
     * 0.29 GB of the 35B model's device budget that decode never streams. */
    int alloc_host, embd_host;
    void **hallocs; size_t n_hallocs, cap_hallocs;
    size_t host_bytes;
    /* memory accounting for `lilac bench` (bytes): weights on the device, scratch, live sequences */
    size_t wdev_bytes, scratch_bytes, seq_bytes, seq_bytes_peak;
    int flash2;                           /* 1 (default): k_flash2_prefill (mma.sync, GQA-packed); LILAC_CUDA_FLASH2=0: WMMA k_flash_prefill */
    int kv_want;                          /* ll_backend_params.kv_q8 or LILAC_CUDA_KV: 1 q8, -1 bf16, 0 auto (resolved into kv_q8 by cu_init) */
    int kv_q8;                            /* the KV cache in q8 rows (k_attn.cuh; ll_backend_params.kv_q8 or LILAC_CUDA_KV=q8):
                                           * half the memory and the bytes a long-context decode step reads */
    int gdn_prep_mb;                      /* k_gdn_chunk_prep register cap (LILAC_CUDA_GDN_PREP_MB: 2 default, 1) */
    int gdn_prep_ti;                      /* where DV == DK, k_gdn_chunk_prep's TI form: T = (I + A)^-1 once per chunk then
                                           * T R (session 38: lab 0.516 -> 0.426 ms per layer at T = 4096 on an H100, no
                                           * spills); 2 (the default since session 39) also K K^T and Q K^T by mma.sync in
                                           * 3xTF32 (lab 0.435 -> 0.404 ms; 4K prefill +0.35..0.5 %, 3 of 3 rounds on an
                                           * H100); LILAC_CUDA_GDN_PREP=ti: 1, the Gram matrices in fp32 FMAs; =sub: 0, the
                                           * substitution per column */
    int moe_det;                          /* deterministic prefill MoE down: 1 in 64-bit fixed point (opt-in: LILAC_CUDA_MOE_DET=1,
                                           * ll_backend_params.deterministic), 2 sorted rows + an ordered sum (LILAC_CUDA_MOE_DET=2) */
    int gemm_bm, gemm_mb, gemm_red4;      /* prefill GEMM row tile (LILAC_CUDA_GEMM_BM=64: never 128) and vector
                                           * atomics in the MoE down scatter (LILAC_CUDA_GEMM_RED4) */
    int gemm2;                            /* LILAC_CUDA_GEMM2: 1 prefill GEMMs by k_gemm2 where it applies, 2 (default) without 256-row tiles, 0 k_gemm */
    int gemm_glu;                         /* LILAC_CUDA_GLU: MoE gate and up (routed and shared) as one k_gemm2 GM_GLU GEMM */
    int gdn_chunk;                        /* 1 (default): chunked GDN prefill (k_gdn_chunk.cuh);
                                           * LILAC_CUDA_GDN_CHUNK=0: the token-serial k_gdn_step */
    int gdn_scan_tc;                      /* 2 (default): the chunked scan on tensor cores in 3xTF32, q and k scaled at
                                           * fragment load (GTC_LS: lab 0.692 -> 0.524 ms per layer, the same bits);
                                           * LILAC_CUDA_GDN_SCAN=tc-early: 1, scaled in the fetch (k_gdn_chunk_scan_tc,
                                           * session 38: 1.42x the fp32 scan in the lab, 4K prefill +5.0 % in the engine on
                                           * an H100, the GPU tests' distances to the fp32 reference unchanged);
                                           * LILAC_CUDA_GDN_SCAN=fp32: k_gdn_chunk_scan */
    int eager_graph;                      /* 1 (default): a sequence's decode graph is captured while its first prefill chunk
                                           * runs on the device (LILAC_CUDA_EAGER_GRAPH=0: at its first decode step) */
    double graph_s;                       /* host seconds spent capturing + instantiating decode graphs, and how many */
    int graph_n;
    int gdn_db;                           /* 1 (default): the GDN states double-buffered (k_gdn.cuh gdn_state_copy; +63 MB a
                                           * sequence on the 35B, k_lgdn without its state barrier, session 36);
                                           * LILAC_CUDA_GDN_DB=0: one copy updated in place */
    /* decode scratch */
    float *x, *qkv, *z, *ab, *o, *qg, *kb, *vb, *q, *att, *rl, *h, *logits;
    int *d_tok, *d_gen, *d_gen_n;
    unsigned long long *d_argmax;
    int *h_tok;                                   /* pinned [1] */
    /* prefill scratch, for chunks of up to TB tokens */
    int TB;
    int *d_tokens, *h_tokens;                     /* [TB] (h_ pinned) */
    float *X, *P1, *P2, *P3, *P4, *RL, *wts, *Gb;
    float *GW;                                    /* chunked GDN: P, fq, fk, lam (W and U live in P1) */
    __nv_bfloat16 *Xb, *Ob, *Qb, *Hb, *Hs;
    int *ids, *cnt, *cursor, *perm, *tile_e, *tile_m0, *tile_mn, *n_tiles;
    float *moe_y;                         /* moe_det 2: the MoE down's rows in sorted order [T * K][H] */
    int *moe_inv;                         /* moe_det 2: sorted row of each (token, slot) [T * K] */
    prof_ctx prof;
    /* persistent decode kernel (k_persist.cuh; LILAC_CUDA_PERSIST=0: the per-kernel decode_step) */
    int persist, pk_grid, pk_minb, pk_empty;  /* pk_minb: blocks per SM; pk_empty: LILAC_CUDA_PK_EMPTY=1, barriers only (a diagnostic) */
    size_t pk_smem;
    int pk_ring_off, pk_nst, pk_stage;            /* weight ring: offset in dynamic smem, stages, bytes per stage */
    pk_layer *d_pk_layers;                        /* [n_layer] */
    unsigned *d_pk_bar;                           /* [64]: counter, epoch, released target at [32] */
    int *d_pk_err, *h_pk_err;                     /* barrier timeout flag (h_: pinned mirror) */
    pk_params *pk_prof;                           /* the profiling copy of the parameters (host) */
    unsigned long long *d_pk_ts;                  /* [4][PK_TS] globaltimer stamps (pk_params.prof) */
};

/* ------------------------------------------------------------------ allocation */

static ll_status dev_alloc(cu_backend *b, void **p, size_t n) {
    *p = NULL;
    if (n == 0) n = 16;
    if (b->alloc_host) {
        /* mapped pinned memory: with unified addressing the host pointer is valid in kernels */
        cudaError_t e = cudaHostAlloc(p, n, cudaHostAllocMapped);
        if (e != cudaSuccess) { *p = NULL; return ll_err(LL_ERR_OOM, "cuda: cudaHostAlloc(%zu bytes): %s", n, cudaGetErrorString(e)); }
        if (b->n_hallocs == b->cap_hallocs) {
            size_t nc = b->cap_hallocs ? 2 * b->cap_hallocs : 16;
            void **na = (void **)ll_realloc(b->hallocs, nc * sizeof(void *));
            if (!na) { cudaFreeHost(*p); *p = NULL; return ll_err(LL_ERR_OOM, "cuda: out of host memory"); }
            b->hallocs = na;
            b->cap_hallocs = nc;
        }
        b->hallocs[b->n_hallocs++] = *p;
        b->host_bytes += n;
        return LL_OK;
    }
    cudaError_t e = cudaMalloc(p, n);
    if (e != cudaSuccess) {
        *p = NULL;
        return ll_err(LL_ERR_OOM, "cuda: cudaMalloc(%zu bytes): %s", n, cudaGetErrorString(e));
    }
    if (b->n_allocs == b->cap_allocs) {
        size_t nc = b->cap_allocs ? 2 * b->cap_allocs : 1024;
        void **na = (void **)ll_realloc(b->allocs, nc * sizeof(void *));
        if (!na) { cudaFree(*p); *p = NULL; return ll_err(LL_ERR_OOM, "cuda: out of host memory"); }
        b->allocs = na;
        b->cap_allocs = nc;
    }
    b->allocs[b->n_allocs++] = *p;
    b->alloc_bytes += n;
    size_t fr, tot;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot - fr > b->mem_peak) b->mem_peak = tot - fr;
    return LL_OK;
}
#define DALLOC(b, ptr, n) LL_TRY(dev_alloc((b), (void **)&(ptr), (n)))

/* ------------------------------------------------------------------ host conversions */

static void host_dequant_block(ll_type t, const uint8_t *src, float *y) {
    switch (t) {
    case LL_TYPE_Q4_0: {
        float d = ll_f16_to_f32((uint16_t)(src[0] | (src[1] << 8)));
        for (int j = 0; j < 16; j++) {
            y[j] = ((src[2 + j] & 15) - 8) * d;
            y[j + 16] = ((src[2 + j] >> 4) - 8) * d;
        }
        break;
    }
    case LL_TYPE_Q5_K: {
        const ll_block_q5_K *bk = (const ll_block_q5_K *)src;
        float d = ll_f16_to_f32(bk->d), dmin = ll_f16_to_f32(bk->dmin);
        const uint8_t *ql = bk->qs, *q = bk->scales;
        int is = 0;
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 256; j += 64) {
            int sc[2], mn[2];
            for (int k = 0; k < 2; k++) {
                int s = is + k;
                if (s < 4) { sc[k] = q[s] & 63; mn[k] = q[s + 4] & 63; }
                else { sc[k] = (q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4); mn[k] = (q[s + 4] >> 4) | ((q[s] >> 6) << 4); }
            }
            for (int l = 0; l < 32; l++) y[j + l] = d * sc[0] * ((ql[l] & 0xF) + (bk->qh[l] & u1 ? 16 : 0)) - dmin * mn[0];
            for (int l = 0; l < 32; l++) y[j + 32 + l] = d * sc[1] * ((ql[l] >> 4) + (bk->qh[l] & u2 ? 16 : 0)) - dmin * mn[1];
            ql += 32; is += 2; u1 <<= 2; u2 <<= 2;
        }
        break;
    }
    case LL_TYPE_MLX4: {
        const ll_block_mlx4 *bk = (const ll_block_mlx4 *)src;
        float s = ll_bf16_to_f32(bk->scale), bi = ll_bf16_to_f32(bk->bias);
        for (int j = 0; j < 32; j++) { y[2 * j] = s * (bk->qs[j] & 15) + bi; y[2 * j + 1] = s * (bk->qs[j] >> 4) + bi; }
        break;
    }
    case LL_TYPE_MLX8: {
        const ll_block_mlx8 *bk = (const ll_block_mlx8 *)src;
        float s = ll_bf16_to_f32(bk->scale), bi = ll_bf16_to_f32(bk->bias);
        for (int j = 0; j < 64; j++) y[j] = s * bk->qs[j] + bi;
        break;
    }
    default: LL_ABORT("host_dequant_block: type %d", (int)t);
    }
}

/* One row (n elements) of any host type to fp32. */
static void host_row_to_f32(ll_type t, const uint8_t *src, float *y, int64_t n) {
    if (t == LL_TYPE_F32) { memcpy(y, src, (size_t)n * 4); return; }
    if (t == LL_TYPE_F16) { for (int64_t i = 0; i < n; i++) y[i] = ll_f16_to_f32(((const uint16_t *)src)[i]); return; }
    if (t == LL_TYPE_BF16) { for (int64_t i = 0; i < n; i++) y[i] = ll_bf16_to_f32(((const uint16_t *)src)[i]); return; }
    int64_t be = quant_block_elems(t);
    size_t bb = quant_block_bytes(t);
    for (int64_t i = 0; i < n / be; i++) host_dequant_block(t, src + i * bb, y + i * be);
}

/* ------------------------------------------------------------------ weight upload */

/* Uploads n_views views (each [rows, cols], same type) as one stacked device matrix. */
static ll_status upload_mat(cu_backend *b, const ll_mat *views, int n_views, int lazy, uint64_t seed, gmat *out) {
    const ll_mat *m0 = &views[0];
    ll_type t = m0->type;
    int64_t rows = m0->rows, cols = m0->cols, R = rows * n_views;
    for (int v = 1; v < n_views; v++)
        if (views[v].type != t || views[v].rows != rows || views[v].cols != cols)
            return ll_err(LL_ERR_UNSUPPORTED, "cuda: %s: expert %d has type %s / shape [%lld, %lld], expert 0 %s [%lld, %lld]",
                          m0->name ? m0->name : "?", v, quant_type_name(views[v].type), (long long)views[v].rows,
                          (long long)views[v].cols, quant_type_name(t), (long long)rows, (long long)cols);
    *out = gmat{};
    out->rows = (int)R;
    out->cols = (int)cols;
    const char *nm = m0->name ? m0->name : "?";
    int is_k = t == LL_TYPE_Q4_K || t == LL_TYPE_Q6_K;
    if (is_k && cols % 256) return ll_err(LL_ERR_UNSUPPORTED, "cuda: %s: %s needs cols %% 256 == 0", nm, quant_type_name(t));
    if (cols % 32) return ll_err(LL_ERR_UNSUPPORTED, "cuda: %s: cols %lld not a multiple of 32", nm, (long long)cols);
    if (lazy && !m0->data && !is_k) return ll_err(LL_ERR_INVALID, "cuda: %s: lazy synthetic matrix of type %s", nm, quant_type_name(t));
    size_t rb = quant_row_bytes(t, cols);
    if (t == LL_TYPE_Q4_K || t == LL_TYPE_Q6_K || t == LL_TYPE_Q8_0) {
        long nblk_row = (long)(rb / quant_block_bytes(t));
        long NB = (long)R * nblk_row;
        if (t == LL_TYPE_Q4_K) {
            out->type = GT_Q4_K;
            DALLOC(b, out->sc, (size_t)NB * 16);
            DALLOC(b, out->q, (size_t)NB * 128);
        } else if (t == LL_TYPE_Q6_K) {
            out->type = GT_Q6_K;
            DALLOC(b, out->q, (size_t)NB * 128);
            DALLOC(b, out->qh, (size_t)NB * 64);
            DALLOC(b, out->sc, (size_t)NB * 16);
            DALLOC(b, out->d, (size_t)NB * 2);
        } else {
            out->type = GT_Q8_0;
            DALLOC(b, out->q, (size_t)NB * 32);
            DALLOC(b, out->d, (size_t)NB * 2);
        }
        size_t bb = quant_block_bytes(t);
        long chunk = (64l << 20) / (long)bb; /* blocks per staging pass */
        uint8_t *stage = NULL;
        CU_TRY(cudaMalloc(&stage, (size_t)chunk * bb));
        ll_status st = LL_OK;
        uint64_t key = m0->name ? qsyn_key(m0->name) : 0;
        for (long b0 = 0; b0 < NB && st == LL_OK; b0 += chunk) {
            long n = NB - b0 < chunk ? NB - b0 : chunk;
            cudaError_t e = cudaSuccess;
            if (!m0->data) {
                k_synth_blocks<<<(unsigned)((n + 127) / 128), 128, 0, b->st>>>((int)t, seed, key, b0, n, stage, (int)bb);
            } else {
                /* copy the n blocks, row by row through the views (a view's rows are contiguous) */
                long done = 0;
                while (done < n && e == cudaSuccess) {
                    long gb = b0 + done, row = gb / nblk_row, inrow = gb % nblk_row;
                    int v = (int)(row / rows);
                    long vr = row % rows;
                    long avail_rows_blocks = (rows - vr) * nblk_row - inrow; /* blocks left in this view */
                    long take = n - done < avail_rows_blocks ? n - done : avail_rows_blocks;
                    const uint8_t *src = views[v].data + (size_t)vr * views[v].row_bytes + (size_t)inrow * bb;
                    e = cudaMemcpyAsync(stage + done * bb, src, (size_t)take * bb, cudaMemcpyHostToDevice, b->st);
                    done += take;
                }
            }
            if (e == cudaSuccess) {
                unsigned g = (unsigned)((n + 127) / 128);
                if (t == LL_TYPE_Q4_K) k_repack_q4k<<<g, 128, 0, b->st>>>(stage, n, (uint8_t *)out->sc + b0 * 16, (uint8_t *)out->q + b0 * 128);
                else if (t == LL_TYPE_Q6_K)
                    k_repack_q6k<<<g, 128, 0, b->st>>>(stage, n, (uint8_t *)out->q + b0 * 128, (uint8_t *)out->qh + b0 * 64,
                                                       (uint8_t *)out->sc + b0 * 16, (__half *)out->d + b0);
                else k_repack_q8_0<<<g, 128, 0, b->st>>>(stage, n, (uint8_t *)out->q + b0 * 32, (__half *)out->d + b0);
                e = cudaStreamSynchronize(b->st);
                if (e == cudaSuccess) e = cudaGetLastError();
            }
            if (e != cudaSuccess) st = ll_err(LL_ERR_DEVICE, "cuda: uploading %s: %s", nm, cudaGetErrorString(e));
        }
        cudaFree(stage);
        if (st != LL_OK) return st;
        b->weight_bytes += (double)NB * bb;
        return LL_OK;
    }
    if (!m0->data) return ll_err(LL_ERR_INVALID, "cuda: %s: no data", nm);
    int to_q8 = !(t == LL_TYPE_F32 || t == LL_TYPE_F16 || t == LL_TYPE_BF16);
    if (to_q8 && !(t == LL_TYPE_Q4_0 || t == LL_TYPE_Q5_K || t == LL_TYPE_MLX4 || t == LL_TYPE_MLX8))
        return ll_err(LL_ERR_UNSUPPORTED, "cuda: %s: weight type %s not supported", nm, quant_type_name(t));
    float *f = (float *)ll_malloc((size_t)cols * 4);
    size_t orb = to_q8 ? (size_t)cols / 32 * 34 : (size_t)cols * 2;
    uint8_t *hrow = (uint8_t *)ll_malloc(orb * 64);
    uint8_t *stage = NULL;
    ll_status st = LL_OK;
    if (!f || !hrow) st = ll_err(LL_ERR_OOM, "cuda: %s: out of host memory", nm);
    if (st == LL_OK && cudaMalloc(&stage, orb * 64) != cudaSuccess) st = ll_err(LL_ERR_OOM, "cuda: %s: staging", nm);
    if (st == LL_OK) {
        if (to_q8) {
            out->type = GT_Q8_0;
            st = dev_alloc(b, (void **)&out->q, (size_t)R * cols);
            if (st == LL_OK) st = dev_alloc(b, (void **)&out->d, (size_t)R * cols / 32 * 2);
        } else {
            out->type = GT_BF16;
            st = dev_alloc(b, (void **)&out->q, (size_t)R * cols * 2);
        }
    }
    for (int64_t r0 = 0; r0 < R && st == LL_OK; r0 += 64) {
        int64_t nr = R - r0 < 64 ? R - r0 : 64;
        for (int64_t i = 0; i < nr; i++) {
            int64_t r = r0 + i;
            const ll_mat *v = &views[r / rows];
            host_row_to_f32(t, ll_mat_row(v, r % rows), f, cols);
            uint8_t *o = hrow + i * orb;
            if (to_q8) {
                for (int64_t k = 0; k < cols / 32; k++) {
                    float amax = 0;
                    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(f[32 * k + j]));
                    float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
                    uint16_t dh = ll_f32_to_f16(d);
                    o[34 * k] = (uint8_t)dh; o[34 * k + 1] = (uint8_t)(dh >> 8);
                    for (int j = 0; j < 32; j++) o[34 * k + 2 + j] = (uint8_t)(int8_t)lrintf(f[32 * k + j] * id);
                }
            } else {
                for (int64_t k = 0; k < cols; k++) ((uint16_t *)o)[k] = ll_f32_to_bf16(f[k]);
            }
        }
        cudaError_t e = cudaMemcpy(stage, hrow, orb * nr, cudaMemcpyHostToDevice);
        if (e == cudaSuccess) {
            if (to_q8) {
                long nb = (long)nr * cols / 32;
                k_repack_q8_0<<<(unsigned)((nb + 127) / 128), 128, 0, b->st>>>(stage, nb, (uint8_t *)out->q + r0 * cols,
                                                                                 (__half *)out->d + r0 * cols / 32);
                e = cudaStreamSynchronize(b->st);
            } else {
                e = cudaMemcpy((uint8_t *)out->q + r0 * cols * 2, stage, orb * nr, cudaMemcpyDefault); /* dst may be host-mapped */
            }
        }
        if (e != cudaSuccess) st = ll_err(LL_ERR_DEVICE, "cuda: uploading %s: %s", nm, cudaGetErrorString(e));
    }
    if (stage) cudaFree(stage);
    ll_free(f);
    ll_free(hrow);
    if (st == LL_OK) b->weight_bytes += (double)R * (to_q8 ? (double)cols / 32 * 34 : (double)cols * 2);
    return st;
}

static double gmat_bytes(const gmat &g) {
    double n = (double)g.rows * g.cols;
    switch (g.type) {
    case GT_Q4_K: return n / 256 * 144;
    case GT_Q6_K: return n / 256 * 210;
    case GT_Q8_0: return n / 32 * 34;
    default: return n * 2;
    }
}

static ll_status upload_f32(cu_backend *b, const float *src, size_t n, float **out, const char *what) {
    if (!src) return ll_err(LL_ERR_INVALID, "cuda: %s missing", what);
    DALLOC(b, *out, n * 4);
    CU_TRY(cudaMemcpy(*out, src, n * 4, cudaMemcpyHostToDevice));
    return LL_OK;
}

/* ------------------------------------------------------------------ launch helpers */

static void prof_begin(cu_backend *b) {
    if (b->prof.on && b->prof.n < PROF_MAX) cudaEventRecord(b->prof.ev[2 * b->prof.n], b->st);
}
static void prof_end(cu_backend *b, const char *name, double bytes, double flops) {
    if (b->prof.on && b->prof.n < PROF_MAX) {
        cudaEventRecord(b->prof.ev[2 * b->prof.n + 1], b->st);
        b->prof.name[b->prof.n] = name;
        b->prof.bytes[b->prof.n] = bytes;
        b->prof.flops[b->prof.n] = flops;
        b->prof.n++;
    }
}

/* Families of decode launches for LILAC_CUDA_PDL_OFF (a bit mask): PDL off for one family shows whether
 * its kernels' pre-wait parts take part in a race (a kernel launched without PDL starts only once its
 * predecessor has finished). */
enum {
    PDLK_PLAIN = 1, /* launch_pdl: attention decode, norms, embedding, k_finish */
    PDLK_GEMV = 2,  /* lean_gemv: the projections, the lm head */
    PDLK_GDN = 4,   /* lean_gdn: the fused GDN step + out-projection */
    PDLK_COUT = 8,  /* lean_attn_out: the attention out-projection */
    PDLK_MOE = 16,  /* lean_moe / _fused / _sk: the MoE */
};
static int pdl_for(const cu_backend *b, int family) { return b->pdl && !(b->pdl_off & family); }

/* Launch with programmatic dependent launch allowed (when b->pdl): the kernel must call pdl_wait()
 * before touching activations. */
template <typename... KArgs, typename... Args>
static void launch_pdl(cu_backend *b, void (*kern)(KArgs...), dim3 grid, dim3 block, size_t smem, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = b->st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl_for(b, PDLK_PLAIN) ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kern, args...);
}

/* Calls fn<type, NU>(...) with NU the smallest of 1, 2, 4 that holds nu units per lane. */
#define GT_NU_CASE(T, nu, fn, ...)                                                          \
    do {                                                                                    \
        if ((nu) <= 1) fn<T, 1>(__VA_ARGS__);                                               \
        else if ((nu) <= 2) fn<T, 2>(__VA_ARGS__);                                          \
        else fn<T, 4>(__VA_ARGS__);                                                         \
    } while (0)
#define GT_NU_DISPATCH(t, nu, fn, ...)                                                      \
    switch (t) {                                                                            \
    case GT_Q4_K: GT_NU_CASE(GT_Q4_K, nu, fn, __VA_ARGS__); break;                          \
    case GT_Q6_K: GT_NU_CASE(GT_Q6_K, nu, fn, __VA_ARGS__); break;                          \
    case GT_Q8_0: GT_NU_CASE(GT_Q8_0, nu, fn, __VA_ARGS__); break;                          \
    default: GT_NU_CASE(GT_BF16, nu, fn, __VA_ARGS__); break;                               \
    }

/* Rows per batch: about 8 units (4 for the wider Q6_K / BF16 units) of loads in flight per lane. */
template <int WT, int NU> struct gemv_rb { static const int v = (WT == GT_Q4_K || WT == GT_Q8_0) ? (8 / NU) : (4 / NU > 0 ? 4 / NU : 1); };

template <int WT, int NU> static void gemv_pf_launch(cu_backend *b, const gemv_args &a, size_t smem) {
    constexpr int RB = gemv_rb<WT, NU>::v;
    int occ = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_pf<WT, NU, RB>, GEMV_THREADS, smem);
    if (occ < 1) occ = 1;
    int rpw = 32 / gemv_lanes(a.K), per_block = (GEMV_THREADS / 32) * rpw * RB;
    int need = (a.total_rows + per_block - 1) / per_block;
    int threads = GEMV_THREADS;
    if (need < b->nsm) { /* small matrix (router, shared gate): smaller blocks spread over more SMs */
        int warps = (a.total_rows + rpw * RB * b->nsm - 1) / (rpw * RB * b->nsm);
        threads = LL_MAX(4, warps) * 32;
        if (threads > GEMV_THREADS) threads = GEMV_THREADS;
        need = (a.total_rows + (threads / 32) * rpw * RB - 1) / ((threads / 32) * rpw * RB);
    }
    int grid = need < b->nsm * occ ? need : b->nsm * occ;
    launch_pdl(b, k_gemv_pf<WT, NU, RB>, dim3(grid), dim3(threads), smem, a);
}

template <int WT, int NU, int RB, int T> static void gemv_q_go(cu_backend *b, const gemv_args &a, const qbuf &q) {
    int occ = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_q<WT, NU, RB, T>, T, 0);
    if (occ < 1) occ = 1;
    int rpw = 32 / gemv_lanes(a.K), per = (T / 32) * rpw * RB, need = (a.total_rows + per - 1) / per;
    int grid = need < b->nsm * occ ? need : b->nsm * occ; /* one wave, rows grid-strided */
    launch_pdl(b, k_gemv_q<WT, NU, RB, T>, dim3(grid), dim3(T), 0, a, q);
}
template <int WT, int NU> static void gemv_q_launch(cu_backend *b, const gemv_args &a, const qbuf &q) {
    int rpw = 32 / gemv_lanes(a.K);
    if (a.exact || (a.total_rows + 8 * rpw * b->gq_rb - 1) / (8 * rpw * b->gq_rb) < 2 * b->nsm) {
        gemv_q_go<WT, NU, 1, 128>(b, a, q); /* small matrix: one row per warp, over more SMs */
        return;
    }
    if (b->gq_rb >= 4) gemv_q_go<WT, NU, 4, 256>(b, a, q);
    else if (b->gq_rb == 2) gemv_q_go<WT, NU, 2, 256>(b, a, q);
    else gemv_q_go<WT, NU, 1, 256>(b, a, q);
}

/* q = quantize(transform(a.x)), once, for the kernels after it (k_gemvq.cuh). */
static void launch_qact(cu_backend *b, const gemv_args &a, const qbuf &q) {
    launch_pdl(b, k_qact, dim3(1), dim3(QACT_THREADS), (size_t)a.K * 4, a, q);
}

/* The new path for one GEMV: k_qact into q, then k_gemv_q. Returns 0 where it does not apply. */
static int launch_gemv_q(cu_backend *b, const gemv_args &a, const qbuf *q) {
    int nu = (a.K >> 5) / gemv_lanes(a.K);
    if (!b->qmode || !q || nu > RR_NU_MAX) return 0;
    int WT = a.seg[0].W.type;
    if (b->tma && !a.exact && (WT == GT_Q4_K || WT == GT_Q6_K)) {
        int TR = tma_tr(WT, a.K, b->tma_kb), nt = tma_ntiles(a, TR), occ = 0;
        size_t smem = (size_t)b->tma_st * TR * tma_row_bytes(WT, a.K);
        qbuf qq = *q;
        if (b->tma_self) { qq.xq = NULL; smem += qact_smem_bytes(a.K); } /* the blocks quantize for themselves */
        else launch_qact(b, a, *q);
        if (WT == GT_Q4_K) cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_tma<GT_Q4_K>, TMA_THREADS, smem);
        else cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv_tma<GT_Q6_K>, TMA_THREADS, smem);
        if (occ >= 1) {
            int grid = nt < b->nsm * occ ? nt : b->nsm * occ;
            if (WT == GT_Q4_K) launch_pdl(b, k_gemv_tma<GT_Q4_K>, dim3(grid), dim3(TMA_THREADS), smem, a, qq, TR, b->tma_st, nt);
            else launch_pdl(b, k_gemv_tma<GT_Q6_K>, dim3(grid), dim3(TMA_THREADS), smem, a, qq, TR, b->tma_st, nt);
            return 1;
        }
        if (b->tma_self) launch_qact(b, a, *q);
    } else {
        launch_qact(b, a, *q);
    }
    GT_NU_DISPATCH(WT, nu, gemv_q_launch, b, a, *q);
    return 1;
}

template <int WT, int NU> static void moe_gu_q_launch(cu_backend *b, const moe_args &ma, const qbuf &q) {
    int occ = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_moe_gateup_q<WT, NU>, MOE_GU_THREADS, 0);
    if (occ < 1) occ = 1;
    int kf = ma.k * ma.FF + ma.FS, rpw = 32 / gemv_lanes(ma.H), per_block = (MOE_GU_THREADS / 32) * rpw * MOE_GU_RB;
    int need = (kf + per_block - 1) / per_block;
    int grid = need < b->nsm * occ ? need : b->nsm * occ;
    launch_pdl(b, k_moe_gateup_q<WT, NU>, dim3(grid), dim3(MOE_GU_THREADS), 0, ma, q);
}
template <int WT, int NU> static void moe_down_q_launch(cu_backend *b, const moe_args &ma, const qbuf &q) {
    launch_pdl(b, k_moe_down_q<WT, NU>, dim3((ma.H + 7) / 8), dim3(MOE_DOWN_THREADS), 0, ma, q);
}

/* The next trace slot of this step (NULL when not tracing). */
static unsigned long long *ln_slot(cu_backend *b, const char *name) {
    if (!b->ln_tr || b->ln_n >= LN_TR_MAX) return NULL;
    b->ln_names[b->ln_n] = name;
    return b->ln_tr + LN_TRS_HOST * b->ln_n++;
}

/* Prints the lean kernels' in-graph timeline of the last step (stderr), per kernel name (means, µs):
 * "gap" from the previous lean kernel's end to the last block past griddepcontrol.wait (the non-lean
 * kernels between them and the boundary), then past the wait -> past the prologue (MoE gate/up: the
 * top-k) -> first tile in shared memory -> done, and the most blocks of one launch on one SM. */
static void ln_trace_print(cu_backend *b, int pos) {
    static unsigned long long h[LN_TR_MAX * LN_TRS_HOST];
    const int S = LN_TRS_HOST;
    if (b->ln_n < 2 || cudaMemcpy(h, b->ln_tr, (size_t)b->ln_n * S * 8, cudaMemcpyDeviceToHost) != cudaSuccess) return;
    double t0 = (double)h[0];
    fprintf(stderr, "lean trace at position %d: %d kernels, first entry to last done %.1f us\n", pos, b->ln_n,
            (h[S * (b->ln_n - 1) + 2] - t0) / 1e3);
    const char *names[32];
    double acc[32][6];
    int cnt[32], mx[32], nn = 0;
    for (int i = 1; i < b->ln_n; i++) {
        const unsigned long long *r = h + (size_t)S * i;
        int k = 0;
        while (k < nn && strcmp(names[k], b->ln_names[i])) k++;
        if (k == nn) { if (nn == 32) continue; names[nn] = b->ln_names[i]; memset(acc[nn], 0, sizeof(acc[nn])); cnt[nn] = mx[nn] = 0; nn++; }
        acc[k][0] += ((double)r[1] - (double)h[(size_t)S * (i - 1) + 2]) / 1e3;
        acc[k][1] += ((double)r[3] - (double)r[1]) / 1e3;
        acc[k][2] += ((double)r[4] - (double)r[3]) / 1e3;
        acc[k][3] += ((double)r[2] - (double)r[4]) / 1e3;
        acc[k][4] += r[6] ? ((double)r[6] - (double)r[4]) / 1e3 : 0.0;
        acc[k][5] += r[7] ? ((double)r[7] - (double)r[0]) / 1e3 : 0.0;
        int per[256] = {0}, grid = (int)r[5] < 256 ? (int)r[5] : 256;
        const unsigned char *sm = (const unsigned char *)(r + 8);
        for (int g = 0; g < grid; g++) { int c = ++per[sm[g]]; if (c > mx[k]) mx[k] = c; }
        cnt[k]++;
    }
    fprintf(stderr, "  %-18s %5s %8s %9s %9s %9s %9s %6s %9s %8s\n", "kernel", "calls", "gap", "prologue", "1st tile", "rest",
            "total ms", "max/SM", "last land", "entries");
    for (int k = 0; k < nn; k++)
        fprintf(stderr, "  %-18s %5d %8.2f %9.2f %9.2f %9.2f %9.3f %6d %9.2f %8.2f\n", names[k], cnt[k], acc[k][0] / cnt[k],
                acc[k][1] / cnt[k], acc[k][2] / cnt[k], acc[k][3] / cnt[k],
                (acc[k][0] + acc[k][1] + acc[k][2] + acc[k][3]) / 1e3, mx[k], acc[k][4] / cnt[k], acc[k][5] / cnt[k]);
    /* the fused MoE kernel's phases (k_fused.cuh): the last block past each point, from the last block past the wait */
    double fz[13] = {0};
    int nfz = 0;
    for (int i = 1; i < b->ln_n; i++) {
        const unsigned long long *r = h + (size_t)S * i;
        if (strcmp(b->ln_names[i], "moe.fused")) continue;
        const int at[13] = {7, 40, 41, 42, 43, 3, 44, 45, 46, 4, 47, 6, 2};
        for (int j = 0; j < 13; j++) fz[j] += r[at[j]] ? ((double)r[at[j]] - (double)r[1]) / 1e3 : 0.0;
        nfz++;
    }
    if (nfz)
        fprintf(stderr, "  moe.fused phases (us after the last block past the wait, %d calls): last entry %.2f, plan %.2f, P1 %.2f, "
                "router %.2f, shared g/u %.2f, B1+top-k %.2f, issued %.2f, 1st routed tile %.2f, g/u done %.2f, B2 %.2f, P2 %.2f, "
                "B3 %.2f, done %.2f\n", nfz, fz[0] / nfz, fz[1] / nfz, fz[2] / nfz, fz[3] / nfz, fz[4] / nfz, fz[5] / nfz,
                fz[6] / nfz, fz[7] / nfz, fz[8] / nfz, fz[9] / nfz, fz[10] / nfz, fz[11] / nfz, fz[12] / nfz);
    /* extra stamps 40..47 (µs after the last block past the wait, means per kernel name; negative:
     * before it): k_lgemv's prologue done (40, before its post-wait copies are issued); k_lgdn's fold
     * shares stored (41), out-projection shares stored (42), arrival counted (43); the MoE kernels'
     * top-k done (44) and first tiles requested (45); flash-decoding (k_attn_dec.cuh): gains in shared
     * memory (41), warp 0's q landed (44), warp 0's prep done (42), the last warp's (K/V row) prep done (43) */
    for (int k = 0; k < nn; k++) {
        if (!strcmp(names[k], "moe.fused")) continue; /* its own line above */
        double sp[8] = {0};
        int c[8] = {0}, any = 0;
        for (int i = 1; i < b->ln_n; i++) {
            const unsigned long long *r = h + (size_t)S * i;
            if (strcmp(b->ln_names[i], names[k])) continue;
            for (int j = 0; j < 8; j++)
                if (r[40 + j]) { sp[j] += ((double)r[40 + j] - (double)r[1]) / 1e3; c[j]++; any = 1; }
        }
        if (!any) continue;
        fprintf(stderr, "  %-18s stamps after the wait (us):", names[k]);
        for (int j = 0; j < 8; j++)
            if (c[j]) fprintf(stderr, " [%d] %.2f", 40 + j, sp[j] / c[j]);
        fprintf(stderr, "\n");
    }
    /* who is last (stamps 48..51): per kernel name, the blocks most often last past the wait, the
     * prologue and the first tile, and last done, with their counts over the step's launches */
    for (int k = 0; k < nn; k++) {
        static const int slot[4] = {48, 50, 51, 49};
        static const char *what[4] = {"wait", "pro", "tile", "done"};
        fprintf(stderr, "  %-18s last block:", names[k]);
        for (int q = 0; q < 4; q++) {
            int id[64], n[64], m = 0;
            for (int i = 1; i < b->ln_n; i++) {
                const unsigned long long *r = h + (size_t)S * i;
                if (strcmp(b->ln_names[i], names[k]) || !r[slot[q]]) continue;
                int v = (int)(r[slot[q]] & 0xffffu), j = 0;
                while (j < m && id[j] != v) j++;
                if (j == m) { if (m == 64) continue; id[m] = v; n[m++] = 0; }
                n[j]++;
            }
            fprintf(stderr, " %s", what[q]);
            for (int t = 0; t < 2 && t < m; t++) { /* the two most frequent */
                int bi = t;
                for (int j = t + 1; j < m; j++) if (n[j] > n[bi]) bi = j;
                int ti = id[t], tn = n[t]; id[t] = id[bi]; n[t] = n[bi]; id[bi] = ti; n[bi] = tn;
                fprintf(stderr, " b%d x%d", id[t], n[t]);
            }
            if (m > 2) fprintf(stderr, " +%d", m - 2);
        }
        fprintf(stderr, "\n");
    }
    /* the first 20 launches (3 GDN layers and the first attention layer of the 35B), block 0's entry
     * and the last block's entry (session 31: where the cout kernel's 6 µs "gap" sits) */
    for (int i = 0; i < b->ln_n && i < 20; i++) {
        const unsigned long long *r = h + (size_t)S * i;
        fprintf(stderr, "  %-18s entry %8.2f last entry %8.2f wait %8.2f pro %8.2f tile %8.2f done %8.2f\n", b->ln_names[i],
                (r[0] - t0) / 1e3, r[7] ? (r[7] - t0) / 1e3 : 0.0, (r[1] - t0) / 1e3, (r[3] - t0) / 1e3, (r[4] - t0) / 1e3, (r[2] - t0) / 1e3);
    }
}

/* lean: 0 keeps the older kernels (a k_qact writes q, which a later kernel reads) */
static void launch_gemv(cu_backend *b, gemv_args &a, const char *name, const qbuf *q = NULL, int lean = 1, const lean_fb *fb = NULL) {
    a.total_rows = 0;
    double bytes = 0;
    for (int i = 0; i < a.nseg; i++) { a.total_rows += a.seg[i].W.rows; bytes += gmat_bytes(a.seg[i].W); }
    size_t smem = qact_smem_bytes(a.K);
    int nu = (a.K >> 5) / gemv_lanes(a.K);
    prof_begin(b);
    if (b->lean && lean && lean_gemv(&a, b->nsm, pdl_for(b, PDLK_GEMV), b->st, ln_slot(b, name), fb)) {
    } else if (launch_gemv_q(b, a, q)) {
    } else if (nu <= RR_NU_MAX && !b->no_prefetch) {
        GT_NU_DISPATCH(a.seg[0].W.type, nu, gemv_pf_launch, b, a, smem);
    } else {
        /* one wave: a partial second wave would repeat the prologue and a row latency (ncu showed
         * 1.94 waves for the 8192-row projection) */
        int rpw = 32 / gemv_lanes(a.K), occ = 0;
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_gemv, GEMV_THREADS, smem);
        if (occ < 1) occ = 1;
        int need = (a.total_rows + (GEMV_THREADS / 32) * rpw - 1) / ((GEMV_THREADS / 32) * rpw);
        int grid = need < b->nsm * occ ? need : b->nsm * occ;
        k_gemv<<<grid, GEMV_THREADS, smem, b->st>>>(a);
    }
    prof_end(b, name, bytes, 2.0 * bytes);
}

template <int WT, int NU> static void moe_gu_launch(cu_backend *b, const moe_args &ma) {
    int occ = 0;
    size_t sm1 = qact_smem_bytes(ma.H);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_moe_gateup_pf<WT, NU>, MOE_GU_THREADS, sm1);
    if (occ < 1) occ = 1;
    int kf = ma.k * ma.FF + ma.FS, rpw = 32 / gemv_lanes(ma.H), per_block = (MOE_GU_THREADS / 32) * rpw * MOE_GU_RB;
    int need = (kf + per_block - 1) / per_block;
    int grid = need < b->nsm * occ ? need : b->nsm * occ;
    launch_pdl(b, k_moe_gateup_pf<WT, NU>, dim3(grid), dim3(MOE_GU_THREADS), sm1, ma);
}
template <int WT, int NU> static void moe_down_launch(cu_backend *b, const moe_args &ma) {
    launch_pdl(b, k_moe_down_pf<WT, NU>, dim3((ma.H + 7) / 8), dim3(MOE_DOWN_THREADS), qact_smem_bytes(ma.k * ma.FF + ma.FS), ma);
}

static gemv_args gemv_make(int pro, const float *x, int K, const float *g, float eps) {
    gemv_args a = {};
    a.pro = pro; a.x = x; a.K = K; a.g = g; a.eps = eps;
    return a;
}
static void gemv_add(gemv_args &a, const gmat &W, float *y, int epi) {
    a.seg[a.nseg].W = W; a.seg[a.nseg].y = y; a.seg[a.nseg].epi = epi; a.nseg++;
}

/* Stages that fit in ~200 KB of shared memory (at most 4). */
static int tma_stages(size_t stage) {
    int n = (int)((200u * 1024u) / (stage ? stage : 1));
    return n > 4 ? 4 : n;
}

/* The bulk-copy MoE pair (k_moe_gateup_tma, k_qact of h, k_moe_down_tma). Returns 0 where the
 * shapes or types do not fit it. */
static int moe_tma_launch(cu_backend *b, const moe_args &ma, int kf) {
    int TR = b->moe_tr, g1 = ma.gate.type, g2 = ma.down.type;
    if (!b->moe_tma || TR < 1 || (g1 != GT_Q4_K && g1 != GT_Q6_K) || (g2 != GT_Q4_K && g2 != GT_Q6_K)) return 0;
    if (ma.up.type != g1 || (ma.FS && (ma.sgate.type != g1 || ma.sup.type != g1 || ma.sdown.type != g2 || ma.FS != ma.FF))) return 0;
    if (32 % TR || ma.FF % 32 || ma.FS % 32 || ma.H % TR || ma.H % 256 || ma.FF % 256 || ma.k + 1 > QK_MAX_TOPK) return 0;
    size_t st1 = (size_t)2 * TR * tma_row_bytes(g1, ma.H), st2 = (size_t)(ma.k + 1) * TR * tma_row_bytes(g2, ma.FF);
    int n1 = tma_stages(st1), n2 = tma_stages(st2), o1 = 0, o2 = 0;
    if (n1 < 1 || n2 < 1) return 0;
    if (g1 == GT_Q4_K) cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o1, k_moe_gateup_tma<GT_Q4_K>, TMA_THREADS, n1 * st1);
    else cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o1, k_moe_gateup_tma<GT_Q6_K>, TMA_THREADS, n1 * st1);
    if (g2 == GT_Q4_K) cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o2, k_moe_down_tma<GT_Q4_K>, TMA_THREADS, n2 * st2);
    else cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o2, k_moe_down_tma<GT_Q6_K>, TMA_THREADS, n2 * st2);
    if (o1 < 1 || o2 < 1) return 0;
    int nt1 = (ma.k * (ma.FF / TR) + ma.FS / TR) / (32 / TR), nt2 = ma.H / TR; /* gate/up: groups of 32 rows */
    int gr1 = nt1 < b->nsm * o1 ? nt1 : b->nsm * o1, gr2 = nt2 < b->nsm * o2 ? nt2 : b->nsm * o2;
    prof_begin(b);
    /* the gate/up kernel writes the q8 of h itself (LILAC_CUDA_HQ=0: a separate k_qact) */
    qbuf hq = b->q2;
    if (!b->fuse_hq) hq.xq = NULL;
    if (g1 == GT_Q4_K) launch_pdl(b, k_moe_gateup_tma<GT_Q4_K>, dim3(gr1), dim3(TMA_THREADS), n1 * st1, ma, b->q1, TR, n1, hq);
    else launch_pdl(b, k_moe_gateup_tma<GT_Q6_K>, dim3(gr1), dim3(TMA_THREADS), n1 * st1, ma, b->q1, TR, n1, hq);
    prof_end(b, "moe.gateup", b->moe_gu_bytes, 2 * b->moe_gu_bytes);
    prof_begin(b);
    if (!b->fuse_hq) {
        gemv_args qh = gemv_make(PRO_PLAIN, b->h, kf, NULL, ma.eps);
        launch_qact(b, qh, b->q2);
    }
    if (g2 == GT_Q4_K) launch_pdl(b, k_moe_down_tma<GT_Q4_K>, dim3(gr2), dim3(TMA_THREADS), n2 * st2, ma, b->q2, TR, n2);
    else launch_pdl(b, k_moe_down_tma<GT_Q6_K>, dim3(gr2), dim3(TMA_THREADS), n2 * st2, ma, b->q2, TR, n2);
    prof_end(b, "moe.down", b->moe_d_bytes, 2 * b->moe_d_bytes);
    return 1;
}

/* k_gemm with the row tile bm (64 or 128; LILAC_CUDA_GEMM_MB=1 gives the 128 tile its full registers);
 * LILAC_CUDA_GEMM2=1: k_gemm2 (mma.sync, k_gemm2.cuh) for Q4_K / Q6_K weights, dense GEMMs in 256-row
 * tiles where those still fill every SM once (=2: never 256) */
static void gemm_run(cu_backend *b, int bm, dim3 grid, const gemm_args &a) {
    if (b->gemm2 && gemm2_supports(a)) {
        if (!a.tile_e && bm == 128 && b->gemm2 != 2 && (long)grid.x * ((a.M + 255) / 256) >= b->nsm) {
            bm = 256;
            grid.y = (a.M + 255) / 256;
        }
        gemm2_run(bm, grid, b->st, a);
        return;
    }
    if (bm == 128 && b->gemm_mb == 1) k_gemm<128, 1><<<grid, 256, 0, b->st>>>(a);
    else if (bm == 128) k_gemm<128, 2><<<grid, 256, 0, b->st>>>(a);
    else k_gemm<64><<<grid, 256, 0, b->st>>>(a);
}

static void launch_gemm(cu_backend *b, const __nv_bfloat16 *A, int lda, const gmat &W, int M, int mode, float *C, int ldc,
                        const char *name, const float *G = NULL, __nv_bfloat16 *H = NULL, const float *rowgate = NULL,
                        int rg_stride = 0) {
    gemm_args a = {};
    a.A = A; a.lda = lda; a.W = W; a.N = W.rows; a.K = W.cols; a.M = M; a.mode = mode; a.C = C; a.ldc = ldc;
    a.G = G; a.ldg = W.rows; a.H = H; a.ldh = W.rows; a.rowgate = rowgate; a.rg_stride = rg_stride; a.red4 = b->gemm_red4;
    /* the 128-row tile only where its grid still fills the GPU twice (bench/results/2026-11-30-h200-cudapre:
     * faster on the qkv / z / out / q / o projections at 4K, slower on the small-N router, b/a and
     * shared gate/up GEMMs) */
    long blocks128 = (long)((W.rows + GM_BN - 1) / GM_BN) * ((M + 127) / 128);
    int bm = b->gemm_bm == 128 && blocks128 >= 2L * b->nsm ? 128 : 64;
    dim3 grid((W.rows + GM_BN - 1) / GM_BN, (M + bm - 1) / bm);
    prof_begin(b);
    gemm_run(b, bm, grid, a);
    prof_end(b, name, gmat_bytes(W) + (double)M * W.cols * 2, 2.0 * M * W.rows * W.cols);
}

/* ------------------------------------------------------------------ decode */

/* One layer's decode GEMVs and MoE arguments (the same for the per-kernel and the persistent path). */
/* xi: the residual the layer reads; xo: where the mixer's output lands and the MoE works (xi, in
 * place, except with the router fold). */
static void decode_layer_args(cu_backend *b, int l, pk_layer *pl, float *xi, float *xo) {
    const qwen_hparams &hp = b->hp;
    const dlayer &L = b->L[l];
    int H = hp.n_embd, HV = hp.gdn_n_v_heads, E = hp.n_expert;
    float eps = hp.rms_eps;
    memset(pl, 0, sizeof(*pl));
    pl->attn = hp.is_attn[l];
    if (pl->attn) {
        pl->idx = L.attn_idx;
        pl->in = gemv_make(PRO_RMSNORM, xi, H, L.attn_norm, eps);
        gemv_add(pl->in, L.wq, b->qg, EPI_STORE);
        gemv_add(pl->in, L.wk, b->kb, EPI_STORE);
        gemv_add(pl->in, L.wv, b->vb, EPI_STORE);
        pl->out = gemv_make(PRO_PLAIN, b->att, hp.n_head * hp.head_dim, NULL, eps);
        gemv_add(pl->out, L.wo, xo, EPI_ADD);
        pl->q_norm = L.q_norm;
        pl->k_norm = L.k_norm;
    } else {
        pl->idx = L.gdn_idx;
        pl->in = gemv_make(PRO_RMSNORM, xi, H, L.attn_norm, eps);
        gemv_add(pl->in, L.wqkv, b->qkv, EPI_STORE);
        gemv_add(pl->in, L.wz, b->z, EPI_STORE);
        gemv_add(pl->in, L.wb, b->ab, EPI_STORE);
        gemv_add(pl->in, L.wa, b->ab + HV, EPI_STORE);
        pl->out = gemv_make(PRO_HEADNORM_GATED, b->o, qwen_gdn_v_dim(&hp), L.gdn_norm, eps);
        pl->out.z = b->z;
        pl->out.hd = hp.gdn_v_dim;
        gemv_add(pl->out, L.wout, xo, EPI_ADD);
        pl->conv = L.conv;
        pl->dt_bias = L.dt_bias;
        pl->ssm_a = L.ssm_a;
    }
    pl->router = gemv_make(PRO_RMSNORM, xo, H, L.ffn_norm, eps);
    gemv_add(pl->router, L.router, b->rl, EPI_STORE);
    if (hp.n_ff_shexp) gemv_add(pl->router, L.shgate, b->rl + E, EPI_STORE);
    /* fp32 router logits: BF16 rows already dot the fp32 input in the register-prefetching path
     * (weights loaded before the wait); quantized router weights need the slower exact path */
    pl->router.exact = !(L.router.type == GT_BF16 && (!hp.n_ff_shexp || L.shgate.type == GT_BF16));
    moe_args ma = {xo, L.ffn_norm, eps, H, E, hp.n_expert_used, hp.n_ff_exp, hp.n_ff_shexp, b->rl,
                   L.egate, L.eup, L.edown, L.sgate, L.sup, L.sdown, b->h, xo, NULL, NULL};
    pl->moe = ma;
    gemv_args *gs[3] = {&pl->in, &pl->out, &pl->router};
    for (int i = 0; i < 3; i++) {
        gs[i]->total_rows = 0;
        for (int j = 0; j < gs[i]->nseg; j++) gs[i]->total_rows += gs[i]->seg[j].W.rows;
    }
}

static void decode_step_persist(cu_backend *b, cu_seq *s, const pk_params *P);

/* The K and V caches of attention layer a ([NKV][n_ctx] rows of kv_row_bytes each). */
static void seq_kv(const cu_backend *b, const cu_seq *s, int a, __nv_bfloat16 **kc, __nv_bfloat16 **vc) {
    size_t plane = (size_t)b->hp.n_head_kv * s->n_ctx * kv_row_bytes(b->hp.head_dim, b->kv_q8);
    *kc = (__nv_bfloat16 *)((unsigned char *)s->kv + (size_t)a * 2 * plane);
    *vc = (__nv_bfloat16 *)((unsigned char *)s->kv + ((size_t)a * 2 + 1) * plane);
}

/* floats of one copy of a sequence's GDN states, [n_gdn][HV][DK][DV] */
static size_t seq_state_floats(const cu_backend *b) {
    return (size_t)b->n_gdn * b->hp.gdn_n_v_heads * b->hp.gdn_k_dim * b->hp.gdn_v_dim;
}

/* GDN layer gi's state [HV][DK][DV] in copy c: copy 1 only where double-buffered (else NULL, which
 * gdn_args.S2 reads as "in place") */
static float *seq_state(const cu_backend *b, const cu_seq *s, int gi, int c) {
    if (c && !b->gdn_db) return NULL;
    return s->S + (size_t)c * seq_state_floats(b) + (size_t)gi * b->hp.gdn_n_v_heads * b->hp.gdn_k_dim * b->hp.gdn_v_dim;
}

/* all the GDN states after n tokens (the copy a snapshot saves or restores at position n) */
static float *seq_state_at(const cu_backend *b, const cu_seq *s, int n) { return gdn_state_copy(seq_state(b, s, 0, 0), seq_state(b, s, 0, 1), n); }

/* The byte ranges of layer l + 1's input projection (none after the last layer): what a kernel of
 * layer l asks the L2 to fetch ahead (LILAC_CUDA_PFNEXT). */
static void decode_pf_next(cu_backend *b, int l, float *xc, lean_pf *pf) {
    pf->n = 0;
    if (l + 1 >= b->hp.n_layer) return;
    pk_layer pn;
    decode_layer_args(b, l + 1, &pn, xc, xc);
    for (int i = 0; i < pn.in.nseg && pf->n + 4 <= LEAN_PF_MAX; i++) {
        const gmat &W = pn.in.seg[i].W;
        size_t nb = (size_t)W.rows * (W.cols >> 8);
        if (W.type == GT_Q4_K || W.type == GT_Q6_K) {
            pf->p[pf->n] = W.q; pf->bytes[pf->n++] = nb * 128;
            pf->p[pf->n] = W.sc; pf->bytes[pf->n++] = nb * 16;
            if (W.type == GT_Q6_K) { pf->p[pf->n] = W.qh; pf->bytes[pf->n++] = nb * 64; pf->p[pf->n] = W.d; pf->bytes[pf->n++] = nb * 2; }
        } else if (W.type == GT_BF16) {
            pf->p[pf->n] = W.q; pf->bytes[pf->n++] = (size_t)W.rows * W.cols * 2;
        }
    }
    /* LILAC_CUDA_PF_COUT=1 (session 32): an attention layer's packed cout slices too (~7.9 MB on the
     * 35B), three launches before the cout kernel asks for them: its bulk copies then hit the L2 */
    const dlayer &N = b->L[l + 1];
    if (b->pf_cout && N.cout_pk && pf->n < LEAN_PF_MAX) { pf->p[pf->n] = N.cout_pk; pf->bytes[pf->n++] = N.cout_pk_bytes; }
}

/* The atomic forms (GDN_ATOM's GDN layers, ATT_COUT's attention layers) add a layer's new residual and
 * raw router logits into buffers of its own that are zeros when its launch starts. layer_zbuf: layer
 * l's pair (0: l takes the ordered form). layer_znext: what l's launch zeroes, the pair of the next
 * layer in the chain, cyclically (the last zeroes the first's for the next step); dead by then,
 * since cu_init keeps at least three layers in the chain (a launch reads the previous one's). */
static int layer_zbuf(cu_backend *b, int l, float **xl, float **rl) {
    const qwen_hparams &hp = b->hp;
    size_t H = hp.n_embd, E1 = hp.n_expert + 1;
    const dlayer &L = b->L[l];
    if (hp.is_attn[l] ? !b->att_cout : !b->gdn_atom) return 0;
    *xl = hp.is_attn[l] ? b->att_xl + L.attn_idx * H : b->gdn_xl + L.gdn_idx * H;
    *rl = hp.is_attn[l] ? b->att_rl + L.attn_idx * E1 : b->gdn_rl + L.gdn_idx * E1;
    return 1;
}
static void layer_znext(cu_backend *b, int l, float **zx, float **zl) {
    int N = b->hp.n_layer;
    for (int k = 1; k <= N; k++)
        if (layer_zbuf(b, (l + k) % N, zx, zl)) return;
    LL_ASSERT(0); /* l itself is in the chain */
}

/* emb_pdl: this step follows another in the same graph (ensure_graph_k) and b->step_pdl is set: its
 * embedding kernel is a programmatic dependent of that step's k_finish<true> */
static void decode_step(cu_backend *b, cu_seq *s, int gen, int emb_pdl = 0) {
    const qwen_hparams &hp = b->hp;
    b->ln_n = 0;
    int H = hp.n_embd, HD = hp.head_dim, NH = hp.n_head, NKV = hp.n_head_kv;
    int HV = hp.gdn_n_v_heads, DK = hp.gdn_k_dim, DV = hp.gdn_v_dim, HK = hp.gdn_n_k_heads;
    int QK = HK * DK, CD = 2 * QK + HV * DV, E = hp.n_expert;
    float eps = hp.rms_eps;
    prof_begin(b);
    if (emb_pdl && b->pdl) /* a later step of a multi-step graph: after the previous step's k_finish<true> */
        launch_pdl(b, k_embed<true>, dim3(1), dim3(128), 0, b->tok_embd, (const int *)b->d_tok, b->x, H, (const int *)s->d_pos,
                   (const float *)b->inv_freq, hp.n_rot / 2, b->rope_cs);
    else k_embed<<<1, 128, 0, b->st>>>(b->tok_embd, b->d_tok, b->x, H, s->d_pos, b->inv_freq, hp.n_rot / 2, b->rope_cs);
    prof_end(b, "embed", H * 0.6, 0);
    int in_done = 0; /* this layer's input projection ran in the previous layer's fused MoE kernel */
    float *xc = b->x; /* the residual stream: b->x, or b->x2 after an odd number of router folds */
    for (int l = 0; l < hp.n_layer; l++) {
        const dlayer &L = b->L[l];
        pk_layer pl;
        decode_layer_args(b, l, &pl, xc, xc);
        /* the router folded into the GDN kernel (k_lgdn.cuh): the layer writes x_new into the
         * other buffer, the router's logits come raw from that kernel, and no router launch */
        int fold = 0;
        lean_fold fo;
        lean_fb afb = {}, afq = {}; /* attention layers: the router fold's rows in the out-projection, its x copy by the qkv projection */
        gdn_args g = {};
        /* att_cout (cu_init checked every attention layer): the layer writes x_new = x_old + W_o y into
         * its own zeroed buffer and the raw logits into its own, by one launch after flash decoding */
        int cout = 0;
        float *xold = xc;
        float *cx = NULL, *crl = NULL; /* cout: this layer's residual and logits */
        if (hp.is_attn[l] && b->att_cout) {
            layer_zbuf(b, l, &cx, &crl);
            decode_layer_args(b, l, &pl, xc, cx);
            pl.moe.logits = crl;
            xc = cx;
            fold = cout = 1;
        } else if (hp.is_attn[l] && L.fold_B && (b->gdn_fold & 2) && b->lean && !b->fuse && (H >> 3) % 32 == 0 && ATT_COMB_THREADS % (H >> 3) == 0 &&
            lean_moe(&pl.moe, b->nsm, b->pdl, b->st, 0, NULL, NULL)) {
            /* attention layers (session 22): each out-projection block writes two raw logits,
             * W_r diag(g) x_old (before its wait) + B att (after its prologue), k_lgemv_fb<2>; x_old
             * is a copy of the layer's input that the qkv projection's block 0 writes into the
             * residual buffer this layer does not use (the out-projection adds to x itself, so a
             * late block could not read x_old there) */
            int NL = E + (hp.n_ff_shexp ? 1 : 0);
            float *xs = xc == b->x ? b->x2 : b->x;
            afb = {2, L.fold_B, b->rl, NL, L.router.q, hp.n_ff_shexp ? L.shgate.q : NULL, L.ffn_norm, xs, H};
            afq = {1, NULL, NULL, 0, NULL, NULL, NULL, xs, H};
            if (in_done || !lean_gemv(&pl.out, b->nsm, 0, b->st, NULL, &afb, 0) || !lean_gemv(&pl.in, b->nsm, 0, b->st, NULL, &afq, 0)) {
                /* shapes k_lgemv_fb does not take (session 17's form, slower): the combine computes
                 * the x_old term into rl before its wait, the out-projection adds B att to it as
                 * BF16 rows of its own */
                gmat Bg = {GT_BF16, NL, hp.n_head * HD, (const uint8_t *)L.fold_B, NULL, NULL, NULL};
                gemv_add(pl.out, Bg, b->rl, EPI_ADD);
                pl.out.total_rows += NL;
                afb.B = NULL;
            }
            fold = 1;
        }
        if (!hp.is_attn[l]) {
            g = {b->qkv, b->ab, b->ab + HV, 0, L.conv, s->ring + (size_t)L.gdn_idx * 4 * CD,
                 seq_state(b, s, L.gdn_idx, 0), L.dt_bias, L.ssm_a, b->o, s->d_pos, 1, HK, HV, DV,
                 hp.gdn_v_tiled, seq_state(b, s, L.gdn_idx, 1)};
            if (L.fold_B && (b->gdn_fold & 1) && b->lean && b->gdn_fuse == 1 && !b->fuse && lean_moe(&pl.moe, b->nsm, b->pdl, b->st, 0, NULL, NULL)) {
                float *xn = xc == b->x ? b->x2 : b->x, *rl = b->rl;
                if (b->gdn_atom) layer_zbuf(b, l, &xn, &rl); /* this layer's own residual and logits (zeros), atomics into them */
                pk_layer pf;
                decode_layer_args(b, l, &pf, xc, xn);
                fo = {L.fold_B, L.router.q, hp.n_ff_shexp ? L.shgate.q : NULL, L.ffn_norm, E, xc, rl, NULL, NULL, b->gdn_atom};
                if (b->gdn_atom) { /* ... and the next atomic layer's (cyclically: the first's for the next step) zeroed */
                    layer_znext(b, l, &fo.zx, &fo.zl);
                    pf.moe.logits = rl;
                }
                if (lean_gdn(&g, DK, &pf.out, b->gdn_part, b->gdn_atom ? NULL : b->gdn_cnt, b->gdn_hc, 3, 0, b->st, NULL, 0, &fo)) {
                    pl = pf;
                    fold = 1;
                    xc = xn;
                    if (b->gdn_in && b->gdn_atom) { /* the in-projection inside that launch where the shapes allow */
                        fo.in = &pl.in;
                        fo.in_nst = b->gdn_in_nst;
                        fo.in_wpre = b->gdn_in_wpre;
                        if (!lean_gdn(&g, DK, &pl.out, b->gdn_part, NULL, b->gdn_hc, 3, 0, b->st, NULL, 0, &fo)) fo.in = NULL;
                    }
                }
            }
        }
        if (hp.is_attn[l]) {
            if (!in_done) launch_gemv(b, pl.in, "attn.qkv_gemv", &b->q1, 1, fold && afb.B ? &afq : NULL);
            __nv_bfloat16 *kc, *vc;
            seq_kv(b, s, L.attn_idx, &kc, &vc);
            attn_prep_args pa = {b->qg, 0, b->kb, 0, b->vb, 0, L.q_norm, L.k_norm, b->inv_freq, b->q, NULL, kc, vc,
                                 s->d_pos, NH, NKV, HD, hp.n_rot, s->n_ctx, eps, b->kv_q8};
            /* fused: the flash-decoding kernel does the prep's work (k_attn_decode_fd<8, false>) */
            int fused = b->fd_ns && b->fd_fused && HD == 256 && NH / NKV <= FD_G;
            /* fd_ph: FP16 partials, only where the cout kernel's two-copy form reads them (lean_attn.ph) */
            int ph = b->fd_ph && cout && fused && b->fd_fg != 4 && b->kv_q8 && b->cout_pk == 2 && L.cout_pk;
            if (!fused) {
                prof_begin(b);
                launch_pdl(b, k_attn_prep, dim3(NH + 2 * NKV, 1), dim3(HD), 0, pa);
                prof_end(b, "attn.prep", 0, 0);
            }
            attn_dec_args da = {b->q, kc, vc, s->part_o, s->part_ml, b->qg, b->att, s->d_pos, NH, NKV, HD, s->n_ctx, s->CH};
            da.q8 = b->kv_q8; /* cu_init: q8 only with the flash-decoding kernel and HD 256 or 128 */
            if (fold && !afb.B && !cout) { /* the combine computes the x_old term (with B as rows of the out-projection) */
                da.fwr = (const __nv_bfloat16 *)L.router.q;
                da.fws = hp.n_ff_shexp ? (const __nv_bfloat16 *)L.shgate.q : NULL;
                da.fg = L.ffn_norm;
                da.fx = xc;
                da.flraw = b->rl;
                da.fE = E;
                da.fH = H;
            }
            prof_begin(b);
            if (b->fd_ns) { /* flash-decoding kernel, a fixed number of splits (k_attn_dec.cuh) */
                int ns = LL_MIN(b->fd_ns, s->max_splits);
                da.CH = 0;
                da.nsplit = ns;
                da.minpos = b->fd_minpos;
                size_t fsm = attn_fd_smem(HD);
                if (fused) {
                    da.fused = 1;
                    da.kraw = b->kb;
                    da.vraw = b->vb;
                    da.q_norm = L.q_norm;
                    da.k_norm = L.k_norm;
                    da.inv_freq = b->inv_freq;
                    da.rope_cs = b->rope_cs;
                    da.n_rot = hp.n_rot;
                    da.eps = eps;
                    da.tr = ln_slot(b, "attn.fd");
                    if (b->fd_fg == 4) { /* half the heads per block, as many blocks (k_attn_decode_fd<8, false, 4>) */
                        da.nsplit = ns = LL_MAX(1, ns / b->fd_nsdiv);
                        launch_pdl(b, b->kv_q8 ? k_attn_decode_fd<8, false, 4, true> : k_attn_decode_fd<8, false, 4>, dim3(NKV * (FD_G / 4), ns),
                                   dim3(FD_WARPS * 32), attn_fd_smem(HD, 4), da);
                    } else {
                        /* fd_xs: the same number of blocks, one of them per kv head for the appended
                         * position alone (a block takes a whole SM: one more would be a second wave) */
                        if (b->fd_xs && ns >= 2 && s->max_splits >= ns) {
                            da.nsplit = ns = ns - 1;
                            da.xs = 1;
                        }
                        if (ph)
                            launch_pdl(b, b->fd_mma ? k_attn_decode_fd<8, false, FD_G, true, true, true> : k_attn_decode_fd<8, false, FD_G, true, false, true>,
                                       dim3(NKV, ns + da.xs), dim3(FD_WARPS * 32), fsm, da);
                        else
                        launch_pdl(b, b->kv_q8 ? (b->fd_mma ? k_attn_decode_fd<8, false, FD_G, true, true> : k_attn_decode_fd<8, false, FD_G, true>)
                                               : (b->fd_mma ? k_attn_decode_fd<8, false, FD_G, false, true> : k_attn_decode_fd<8, false>),
                                   dim3(NKV, ns + da.xs), dim3(FD_WARPS * 32), fsm, da);
                    }
                    da.tr = NULL;
                } else if (HD == 256)
                    launch_pdl(b, b->kv_q8 ? (b->fd_mma ? k_attn_decode_fd<8, true, FD_G, true, true> : k_attn_decode_fd<8, true, FD_G, true>)
                                           : (b->fd_mma ? k_attn_decode_fd<8, true, FD_G, false, true> : k_attn_decode_fd<8>),
                               dim3(NKV, ns), dim3(FD_WARPS * 32), fsm, da);
                else if (HD == 128) launch_pdl(b, b->kv_q8 ? k_attn_decode_fd<4, true, FD_G, true> : k_attn_decode_fd<4>, dim3(NKV, ns), dim3(FD_WARPS * 32), fsm, da);
                else launch_pdl(b, k_attn_decode_fd<2>, dim3(NKV, ns), dim3(FD_WARPS * 32), fsm, da);
            } else {
                size_t smem = attn_decode_smem(NH / NKV, HD, s->CH);
                k_attn_decode<<<dim3(NKV, s->max_splits), 256, smem, b->st>>>(da);
            }
            da.tr = NULL;
            if (cout) { /* combine + out-projection + fold (k_lattn.cuh); the partials as the combine reads them */
                float *zx = NULL, *zl = NULL;
                layer_znext(b, l, &zx, &zl);
                lean_attn la = {s->part_o, s->part_ml, b->qg, s->d_pos, da.nsplit, da.minpos, da.xs, NH, HD, &L.wo, xold, cx,
                                L.fold_B, L.router.q, hp.n_ff_shexp ? L.shgate.q : NULL, L.ffn_norm, E, crl, zx, zl, b->att_cout == 2, b->cout_xl, L.cout_pk,
                                b->cout_pk == 2, b->cout_cl, ph, b->cout_r};
                prof_end(b, "attn.decode", (double)(s->pos + 1) * NKV * HD * 4, 0);
                prof_begin(b);
                int ok = lean_attn_out(&la, pdl_for(b, PDLK_COUT), b->st, ln_slot(b, "attn.cout"), 1);
                LL_ASSERT(ok); /* cu_init checked the shapes; a layer skipped would leave the next one's buffers dirty */
                prof_end(b, "attn.cout", gmat_bytes(L.wo), 0);
            }
            da.tr = !cout && b->fd_ns && fused ? ln_slot(b, "attn.combine") : NULL;
            if (!fold || afb.B) da.flraw = NULL;
            if (!cout) { /* a head's dims over HD / nd blocks of nd x 16 threads (16 groups of splits): nd = comb_nd
               * (32: 128 blocks of 512 threads at HD 256, session 19), or 64 where 32 does not divide
               * HD or the router fold's rows (H / 8 threads each) do not divide the block */
                int nd = HD % b->comb_nd == 0 && HD > b->comb_nd ? b->comb_nd : HD % 64 == 0 && HD > 64 ? 64 : HD;
                int nt = nd < 64 && nd != HD ? nd * (ATT_COMB_THREADS / 64) : ATT_COMB_THREADS;
                if (fold && !afb.B && nt % (H >> 3)) {
                    nd = HD % 64 == 0 && HD > 64 ? 64 : HD;
                    nt = ATT_COMB_THREADS;
                }
                launch_pdl(b, fold && !afb.B ? k_attn_combine<true> : k_attn_combine<false>, dim3(NH, HD / nd), dim3(nt), 0, da);
                da.tr = NULL;
                prof_end(b, "attn.decode", (double)(s->pos + 1) * NKV * HD * 4, 0);
                launch_gemv(b, pl.out, "attn.out_gemv", &b->q2, 1, fold && afb.B ? &afb : NULL);
            }
        } else {
            int gin = fold && fo.in; /* the in-projection runs in the fused GDN launch (gdn_in) */
            if (!in_done && !gin) launch_gemv(b, pl.in, "gdn.in_gemv", &b->q1);
            if (b->lean && b->gdn_fuse && lean_gdn(&g, DK, &pl.out, b->gdn_part, b->gdn_cnt, b->gdn_hc, 3, 0, b->st, NULL, 0, NULL)) {
                /* step + gated norm + out-projection (+ the router: fold) in one launch (k_lgdn.cuh) */
                prof_begin(b);
                lean_gdn(&g, DK, &pl.out, b->gdn_part, b->gdn_fuse == 2 || (fold && b->gdn_atom) ? NULL : b->gdn_cnt, b->gdn_hc, b->gdn_pre, pdl_for(b, PDLK_GDN), b->st,
                         ln_slot(b, "gdn.fused"), 1, fold ? &fo : NULL);
                prof_end(b, "gdn.fused", gmat_bytes(L.wout) + (double)HV * DK * DV * 8 +
                         (gin ? gmat_bytes(L.wqkv) + gmat_bytes(L.wz) + gmat_bytes(L.wb) + gmat_bytes(L.wa) : 0), 0);
            } else {
                prof_begin(b);
                dim3 gg(HV, DV / 16); /* 2 warps x 8 value columns per block */
                if (DK == 128) launch_pdl(b, k_gdn_step<128, true>, gg, dim3(64), 0, g);
                else if (DK == 64) launch_pdl(b, k_gdn_step<64, true>, gg, dim3(64), 0, g);
                else launch_pdl(b, k_gdn_step<32, true>, gg, dim3(64), 0, g);
                prof_end(b, "gdn.step", (double)HV * DK * DV * 8, 0);
                launch_gemv(b, pl.out, "gdn.out_gemv", &b->q2);
            }
        }
        const moe_args &ma = pl.moe;
        /* the older MoE kernels read q1 (the quantized ffn-normed x) that the older router path
         * writes; the lean MoE kernels normalize x themselves */
        int kf = hp.n_expert_used * hp.n_ff_exp + hp.n_ff_shexp;
        b->moe_gu_bytes = 2 * ((gmat_bytes(L.egate) / E) * hp.n_expert_used + (hp.n_ff_shexp ? gmat_bytes(L.sgate) : 0));
        b->moe_d_bytes = (gmat_bytes(L.edown) / E) * hp.n_expert_used + (hp.n_ff_shexp ? gmat_bytes(L.sdown) : 0);
        int lean_moe_ok = b->lean && lean_moe(&ma, b->nsm, b->pdl, b->st, 0, NULL, NULL);
        in_done = 0;
        if (lean_moe_ok && b->fuse) {
            /* router .. down and the next layer's input projection in one launch (k_fused.cuh) */
            pk_layer pn;
            if (l + 1 < hp.n_layer) decode_layer_args(b, l + 1, &pn, xc, xc);
            pl.router.total_rows = 0;
            for (int i = 0; i < pl.router.nseg; i++) pl.router.total_rows += pl.router.seg[i].W.rows;
            prof_begin(b);
            int r = lean_moe_fused(&ma, &pl.router, l + 1 < hp.n_layer && b->fuse != 2 ? &pn.in : NULL, b->nsm, pdl_for(b, PDLK_MOE), b->st, b->fz_bar,
                                   ln_slot(b, "moe.fused"));
            prof_end(b, "moe.fused", b->moe_gu_bytes + b->moe_d_bytes, 0);
            if (r) {
                in_done = r == 2;
                continue;
            }
        }
        if (!fold) launch_gemv(b, pl.router, "moe.router_gemv", &b->q1, lean_moe_ok);
        int nu_gu = (H >> 5) / gemv_lanes(H), nu_d = (hp.n_ff_exp >> 5) / gemv_lanes(hp.n_ff_exp);
        int rounds = (hp.n_expert_used + 1 + 32 / gemv_lanes(hp.n_ff_exp) - 1) / (32 / gemv_lanes(hp.n_ff_exp));
        bool pf = !b->no_prefetch && nu_gu <= RR_NU_MAX && nu_d == 1 && rounds <= MOE_DOWN_IT && L.egate.type == L.eup.type;
        if (lean_moe_ok && b->moe_sk) {
            /* gate/up .. down + combine in one launch, split by K (k_lmoe_sk.cuh) */
            lean_pf pf = {};
            if (b->pfnext) {
                decode_pf_next(b, l, xc, &pf);
                pf.when = b->pfnext;
            }
            prof_begin(b);
            if (lean_moe_sk(&ma, b->nsm, pdl_for(b, PDLK_MOE), b->st, ln_slot(b, "moe.sk"), fold, &pf, b->sk_ctr + (size_t)l * 16, b->sk_cap, 1)) {
                prof_end(b, "moe.sk", b->moe_gu_bytes + b->moe_d_bytes, 0);
                continue;
            }
        }
        if (lean_moe_ok) {
            prof_begin(b);
            lean_moe(&ma, b->nsm, pdl_for(b, PDLK_MOE), b->st, 1, ln_slot(b, "moe.gateup"), fold ? b->moe_w : NULL, NULL, &L.pack);
            prof_end(b, "moe.gateup", b->moe_gu_bytes, 2 * b->moe_gu_bytes);
            prof_begin(b);
            /* the next layer's input projection into L2 while the down and that projection's
             * prologue run (LILAC_CUDA_PFNEXT) */
            lean_pf pf = {};
            if (b->pfnext) {
                decode_pf_next(b, l, xc, &pf);
                pf.when = b->pfnext;
            }
            lean_moe(&ma, b->nsm, pdl_for(b, PDLK_MOE), b->st, 2, ln_slot(b, "moe.down"), fold ? b->moe_w : NULL, &pf, &L.pack);
            prof_end(b, "moe.down", b->moe_d_bytes, 2 * b->moe_d_bytes);
        } else if (b->qmode && moe_tma_launch(b, ma, kf)) {
        } else if (b->qmode && nu_gu <= RR_NU_MAX && nu_d == 1 && rounds <= MOE_DOWN_IT && L.egate.type == L.eup.type) {
            /* q1 holds the ffn-normed x (router); h is quantized once into q2 */
            prof_begin(b);
            GT_NU_DISPATCH(L.egate.type, nu_gu, moe_gu_q_launch, b, ma, b->q1);
            prof_end(b, "moe.gateup", b->moe_gu_bytes, 2 * b->moe_gu_bytes);
            prof_begin(b);
            gemv_args qh = gemv_make(PRO_PLAIN, b->h, kf, NULL, eps);
            launch_qact(b, qh, b->q2);
            GT_NU_DISPATCH(L.edown.type, 1, moe_down_q_launch, b, ma, b->q2);
            prof_end(b, "moe.down", b->moe_d_bytes, 2 * b->moe_d_bytes);
        } else if (pf) {
            prof_begin(b);
            GT_NU_DISPATCH(L.egate.type, nu_gu, moe_gu_launch, b, ma);
            prof_end(b, "moe.gateup", b->moe_gu_bytes, 2 * b->moe_gu_bytes);
            prof_begin(b);
            GT_NU_DISPATCH(L.edown.type, 1, moe_down_launch, b, ma);
            prof_end(b, "moe.down", b->moe_d_bytes, 2 * b->moe_d_bytes);
        } else {
            int rpw = 32 / gemv_lanes(H), occ = 0;
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_moe_gateup, GEMV_THREADS, qact_smem_bytes(H));
            if (occ < 1) occ = 1;
            int need = (kf + 16 * rpw - 1) / (16 * rpw);
            if (need > b->nsm * occ) need = b->nsm * occ; /* one wave; rows are grid-strided */
            prof_begin(b);
            k_moe_gateup<<<need, GEMV_THREADS, qact_smem_bytes(H), b->st>>>(ma);
            prof_end(b, "moe.gateup", b->moe_gu_bytes, 2 * b->moe_gu_bytes);
            prof_begin(b);
            k_moe_down<<<(H + 7) / 8, 256, qact_smem_bytes(kf), b->st>>>(ma);
            prof_end(b, "moe.down", b->moe_d_bytes, 2 * b->moe_d_bytes);
        }
    }
    gemv_args f = gemv_make(PRO_RMSNORM, xc, H, b->out_norm, eps);
    gemv_add(f, b->lm_head, b->logits, EPI_STORE);
    f.argmax = b->d_argmax;
    launch_gemv(b, f, "lm_head_gemv", &b->q1, b->lean_head);
    prof_begin(b);
    if (b->step_pdl && b->pdl) launch_pdl(b, k_finish<true>, dim3(1), dim3(1), 0, b->d_argmax, b->d_tok, s->d_pos, gen ? b->d_gen : (int *)NULL, b->d_gen_n, 1);
    else k_finish<<<1, 1, 0, b->st>>>(b->d_argmax, b->d_tok, s->d_pos, gen ? b->d_gen : NULL, b->d_gen_n, 1);
    prof_end(b, "finish", 0, 0);
}

/* ------------------------------------------------------------------ prefill */

static void prefill_chunk(cu_backend *b, cu_seq *s, int T, int want_last_logits) {
    const qwen_hparams &hp = b->hp;
    int H = hp.n_embd, HD = hp.head_dim, NH = hp.n_head, NKV = hp.n_head_kv;
    int HV = hp.gdn_n_v_heads, DK = hp.gdn_k_dim, DV = hp.gdn_v_dim, HK = hp.gdn_n_k_heads;
    int QK = HK * DK, CD = 2 * QK + HV * DV, VD = HV * DV, E = hp.n_expert, K = hp.n_expert_used;
    int FF = hp.n_ff_exp, FS = hp.n_ff_shexp;
    float eps = hp.rms_eps;
    prof_begin(b);
    k_embed<<<T, 128, 0, b->st>>>(b->tok_embd, b->d_tokens, b->X, H);
    prof_end(b, "p.embed", 0, 0);
    for (int l = 0; l < hp.n_layer; l++) {
        const dlayer &L = b->L[l];
        prof_begin(b);
        k_rmsnorm_rows<<<T, 256, 0, b->st>>>(b->X, L.attn_norm, b->Xb, H, eps);
        prof_end(b, "p.rmsnorm", 0, 0);
        if (hp.is_attn[l]) {
            float *QG = b->P1, *Kp = b->P2, *Vp = b->P3;
            launch_gemm(b, b->Xb, H, L.wq, T, GM_STORE, QG, L.wq.rows, "p.attn.q_gemm");
            launch_gemm(b, b->Xb, H, L.wk, T, GM_STORE, Kp, L.wk.rows, "p.attn.k_gemm");
            launch_gemm(b, b->Xb, H, L.wv, T, GM_STORE, Vp, L.wv.rows, "p.attn.v_gemm");
            __nv_bfloat16 *kc, *vc;
            seq_kv(b, s, L.attn_idx, &kc, &vc);
            attn_prep_args pa = {QG, L.wq.rows, Kp, L.wk.rows, Vp, L.wv.rows, L.q_norm, L.k_norm, b->inv_freq, NULL,
                                 b->Qb, kc, vc, s->d_pos, NH, NKV, HD, hp.n_rot, s->n_ctx, eps, b->kv_q8};
            prof_begin(b);
            k_attn_prep<<<dim3(NH + 2 * NKV, T), HD, 0, b->st>>>(pa);
            prof_end(b, "p.attn.prep", 0, 0);
            flash_args fa = {b->Qb, kc, vc, QG, L.wq.rows, b->Ob, s->d_pos, T, NH, NKV, s->n_ctx, b->kv_q8};
            dim3 fg((T + 63) / 64, NH);
            double fl = 4.0 * NH * HD * ((double)T * s->pos + (double)T * T / 2);
            prof_begin(b);
            if (b->flash2 && NH == FL2_G * NKV && (HD == 256 || HD == 128)) {
                dim3 f2((T + FL2_QR - 1) / FL2_QR, NKV);
                if (HD == 256 && b->kv_q8) k_flash2_prefill<256, true><<<f2, 256, flash2_smem_bytes<256, true>(), b->st>>>(fa);
                else if (HD == 256) k_flash2_prefill<256><<<f2, 256, flash2_smem_bytes<256>(), b->st>>>(fa);
                else if (b->kv_q8) k_flash2_prefill<128, true><<<f2, 256, flash2_smem_bytes<128, true>(), b->st>>>(fa);
                else k_flash2_prefill<128><<<f2, 256, flash2_smem_bytes<128>(), b->st>>>(fa);
            } else if (HD == 256) k_flash_prefill<256><<<fg, 256, flash_smem_bytes<256>(), b->st>>>(fa);
            else if (HD == 128) k_flash_prefill<128><<<fg, 256, flash_smem_bytes<128>(), b->st>>>(fa);
            else k_flash_prefill<64><<<fg, 256, flash_smem_bytes<64>(), b->st>>>(fa);
            prof_end(b, "p.attn.flash", 0, fl);
            launch_gemm(b, b->Ob, NH * HD, L.wo, T, GM_ADD, b->X, H, "p.attn.o_gemm");
        } else {
            float *QKV = b->P1, *QKVc = b->P2, *Z = b->P3, *O = b->P4;
            float *Bv = b->RL, *Av = b->RL + (size_t)T * HV; /* RL is free until the router */
            launch_gemm(b, b->Xb, H, L.wqkv, T, GM_STORE, QKV, CD, "p.gdn.qkv_gemm");
            launch_gemm(b, b->Xb, H, L.wz, T, GM_STORE, Z, VD, "p.gdn.z_gemm");
            launch_gemm(b, b->Xb, H, L.wb, T, GM_STORE, Bv, HV, "p.gdn.b_gemm");
            launch_gemm(b, b->Xb, H, L.wa, T, GM_STORE, Av, HV, "p.gdn.a_gemm");
            float *ring = s->ring + (size_t)L.gdn_idx * 4 * CD;
            prof_begin(b);
            k_gdn_conv<<<dim3((CD + 255) / 256, T), 256, 0, b->st>>>(QKV, CD, QKVc, L.conv, ring, s->d_pos, T, CD);
            k_gdn_ring<<<(CD + 255) / 256, 256, 0, b->st>>>(QKV, CD, ring, s->d_pos, T, CD);
            prof_end(b, "p.gdn.conv", 0, 0);
            /* the state: read from copy pos & 1, written to copy (pos + T) & 1 (the same copy where T is even
             * or the state is single) */
            float *Sl = seq_state(b, s, L.gdn_idx, 0), *Sl2 = seq_state(b, s, L.gdn_idx, 1);
            float *Sin = gdn_state_copy(Sl, Sl2, s->pos), *Sout = gdn_state_copy(Sl, Sl2, (long)s->pos + T);
            if (b->gdn_chunk) {
                /* W|U overwrite the raw projection in P1 (dead after the conv and the ring update) */
                int nch = (T + GDN_CC - 1) / GDN_CC;
                gdn_chunk_ws ws;
                ws.W = QKV;
                ws.U = QKV + (size_t)HV * T * DK;
                ws.P = b->GW;
                ws.fq = ws.P + (size_t)HV * nch * GDN_CC * GDN_CC;
                ws.fk = ws.fq + (size_t)HV * T;
                ws.lam = ws.fk + (size_t)HV * T;
                gdn_chunk_args ca = {QKVc, Bv, Av, HV, L.dt_bias, L.ssm_a, Sin, O, ws, T, HK, HV, DV, hp.gdn_v_tiled, Sout};
                dim3 gp(nch, HV), gs(HV, DV / 32);
                prof_begin(b);
                if (b->gdn_prep_ti == 2 && DV == DK) { /* the Gram matrices on tensor cores (the default) */
                    if (DK == 128) k_gdn_chunk_prep<128, 2, 2><<<gp, 256, gdn_prep_smem_bytes<128, 2>(), b->st>>>(ca);
                    else if (DK == 64) k_gdn_chunk_prep<64, 2, 2><<<gp, 256, gdn_prep_smem_bytes<64, 2>(), b->st>>>(ca);
                    else k_gdn_chunk_prep<32, 2, 2><<<gp, 256, gdn_prep_smem_bytes<32, 2>(), b->st>>>(ca);
                } else if (b->gdn_prep_ti && DV == DK) {
                    if (DK == 128) k_gdn_chunk_prep<128, 2, 1><<<gp, 256, gdn_prep_smem_bytes<128, 1>(), b->st>>>(ca);
                    else if (DK == 64) k_gdn_chunk_prep<64, 2, 1><<<gp, 256, gdn_prep_smem_bytes<64, 1>(), b->st>>>(ca);
                    else k_gdn_chunk_prep<32, 2, 1><<<gp, 256, gdn_prep_smem_bytes<32, 1>(), b->st>>>(ca);
                } else if (DK == 128 && b->gdn_prep_mb == 1) k_gdn_chunk_prep<128, 1><<<gp, 256, gdn_prep_smem_bytes<128>(), b->st>>>(ca);
                else if (DK == 128) k_gdn_chunk_prep<128><<<gp, 256, gdn_prep_smem_bytes<128>(), b->st>>>(ca);
                else if (DK == 64) k_gdn_chunk_prep<64><<<gp, 256, gdn_prep_smem_bytes<64>(), b->st>>>(ca);
                else k_gdn_chunk_prep<32><<<gp, 256, gdn_prep_smem_bytes<32>(), b->st>>>(ca);
                /* 2 C^2 (DK + DV) for A, P, the solve; per chunk row, 2 (3 DK + C) DV for Vn, O, S */
                prof_end(b, "p.gdn.chunk_prep", 0, 2.0 * T * HV * GDN_CC * (1.5 * DK + 0.5 * (DK + DV)));
                prof_begin(b);
                if (b->gdn_scan_tc == 2) { /* the late-scaled form (the default): the same bits, the fetch never waits */
                    constexpr int F = GTC_PS | GTC_SA | GTC_LS;
                    if (DK == 128) k_gdn_chunk_scan_tc<128, F><<<gs, 256, gdn_scan_tc_smem_bytes<128, F>(), b->st>>>(ca);
                    else if (DK == 64) k_gdn_chunk_scan_tc<64, F><<<gs, 256, gdn_scan_tc_smem_bytes<64, F>(), b->st>>>(ca);
                    else k_gdn_chunk_scan_tc<32, F><<<gs, 256, gdn_scan_tc_smem_bytes<32, F>(), b->st>>>(ca);
                } else if (b->gdn_scan_tc) {
                    constexpr int F = GTC_PS | GTC_SA;
                    if (DK == 128) k_gdn_chunk_scan_tc<128, F><<<gs, 256, gdn_scan_tc_smem_bytes<128, F>(), b->st>>>(ca);
                    else if (DK == 64) k_gdn_chunk_scan_tc<64, F><<<gs, 256, gdn_scan_tc_smem_bytes<64, F>(), b->st>>>(ca);
                    else k_gdn_chunk_scan_tc<32, F><<<gs, 256, gdn_scan_tc_smem_bytes<32, F>(), b->st>>>(ca);
                } else if (DK == 128) k_gdn_chunk_scan<128, 32><<<gs, 256, gdn_scan_smem_bytes<128, 32>(), b->st>>>(ca);
                else if (DK == 64) k_gdn_chunk_scan<64, 32><<<gs, 256, gdn_scan_smem_bytes<64, 32>(), b->st>>>(ca);
                else k_gdn_chunk_scan<32, 32><<<gs, 256, gdn_scan_smem_bytes<32, 32>(), b->st>>>(ca);
                prof_end(b, "p.gdn.chunk_scan", 0, 2.0 * T * HV * DV * (3.0 * DK + GDN_CC));
            } else {
                gdn_args g = {QKVc, Bv, Av, HV, L.conv, ring, Sl, L.dt_bias, L.ssm_a, O, s->d_pos, T, HK, HV, DV, hp.gdn_v_tiled, Sl2};
                dim3 gg(HV, DV / 16); /* 2 warps x 8 value columns per block */
                prof_begin(b);
                if (DK == 128) k_gdn_step<128, false><<<gg, 64, 0, b->st>>>(g);
                else if (DK == 64) k_gdn_step<64, false><<<gg, 64, 0, b->st>>>(g);
                else k_gdn_step<32, false><<<gg, 64, 0, b->st>>>(g);
                prof_end(b, "p.gdn.scan", 0, 6.0 * T * HV * DK * DV);
            }
            prof_begin(b);
            k_gated_norm_rows<<<dim3(T, HV), 32, 0, b->st>>>(O, Z, VD, L.gdn_norm, b->Ob, HV, DV, eps);
            prof_end(b, "p.gdn.norm", 0, 0);
            launch_gemm(b, b->Ob, VD, L.wout, T, GM_ADD, b->X, H, "p.gdn.out_gemm");
        }
        /* MoE */
        prof_begin(b);
        k_rmsnorm_rows<<<T, 256, 0, b->st>>>(b->X, L.ffn_norm, b->Xb, H, eps);
        prof_end(b, "p.rmsnorm", 0, 0);
        launch_gemm(b, b->Xb, H, L.router, T, GM_STORE, b->RL, E + 1, "p.moe.router_gemm");
        if (FS) launch_gemm(b, b->Xb, H, L.shgate, T, GM_STORE, b->RL + E, E + 1, "p.moe.router_gemm");
        int n = T * K;
        prof_begin(b);
        k_topk_rows<<<T, 32, 0, b->st>>>(b->RL, E + 1, E, K, b->ids, b->wts);
        cudaMemsetAsync(b->cnt, 0, (size_t)E * 4, b->st);
        k_moe_count<<<(n + 255) / 256, 256, 0, b->st>>>(b->ids, n, b->cnt);
        int bm = b->gemm_bm == 128 && n >= 64 * E ? 128 : 64; /* rows per expert tile: 128 once experts average 64+ rows */
        k_moe_tiles<<<1, 1, 0, b->st>>>(b->cnt, E, bm, b->cursor, b->tile_e, b->tile_m0, b->tile_mn, b->n_tiles);
        k_moe_scatter<<<(n + 255) / 256, 256, 0, b->st>>>(b->ids, n, b->cursor, b->perm);
        prof_end(b, "p.moe.route", 0, 0);
        int max_tiles = (n + bm - 1) / bm + E;
        gemm_args ga = {};
        ga.A = b->Xb; ga.lda = H; ga.a_map = b->perm; ga.a_div = K; ga.W = L.egate; ga.N = FF; ga.K = H; ga.M = n;
        ga.tile_e = b->tile_e; ga.tile_m0 = b->tile_m0; ga.tile_mn = b->tile_mn; ga.n_tiles = b->n_tiles;
        ga.w_rows_per_e = FF; ga.mode = GM_STORE; ga.C = b->Gb; ga.ldc = FF; ga.red4 = b->gemm_red4;
        double fe = 2.0 * n * FF * H;
        gemm_args gl = ga;
        gl.W2 = L.eup; gl.mode = GM_GLU; gl.H = b->Hb; gl.ldh = FF;
        if (b->gemm2 && b->gemm_glu && gemm2_supports(gl)) {
            /* gate and up in one GEMM: h from the accumulators, no fp32 gate round trip */
            prof_begin(b);
            gemm_run(b, bm, dim3((FF + G2_BN / 2 - 1) / (G2_BN / 2), max_tiles), gl);
            prof_end(b, "p.moe.gateup_gemm", 0, 2 * fe);
        } else {
            prof_begin(b);
            gemm_run(b, bm, dim3((FF + GM_BN - 1) / GM_BN, max_tiles), ga);
            prof_end(b, "p.moe.gate_gemm", 0, fe);
            ga.W = L.eup; ga.mode = GM_SWIGLU; ga.G = b->Gb; ga.ldg = FF; ga.H = b->Hb; ga.ldh = FF;
            prof_begin(b);
            gemm_run(b, bm, dim3((FF + GM_BN - 1) / GM_BN, max_tiles), ga);
            prof_end(b, "p.moe.up_gemm", 0, fe);
        }
        gemm_args gd = ga;
        gd.A = b->Hb; gd.lda = FF; gd.a_map = NULL; gd.W = L.edown; gd.N = H; gd.K = FF; gd.w_rows_per_e = H;
        gd.mode = GM_SCATTER_ADD; gd.C = b->X; gd.ldc = H; gd.c_map = b->perm; gd.c_div = K; gd.c_w = b->wts;
        /* deterministic: the rows added in 64-bit fixed point into Gb (free once the up GEMM has read
         * it; sized for T * H of them), zeroed first */
        gd.fix = b->moe_det == 1 ? (unsigned long long *)b->Gb : NULL;
        if (b->moe_det == 2) { gd.mode = GM_STORE; gd.C = b->moe_y; } /* the ordered sum below instead */
        prof_begin(b);
        if (gd.fix) cudaMemsetAsync(gd.fix, 0, (size_t)T * H * 8, b->st);
        gemm_run(b, bm, dim3((H + GM_BN - 1) / GM_BN, max_tiles), gd);
        if (gd.fix) k_fix_add<<<LL_MIN((T * H + 255) / 256, 4 * b->nsm), 256, 0, b->st>>>(gd.fix, b->X, (long)T * H);
        if (b->moe_det == 2) {
            k_inv_perm<<<(n + 255) / 256, 256, 0, b->st>>>(b->perm, n, b->moe_inv);
            k_moe_sum_ordered<<<T, 128, 0, b->st>>>(b->moe_y, b->moe_inv, b->wts, b->X, T, K, H);
        }
        prof_end(b, "p.moe.down_gemm", 0, fe);
        if (FS) {
            gemm_args sl = {};
            sl.A = b->Xb; sl.lda = H; sl.W = L.sgate; sl.W2 = L.sup; sl.N = FS; sl.K = H; sl.M = T; sl.mode = GM_GLU;
            sl.H = b->Hs; sl.ldh = FS;
            if (b->gemm2 && b->gemm_glu && gemm2_supports(sl)) {
                long blocks128 = (long)((FS + G2_BN / 2 - 1) / (G2_BN / 2)) * ((T + 127) / 128);
                int sbm = b->gemm_bm == 128 && blocks128 >= 2L * b->nsm ? 128 : 64;
                prof_begin(b);
                gemm_run(b, sbm, dim3((FS + G2_BN / 2 - 1) / (G2_BN / 2), (T + sbm - 1) / sbm), sl);
                prof_end(b, "p.moe.shared_gemm", gmat_bytes(L.sgate) + gmat_bytes(L.sup) + (double)T * H * 2, 4.0 * T * FS * H);
            } else {
                launch_gemm(b, b->Xb, H, L.sgate, T, GM_STORE, b->Gb, FS, "p.moe.shared_gemm");
                launch_gemm(b, b->Xb, H, L.sup, T, GM_SWIGLU, NULL, 0, "p.moe.shared_gemm", b->Gb, b->Hs);
            }
            launch_gemm(b, b->Hs, FS, L.sdown, T, GM_ADD_GATED, b->X, H, "p.moe.shared_gemm", NULL, NULL, b->RL + E, E + 1);
        }
    }
    if (want_last_logits) {
        gemv_args f = gemv_make(PRO_RMSNORM, b->X + (size_t)(T - 1) * H, H, b->out_norm, eps);
        gemv_add(f, b->lm_head, b->logits, EPI_STORE);
        f.argmax = b->d_argmax;
        launch_gemv(b, f, "p.lm_head_gemv", &b->q1, b->lean_head);
        prof_begin(b);
        k_finish<<<1, 1, 0, b->st>>>(b->d_argmax, b->d_tok, s->d_pos, NULL, b->d_gen_n, T);
        prof_end(b, "p.finish", 0, 0);
    } else {
        k_pos_add<<<1, 1, 0, b->st>>>(s->d_pos, T);
    }
}

/* Logits of every row of the chunk (tests): lm_head GEMV per row, copied to host. */
static ll_status chunk_all_logits(cu_backend *b, int T, float *dst) {
    const qwen_hparams &hp = b->hp;
    for (int t = 0; t < T; t++) {
        gemv_args f = gemv_make(PRO_RMSNORM, b->X + (size_t)t * hp.n_embd, hp.n_embd, b->out_norm, hp.rms_eps);
        gemv_add(f, b->lm_head, b->logits, EPI_STORE);
        launch_gemv(b, f, "p.lm_head_gemv", &b->q1, b->lean_head);
        CU_TRY(cudaMemcpyAsync(dst + (size_t)t * hp.n_vocab, b->logits, (size_t)hp.n_vocab * 4, cudaMemcpyDeviceToHost, b->st));
    }
    return LL_OK;
}

/* ------------------------------------------------------------------ vtable */

static cu_backend *CB(ll_backend *be) { return (cu_backend *)be; }

static void cu_free(ll_backend *be) {
    cu_backend *b = CB(be);
    if (!b) return;
    cudaSetDevice(b->dev);
    if (b->st) cudaStreamSynchronize(b->st);
    for (size_t i = 0; i < b->n_allocs; i++) cudaFree(b->allocs[i]);
    ll_free(b->allocs);
    for (size_t i = 0; i < b->n_hallocs; i++) cudaFreeHost(b->hallocs[i]);
    ll_free(b->hallocs);
    if (b->h_tok) cudaFreeHost(b->h_tok);
    if (b->h_pk_err) cudaFreeHost(b->h_pk_err);
    ll_free(b->pk_prof);
    if (b->h_tokens) cudaFreeHost(b->h_tokens);
    for (int i = 0; i < 2 * PROF_MAX; i++)
        if (b->prof.ev[i]) cudaEventDestroy(b->prof.ev[i]);
    if (b->st) cudaStreamDestroy(b->st);
    ll_free(b);
}

static void seq_destroy(cu_seq *s) {
    if (!s) return;
    if (s->graph) cudaGraphExecDestroy(s->graph);
    if (s->graph_k) cudaGraphExecDestroy(s->graph_k);
    ll_free(s->pk);
    cudaFree(s->d_pos);
    cudaFree(s->kv);
    cudaFree(s->S);
    cudaFree(s->ring);
    cudaFree(s->part_o);
    cudaFree(s->part_ml);
    ll_free(s);
}

static ll_status cu_seq_new(ll_backend *be, int32_t n_ctx, ll_seq **out) {
    cu_backend *b = CB(be);
    const qwen_hparams &hp = b->hp;
    *out = NULL;
    if (n_ctx <= 0) return ll_err(LL_ERR_INVALID, "cuda: seq_new: n_ctx %d", n_ctx);
    cu_seq *s = (cu_seq *)ll_calloc(1, sizeof(cu_seq));
    if (!s) return ll_err(LL_ERR_OOM, "cuda: out of host memory");
    s->n_ctx = n_ctx;
    s->CH = n_ctx <= 131072 ? 64 : 128; /* splits <= ATT_COMB_MAXS for n_ctx <= 262144 */
    if ((n_ctx + s->CH - 1) / s->CH > ATT_COMB_MAXS) s->CH = (n_ctx + ATT_COMB_MAXS - 1) / ATT_COMB_MAXS;
    s->max_splits = (n_ctx + s->CH - 1) / s->CH;
    int CD = qwen_gdn_conv_dim(&hp);
    size_t kvb = (size_t)b->n_attn * 2 * hp.n_head_kv * n_ctx * kv_row_bytes(hp.head_dim, b->kv_q8);
    size_t Sb = seq_state_floats(b) * 4 * (1 + (b->gdn_db != 0)); /* both copies where double-buffered */
    size_t rb = (size_t)b->n_gdn * 4 * CD * 4;
    size_t pob = (size_t)s->max_splits * hp.n_head * hp.head_dim * 4, pmb = (size_t)s->max_splits * hp.n_head * 2 * 4;
    cudaError_t e = cudaSetDevice(b->dev);
    if (e == cudaSuccess) e = cudaMalloc(&s->d_pos, 16);
    if (e == cudaSuccess) e = cudaMalloc(&s->kv, kvb ? kvb : 16);
    if (e == cudaSuccess) e = cudaMalloc(&s->S, Sb ? Sb : 16);
    if (e == cudaSuccess) e = cudaMalloc(&s->ring, rb ? rb : 16);
    if (e == cudaSuccess) e = cudaMalloc(&s->part_o, pob);
    if (e == cudaSuccess) e = cudaMalloc(&s->part_ml, pmb);
    if (e != cudaSuccess) {
        seq_destroy(s);
        return ll_err(LL_ERR_OOM, "cuda: seq_new(n_ctx %d): %zu bytes of KV cache + state: %s", n_ctx, kvb + Sb + rb,
                      cudaGetErrorString(e));
    }
    s->bytes = kvb + Sb + rb + pob + pmb;
    b->seq_bytes += s->bytes;
    if (b->seq_bytes > b->seq_bytes_peak) b->seq_bytes_peak = b->seq_bytes;
    size_t fr, tot;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot - fr > b->mem_peak) b->mem_peak = tot - fr;
    be->v->seq_reset(be, (ll_seq *)s);
    *out = (ll_seq *)s;
    return LL_OK;
}

static void cu_seq_free(ll_backend *be, ll_seq *sq) {
    if (sq) CB(be)->seq_bytes -= ((cu_seq *)sq)->bytes;
    seq_destroy((cu_seq *)sq);
}

static void cu_seq_reset(ll_backend *be, ll_seq *sq) {
    cu_backend *b = CB(be);
    cu_seq *s = (cu_seq *)sq;
    const qwen_hparams &hp = b->hp;
    s->pos = 0;
    cudaMemsetAsync(s->d_pos, 0, 4, b->st);
    cudaMemsetAsync(s->S, 0, seq_state_floats(b) * 4 * (1 + (b->gdn_db != 0)), b->st); /* copy 0 is the state at 0; both for tidiness */
    cudaMemsetAsync(s->ring, 0, (size_t)b->n_gdn * 4 * qwen_gdn_conv_dim(&hp) * 4, b->st);
    cudaStreamSynchronize(b->st);
}

static int32_t cu_seq_pos(ll_backend *be, const ll_seq *sq) { return ((const cu_seq *)sq)->pos; }

/* Snapshot: [int32 pos][int32 n_ctx] then per attention layer K and V of positions [0, pos) per kv
 * head, then all GDN states and conv rings. */
static size_t cu_seq_state_bytes(ll_backend *be, const ll_seq *sq) {
    cu_backend *b = CB(be);
    const cu_seq *s = (const cu_seq *)sq;
    const qwen_hparams &hp = b->hp;
    return 8 + (size_t)b->n_attn * 2 * hp.n_head_kv * s->pos * kv_row_bytes(hp.head_dim, b->kv_q8) +
           (size_t)b->n_gdn * hp.gdn_n_v_heads * hp.gdn_k_dim * hp.gdn_v_dim * 4 +
           (size_t)b->n_gdn * 4 * qwen_gdn_conv_dim(&hp) * 4;
}

static ll_status seq_copy(cu_backend *b, cu_seq *s, uint8_t *host, int pos, int to_host) {
    const qwen_hparams &hp = b->hp;
    size_t rbk = kv_row_bytes(hp.head_dim, b->kv_q8), off = 8, row = (size_t)pos * rbk;
    for (int a = 0; a < b->n_attn * 2 * hp.n_head_kv; a++) {
        uint8_t *dev = (uint8_t *)s->kv + (size_t)a * s->n_ctx * rbk;
        if (row) CU_TRY(cudaMemcpy(to_host ? host + off : dev, to_host ? dev : host + off, row,
                                   to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice));
        off += row;
    }
    size_t Sb = seq_state_floats(b) * 4;
    size_t rb = (size_t)b->n_gdn * 4 * qwen_gdn_conv_dim(&hp) * 4;
    float *Sc = seq_state_at(b, s, pos); /* the copy that holds the state after pos tokens */
    if (Sb) CU_TRY(cudaMemcpy(to_host ? (void *)(host + off) : (void *)Sc, to_host ? (void *)Sc : (void *)(host + off), Sb,
                              to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice));
    off += Sb;
    if (rb) CU_TRY(cudaMemcpy(to_host ? (void *)(host + off) : (void *)s->ring, to_host ? (void *)s->ring : (void *)(host + off),
                              rb, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice));
    return LL_OK;
}

static ll_status cu_seq_save(ll_backend *be, const ll_seq *sq, void *dst, size_t cap) {
    cu_backend *b = CB(be);
    cu_seq *s = (cu_seq *)sq;
    size_t need = cu_seq_state_bytes(be, sq);
    if (cap < need) return ll_err(LL_ERR_OVERFLOW, "cuda: seq_save: buffer of %zu bytes, need %zu", cap, need);
    CU_TRY(cudaStreamSynchronize(b->st));
    int32_t hdr[2] = {s->pos, s->n_ctx};
    memcpy(dst, hdr, 8);
    return seq_copy(b, s, (uint8_t *)dst, s->pos, 1);
}

static ll_status cu_seq_load(ll_backend *be, ll_seq *sq, const void *src, size_t n) {
    cu_backend *b = CB(be);
    cu_seq *s = (cu_seq *)sq;
    int32_t hdr[2];
    if (n < 8) return ll_err(LL_ERR_FORMAT, "cuda: seq_load: %zu bytes, need a header of 8", n);
    memcpy(hdr, src, 8);
    if (hdr[0] < 0 || hdr[0] > s->n_ctx)
        return ll_err(LL_ERR_OVERFLOW, "cuda: seq_load: snapshot at position %d does not fit n_ctx %d", hdr[0], s->n_ctx);
    int save = s->pos;
    s->pos = hdr[0];
    size_t need = cu_seq_state_bytes(be, sq);
    if (n != need) {
        s->pos = save;
        return ll_err(LL_ERR_FORMAT, "cuda: seq_load: %zu bytes, expected %zu for position %d", n, need, hdr[0]);
    }
    CU_TRY(cudaStreamSynchronize(b->st));
    LL_TRY(seq_copy(b, s, (uint8_t *)src, s->pos, 0));
    CU_TRY(cudaMemcpy(s->d_pos, &s->pos, 4, cudaMemcpyHostToDevice));
    return LL_OK;
}

static ll_status check_launch(const char *what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return ll_err(LL_ERR_DEVICE, "cuda: %s: %s", what, cudaGetErrorString(e));
    return LL_OK;
}

/* ------------------------------------------------------------------ persistent decode (k_persist.cuh) */

/* A GEMV the persistent kernel can run: whole 32-element units (the dot kernels' granule). */
static int pk_gemv_ok(const gemv_args &a) { return a.nseg >= 1 && a.K % 32 == 0; }

/* Grid barriers of one persistent step: embed, 8 per attention layer, 6 per GDN layer, lm_head. */
static int pk_n_barriers(const qwen_hparams &hp) {
    int n = 2;
    for (int l = 0; l < hp.n_layer; l++) n += hp.is_attn[l] ? 8 : 6;
    return n;
}

static gemv_args pk_head_args(cu_backend *b) {
    gemv_args f = gemv_make(PRO_RMSNORM, b->x, b->hp.n_embd, b->out_norm, b->hp.rms_eps);
    gemv_add(f, b->lm_head, b->logits, EPI_STORE);
    f.argmax = b->d_argmax;
    f.total_rows = b->lm_head.rows;
    return f;
}

/* Builds the layer table and sizes the grid; leaves b->persist = 0 where a shape or type does not
 * fit the kernel (the per-kernel path then runs) or LILAC_CUDA_PERSIST=0. */
static ll_status pk_setup(cu_backend *b) {
    const qwen_hparams &hp = b->hp;
    b->persist = 0;
    /* opt-in for now: correct (GPU tests) but slower than the per-kernel graph, 122 vs 274 tok/s at
     * 4K (bench/results/2026-11-30-h200-s3); see dev/kernels/NOTES.md */
    if (!(getenv("LILAC_CUDA_PERSIST") && atoi(getenv("LILAC_CUDA_PERSIST")))) return LL_OK;
    if (b->kv_q8) return LL_OK; /* its attention phases read a bf16 cache */
    int H = hp.n_embd, FF = hp.n_ff_exp, kf = hp.n_expert_used * FF + hp.n_ff_shexp;
    if (H % 32 || hp.n_expert > 1024 || hp.n_expert_used + 1 > QK_MAX_TOPK || FF % 32 || hp.n_ff_shexp % 32 || hp.gdn_v_dim % 8)
        return LL_OK;
    if (b->n_gdn && hp.gdn_k_dim != 32 && hp.gdn_k_dim != 64 && hp.gdn_k_dim != 128) return LL_OK;
    if (b->n_attn && (!b->fd_ns || hp.head_dim > PK_THREADS)) return LL_OK; /* fd_ns: head_dim and G fit k_attn_dec */
    gemv_args head = pk_head_args(b);
    if (!pk_gemv_ok(head)) return LL_OK;
    pk_layer *pl = (pk_layer *)ll_calloc((size_t)hp.n_layer, sizeof(pk_layer));
    if (!pl) return ll_err(LL_ERR_OOM, "cuda: out of host memory");
    int ok = 1, kmax = LL_MAX(H, kf);
    for (int l = 0; l < hp.n_layer && ok; l++) {
        decode_layer_args(b, l, &pl[l], b->x, b->x);
        ok = pk_gemv_ok(pl[l].in) && pk_gemv_ok(pl[l].out) && pk_gemv_ok(pl[l].router);
        kmax = LL_MAX(kmax, pl[l].out.K);
    }
    /* dynamic shared memory: the activation (or the GDN step's q/k) first, then the ring of weight
     * stages; the flash-decoding scratch overlays both. Stages of 20 KB (a tile of 8 gate + 8 up
     * Q4_K rows of 2048, or 4 rows of the 9 down matrices), as many as leave 2 blocks per SM. */
    size_t act = qact_smem_bytes(kmax);
    if (b->n_gdn) act = LL_MAX(act, (size_t)PK_WARPS * 2 * hp.gdn_k_dim * 4);
    if (b->n_attn) act = LL_MAX(act, (size_t)(PK_THREADS + 8 * b->nsm) * 4); /* the combine's scratch (nsplit <= grid <= 8 x SMs) */
    size_t ring_off = (act + 127) & ~(size_t)127;
    int stage = getenv("LILAC_CUDA_PK_STAGE") ? atoi(getenv("LILAC_CUDA_PK_STAGE")) * 1024 : 20 * 1024;
    int nst_max = getenv("LILAC_CUDA_PK_NST") ? atoi(getenv("LILAC_CUDA_PK_NST")) : PK_NST_MAX;
    stage = LL_MAX(4096, stage) & ~127;
    nst_max = LL_MAX(2, LL_MIN(nst_max, PK_NST_MAX));
    /* blocks per SM: 1 (default: all 255 registers, no spills, a deeper ring) or 2 (LILAC_CUDA_PK_OCC=2) */
    int want = getenv("LILAC_CUDA_PK_OCC") ? LL_MAX(1, LL_MIN(2, atoi(getenv("LILAC_CUDA_PK_OCC")))) : 1;
    int occ = 0, nst = nst_max;
    size_t smem = 0;
    for (; ok && nst >= 2; nst--) {
        smem = ring_off + (size_t)nst * stage;
        if (b->n_attn) smem = LL_MAX(smem, attn_fd_smem(hp.head_dim));
        if (pk_kernel_config(want, smem, &occ) == cudaSuccess && occ >= want) break;
    }
    cudaGetLastError();
    if (!ok || nst < 2 || occ < 1) { ll_free(pl); return LL_OK; }
    ll_status st = dev_alloc(b, (void **)&b->d_pk_layers, (size_t)hp.n_layer * sizeof(pk_layer));
    if (st == LL_OK) st = cudaMemcpy(b->d_pk_layers, pl, (size_t)hp.n_layer * sizeof(pk_layer), cudaMemcpyHostToDevice) == cudaSuccess
                              ? LL_OK : ll_err(LL_ERR_DEVICE, "cuda: uploading the decode layer table");
    ll_free(pl);
    LL_TRY(st);
    DALLOC(b, b->d_pk_bar, 256); /* [0] arrivals, [1] epoch, [32] released target (own line) */
    DALLOC(b, b->d_pk_err, 16);
    b->pk_prof = (pk_params *)ll_calloc(1, sizeof(pk_params));
    if (!b->pk_prof) return ll_err(LL_ERR_OOM, "cuda: out of host memory");
    DALLOC(b, b->d_pk_ts, 4 * PK_TS * 8);
    CU_TRY(cudaMemset(b->d_pk_bar, 0, 256));
    CU_TRY(cudaMemset(b->d_pk_err, 0, 16));
    CU_TRY(cudaMallocHost(&b->h_pk_err, 16));
    *b->h_pk_err = 0;
    b->pk_grid = b->nsm * want;
    b->pk_minb = want;
    b->pk_smem = smem;
    b->pk_ring_off = (int)ring_off;
    b->pk_nst = nst;
    b->pk_stage = stage;
    b->pk_empty = getenv("LILAC_CUDA_PK_EMPTY") && atoi(getenv("LILAC_CUDA_PK_EMPTY"));
    b->persist = 1;
    fprintf(stderr, "cuda: persistent decode kernel: %d blocks x %d threads (%d per SM resident), %zu B dynamic shared memory "
            "(%d stages of %d B)%s\n", b->pk_grid, PK_THREADS, occ, smem, nst, stage,
            b->pk_empty ? "; EMPTY phases (barrier cost only, wrong logits)" : "");
    return LL_OK;
}

/* Writes the parameters of a step of sequence s into dst (host; the launch passes them by value): gen != 0 logs consumed tokens,
 * ts != NULL records the barrier times. */
static ll_status pk_params_write(cu_backend *b, cu_seq *s, int gen, unsigned long long *ts, pk_params *dst) {
    const qwen_hparams &hp = b->hp;
    pk_params P;
    memset(&P, 0, sizeof(P));
    P.L = b->d_pk_layers;
    P.n_layer = hp.n_layer;
    P.tok_embd = b->tok_embd;
    P.tok = b->d_tok;
    P.x = b->x;
    P.H = hp.n_embd;
    P.head = pk_head_args(b);
    P.gen = gen ? b->d_gen : NULL;
    P.gen_n = b->d_gen_n;
    P.pos = s->d_pos;
    P.kv = s->kv; P.S = s->S; P.S2 = seq_state(b, s, 0, 1); P.ring = s->ring; P.part_o = s->part_o; P.part_ml = s->part_ml;
    P.n_ctx = s->n_ctx;
    P.nsplit = hp.n_head_kv ? LL_MAX(1, LL_MIN(LL_MIN(b->pk_grid, 8 * b->nsm) / hp.n_head_kv, s->max_splits)) : 1;
    P.qkv = b->qkv; P.ab = b->ab; P.o = b->o; P.qg = b->qg; P.kb = b->kb; P.vb = b->vb; P.q = b->q; P.att = b->att;
    P.inv_freq = b->inv_freq;
    P.NH = hp.n_head; P.NKV = hp.n_head_kv; P.HD = hp.head_dim; P.n_rot = hp.n_rot;
    P.HK = hp.gdn_n_k_heads; P.HV = hp.gdn_n_v_heads; P.DK = hp.gdn_k_dim; P.DV = hp.gdn_v_dim; P.tiled = hp.gdn_v_tiled;
    P.CD = qwen_gdn_conv_dim(&hp);
    P.eps = hp.rms_eps;
    P.ring_off = b->pk_ring_off; P.nst = b->pk_nst; P.stage = b->pk_stage;
    P.copy = getenv("LILAC_CUDA_PK_COPY") && !strcmp(getenv("LILAC_CUDA_PK_COPY"), "bulk") ? PK_COPY_BULK : PK_COPY_ASYNC;
    P.bar = b->d_pk_bar; P.epoch = b->d_pk_bar + 1; P.flag = b->d_pk_bar + 32;
    P.prof = ts;
    P.err = b->d_pk_err;
    if (b->pk_empty) P.empty = pk_n_barriers(hp);
    P.diag = getenv("LILAC_CUDA_PK_DIAG") ? atoi(getenv("LILAC_CUDA_PK_DIAG")) : 0;
    P.poll_ns = getenv("LILAC_CUDA_PK_POLL_NS") ? atoi(getenv("LILAC_CUDA_PK_POLL_NS")) : 0;
    *dst = P;
    return LL_OK;
}

static void decode_step_persist(cu_backend *b, cu_seq *s, const pk_params *P) {
    (void)s;
    pk_kernel_launch(b->pk_minb, b->pk_grid, b->pk_smem, b->st, P);
}

/* After a synchronisation that followed persistent steps: the barrier-timeout flag. */
static ll_status pk_check(cu_backend *b) {
    if (!b->persist) return LL_OK;
    CU_TRY(cudaMemcpy(b->h_pk_err, b->d_pk_err, 4, cudaMemcpyDeviceToHost));
    if (*b->h_pk_err) {
        cudaMemset(b->d_pk_err, 0, 4);
        return ll_err(LL_ERR_DEVICE, "cuda: persistent decode kernel: a grid barrier timed out (blocks not co-resident?); "
                                     "LILAC_CUDA_PERSIST=0 selects the per-kernel decode");
    }
    return LL_OK;
}

/* Name and estimated bytes of barrier phase i of a persistent step (the order of k_decode_persist). */
static const char *pk_phase(cu_backend *b, const cu_seq *s, int i, double *bytes) {
    const qwen_hparams &hp = b->hp;
    *bytes = 0;
    if (i == 0) return "embed";
    i--;
    for (int l = 0; l < hp.n_layer; l++) {
        const dlayer &L = b->L[l];
        int attn = hp.is_attn[l], np = attn ? 8 : 6;
        if (i >= np) { i -= np; continue; }
        int E = hp.n_expert, k = hp.n_expert_used;
        if (i >= np - 3) {
            int j = i - (np - 3);
            if (j == 0) { *bytes = gmat_bytes(L.router) + (hp.n_ff_shexp ? gmat_bytes(L.shgate) : 0); return "moe.router_gemv"; }
            if (j == 1) { *bytes = 2 * ((gmat_bytes(L.egate) / E) * k + (hp.n_ff_shexp ? gmat_bytes(L.sgate) : 0)); return "moe.gateup"; }
            *bytes = (gmat_bytes(L.edown) / E) * k + (hp.n_ff_shexp ? gmat_bytes(L.sdown) : 0);
            return "moe.down";
        }
        if (attn) {
            static const char *an[5] = {"attn.qkv_gemv", "attn.prep", "attn.decode", "attn.combine", "attn.out_gemv"};
            if (i == 0) *bytes = gmat_bytes(L.wq) + gmat_bytes(L.wk) + gmat_bytes(L.wv);
            if (i == 2) *bytes = (double)(s->pos + 1) * hp.n_head_kv * hp.head_dim * 4;
            if (i == 4) *bytes = gmat_bytes(L.wo);
            return an[i];
        }
        static const char *gn[3] = {"gdn.in_gemv", "gdn.step", "gdn.out_gemv"};
        if (i == 0) *bytes = gmat_bytes(L.wqkv) + gmat_bytes(L.wz) + gmat_bytes(L.wb) + gmat_bytes(L.wa);
        if (i == 1) *bytes = (double)hp.gdn_n_v_heads * hp.gdn_k_dim * hp.gdn_v_dim * 8;
        if (i == 2) *bytes = gmat_bytes(L.wout);
        return gn[i];
    }
    *bytes = gmat_bytes(b->lm_head);
    return "lm_head_gemv";
}

/* LILAC_CUDA_PK_TRACE=1: one line per phase of a profiled persistent step (µs from the moment block
 * 0 left the barrier that opened it): the last block's activation built, the first and the last
 * block arriving at the closing barrier, and the release (block 0 leaving it). Separates the cost
 * of the work, of the slowest block and of the barrier itself. */
static void pk_trace(cu_backend *b, const cu_seq *s, const unsigned long long *ts, int n) {
    const unsigned long long *last = ts + PK_TS, *first = ts + 2 * PK_TS, *act = ts + 3 * PK_TS;
    fprintf(stderr, "pk trace: phase | start | activation built (last block) | first arrival | last arrival | released  (µs)\n");
    for (int i = 0; i < n; i++) {
        double bytes, t0 = (double)ts[i];
        const char *name = pk_phase(b, s, i, &bytes);
        fprintf(stderr, "pk %3d %-16s %9.2f | %7.2f | %7.2f | %7.2f | %7.2f\n", i, name, (t0 - ts[0]) * 1e-3,
                act[i] ? (act[i] - t0) * 1e-3 : 0.0, (first[i] - t0) * 1e-3, (last[i] - t0) * 1e-3, (ts[i + 1] - t0) * 1e-3);
    }
}

static ll_status ensure_graph(cu_backend *b, cu_seq *s) {
    if (s->graph) return LL_OK;
    if (b->persist) {
        if (!s->pk && !(s->pk = (pk_params *)ll_calloc(1, sizeof(pk_params)))) return ll_err(LL_ERR_OOM, "cuda: out of host memory");
        LL_TRY(pk_params_write(b, s, 1, NULL, s->pk));
    }
    double t0 = ll_time_sec();
    cudaGraph_t g;
    CU_TRY(cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal));
    if (b->persist) decode_step_persist(b, s, s->pk);
    else decode_step(b, s, 1);
    cudaError_t e = cudaStreamEndCapture(b->st, &g);
    if (e != cudaSuccess) return ll_err(LL_ERR_DEVICE, "cuda: capturing the decode graph: %s", cudaGetErrorString(e));
    e = cudaGraphInstantiate(&s->graph, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) { s->graph = NULL; return ll_err(LL_ERR_DEVICE, "cuda: instantiating the decode graph: %s", cudaGetErrorString(e)); }
    /* the exec's upload in stream order (behind a prefill in flight), not inside the first decode step's launch */
    CU_TRY(cudaGraphUpload(s->graph, b->st));
    b->graph_s += ll_time_sec() - t0;
    b->graph_n++;
    return LL_OK;
}

/* The graph of b->graph_steps decode steps (generate's runs of that many tokens), where it applies:
 * not for the persistent kernel's step or with the in-graph trace (its slots are per launch). */
static ll_status ensure_graph_k(cu_backend *b, cu_seq *s) {
    if (s->graph_k || b->graph_steps <= 1 || b->persist || b->ln_tr) return LL_OK;
    cudaGraph_t g;
    CU_TRY(cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < b->graph_steps; i++) decode_step(b, s, 1, i > 0 && b->step_pdl);
    cudaError_t e = cudaStreamEndCapture(b->st, &g);
    if (e != cudaSuccess) return ll_err(LL_ERR_DEVICE, "cuda: capturing the %d-step decode graph: %s", b->graph_steps, cudaGetErrorString(e));
    e = cudaGraphInstantiate(&s->graph_k, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        s->graph_k = NULL;
        return ll_err(LL_ERR_DEVICE, "cuda: instantiating the %d-step decode graph: %s", b->graph_steps, cudaGetErrorString(e));
    }
    return LL_OK;
}

static ll_status check_tokens(cu_backend *b, cu_seq *s, const int32_t *tokens, int32_t n) {
    if (n < 1 || !tokens) return ll_err(LL_ERR_INVALID, "cuda: forward: %d tokens", n);
    if ((int64_t)s->pos + n > s->n_ctx)
        return ll_err(LL_ERR_OVERFLOW, "cuda: forward: position %d + %d tokens exceeds n_ctx %d", s->pos, n, s->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= b->hp.n_vocab)
            return ll_err(LL_ERR_INVALID, "cuda: forward: token %d at index %d outside [0, %d)", tokens[i], i, b->hp.n_vocab);
    return LL_OK;
}

static ll_status cu_forward(ll_backend *be, ll_seq *sq, const int32_t *tokens, int32_t n, ll_logits_mode mode, float *logits) {
    cu_backend *b = CB(be);
    cu_seq *s = (cu_seq *)sq;
    LL_TRY(check_tokens(b, s, tokens, n));
    if (mode != LL_LOGITS_NONE && !logits) return ll_err(LL_ERR_INVALID, "cuda: forward: logits buffer is NULL");
    CU_TRY(cudaSetDevice(b->dev));
    const int V = b->hp.n_vocab;
    if (n == 1) {
        LL_TRY(ensure_graph(b, s));
        *b->h_tok = tokens[0];
        CU_TRY(cudaMemcpyAsync(b->d_tok, b->h_tok, 4, cudaMemcpyHostToDevice, b->st));
        CU_TRY(cudaGraphLaunch(s->graph, b->st));
        if (mode != LL_LOGITS_NONE) CU_TRY(cudaMemcpyAsync(logits, b->logits, (size_t)V * 4, cudaMemcpyDeviceToHost, b->st));
        CU_TRY(cudaStreamSynchronize(b->st));
        if (b->ln_tr && ++b->ln_steps == b->ln_print_at) ln_trace_print(b, s->pos);
        LL_TRY(pk_check(b));
        s->pos += 1;
        return LL_OK;
    }
    for (int32_t c0 = 0; c0 < n; c0 += b->TB) {
        int T = n - c0 < b->TB ? n - c0 : b->TB;
        int last = c0 + T == n;
        CU_TRY(cudaStreamSynchronize(b->st)); /* h_tokens is reused */
        memcpy(b->h_tokens, tokens + c0, (size_t)T * 4);
        CU_TRY(cudaMemcpyAsync(b->d_tokens, b->h_tokens, (size_t)T * 4, cudaMemcpyHostToDevice, b->st));
        prefill_chunk(b, s, T, last);
        LL_TRY(check_launch("prefill"));
        /* The decode graph (~1 ms of host time to capture and instantiate, session 36) is built while the
         * sequence's first chunk runs on the device, off the path of its first decoded token. Capture
         * records the step's launches without running them, and nothing in them depends on the position
         * (read on the device). */
        if (c0 == 0 && b->eager_graph) {
            LL_TRY(ensure_graph(b, s));
            LL_TRY(ensure_graph_k(b, s));
        }
        if (mode == LL_LOGITS_ALL) LL_TRY(chunk_all_logits(b, T, logits + (size_t)c0 * V));
        s->pos += T;
    }
    if (mode == LL_LOGITS_LAST) CU_TRY(cudaMemcpyAsync(logits, b->logits, (size_t)V * 4, cudaMemcpyDeviceToHost, b->st));
    CU_TRY(cudaStreamSynchronize(b->st));
    return LL_OK;
}

static const ll_backend_vtbl cu_vtbl = {
    "cuda", cu_free, cu_seq_new, cu_seq_free, cu_seq_reset, cu_seq_pos, cu_seq_state_bytes, cu_seq_save, cu_seq_load, cu_forward,
};

/* ------------------------------------------------------------------ creation */

static ll_status alloc_scratch(cu_backend *b) {
    const qwen_hparams &hp = b->hp;
    int H = hp.n_embd, V = hp.n_vocab, E = hp.n_expert, K = hp.n_expert_used;
    int CD = qwen_gdn_conv_dim(&hp), VD = qwen_gdn_v_dim(&hp), HV = hp.gdn_n_v_heads;
    int QW = hp.n_head * 2 * hp.head_dim, KW = hp.n_head_kv * hp.head_dim, AW = hp.n_head * hp.head_dim;
    int kf = K * hp.n_ff_exp + hp.n_ff_shexp;
    DALLOC(b, b->x, (size_t)H * 4);
    DALLOC(b, b->qkv, (size_t)CD * 4);
    DALLOC(b, b->z, (size_t)VD * 4);
    DALLOC(b, b->ab, (size_t)2 * HV * 4);
    DALLOC(b, b->o, (size_t)VD * 4);
    DALLOC(b, b->qg, (size_t)QW * 4);
    DALLOC(b, b->kb, (size_t)KW * 4);
    DALLOC(b, b->vb, (size_t)KW * 4);
    DALLOC(b, b->q, (size_t)AW * 4);
    DALLOC(b, b->att, (size_t)AW * 4);
    DALLOC(b, b->rl, (size_t)(E + 1) * 4);
    DALLOC(b, b->h, (size_t)kf * 4);
    {
        int qk = LL_MAX(LL_MAX(H, VD), LL_MAX(AW, kf));
        qbuf *qs[2] = {&b->q1, &b->q2};
        for (int i = 0; i < 2; i++) {
            DALLOC(b, qs[i]->xf, (size_t)qk * 4);
            DALLOC(b, qs[i]->xq, (size_t)qk);
            DALLOC(b, qs[i]->dx, (size_t)(qk / 32 + 1) * 4);
            DALLOC(b, qs[i]->s16, (size_t)(qk / 16 + 1) * 4);
        }
    }
    DALLOC(b, b->logits, (size_t)V * 4);
    DALLOC(b, b->d_tok, 16);
    DALLOC(b, b->d_gen, (size_t)GEN_CAP * 4);
    DALLOC(b, b->d_gen_n, 16);
    DALLOC(b, b->d_argmax, 16);
    CU_TRY(cudaMemset(b->d_argmax, 0, 8));
    CU_TRY(cudaMemset(b->d_gen_n, 0, 4));
    CU_TRY(cudaMemset(b->d_tok, 0, 4));
    CU_TRY(cudaMallocHost(&b->h_tok, 16));
    int T = b->TB;
    /* prefill row buffers, each sized for its widest use (prefill_chunk):
     *   P1: attention q|gate [T][QW]; GDN raw qkv [T][CD], then the chunked scan's W|U [HV][T][DK+DV]
     *   P2: attention k [T][KW]; GDN qkv after the conv [T][CD]
     *   P3: attention v [T][KW]; GDN z [T][VD]
     *   P4: GDN scan output [T][VD] */
    int HKD = hp.gdn_n_v_heads * (hp.gdn_k_dim + hp.gdn_v_dim);
    size_t w1 = (size_t)LL_MAX(LL_MAX(CD, QW), HKD), w2 = (size_t)LL_MAX(CD, KW), w3 = (size_t)LL_MAX(VD, KW), w4 = (size_t)VD;
    CU_TRY(cudaMallocHost(&b->h_tokens, (size_t)T * 4));
    DALLOC(b, b->d_tokens, (size_t)T * 4);
    DALLOC(b, b->X, (size_t)T * H * 4);
    DALLOC(b, b->P1, (size_t)T * w1 * 4);
    DALLOC(b, b->P2, (size_t)T * w2 * 4);
    DALLOC(b, b->P3, (size_t)T * w3 * 4);
    DALLOC(b, b->P4, (size_t)T * w4 * 4);
    DALLOC(b, b->GW, gdn_chunk_ws_small_floats(T, HV) * 4);
    DALLOC(b, b->RL, (size_t)T * LL_MAX(E + 1, 2 * HV) * 4);
    DALLOC(b, b->wts, (size_t)T * K * 4);
    /* Gb: the gate GEMM's fp32 output, then the MoE down's fixed-point sums ([T][H] x 8 bytes; the same
     * size for this model: K * n_ff_exp * 4 = H * 8) */
    DALLOC(b, b->Gb, LL_MAX((size_t)T * K * LL_MAX(hp.n_ff_exp, hp.n_ff_shexp) * 4, (size_t)T * H * 8));
    if (b->moe_det == 2) { /* 268 MB at a 4096-token chunk */
        DALLOC(b, b->moe_y, (size_t)T * K * H * 4);
        DALLOC(b, b->moe_inv, (size_t)T * K * 4);
    }
    DALLOC(b, b->Xb, (size_t)T * H * 2);
    DALLOC(b, b->Ob, (size_t)T * LL_MAX(VD, AW) * 2);
    DALLOC(b, b->Qb, (size_t)T * AW * 2);
    DALLOC(b, b->Hb, (size_t)T * K * hp.n_ff_exp * 2);
    DALLOC(b, b->Hs, (size_t)T * LL_MAX(hp.n_ff_shexp, 1) * 2);
    DALLOC(b, b->ids, (size_t)T * K * 4);
    DALLOC(b, b->cnt, (size_t)E * 4);
    DALLOC(b, b->cursor, (size_t)E * 4);
    DALLOC(b, b->perm, (size_t)T * K * 4);
    int mt = (T * K + GM_BM - 1) / GM_BM + E;
    DALLOC(b, b->tile_e, (size_t)mt * 4);
    DALLOC(b, b->tile_m0, (size_t)mt * 4);
    DALLOC(b, b->tile_mn, (size_t)mt * 4);
    DALLOC(b, b->n_tiles, 16);
    return LL_OK;
}

static ll_status check_hparams(const qwen_hparams &hp) {
    int DK = hp.gdn_k_dim, DV = hp.gdn_v_dim, HD = hp.head_dim;
    if (hp.n_layer > QWEN_MAX_LAYERS || hp.n_layer <= 0) return ll_err(LL_ERR_UNSUPPORTED, "cuda: n_layer %d", hp.n_layer);
    if (DK != 32 && DK != 64 && DK != 128) return ll_err(LL_ERR_UNSUPPORTED, "cuda: GDN key dim %d (supported: 32, 64, 128)", DK);
    if (DV % 32) return ll_err(LL_ERR_UNSUPPORTED, "cuda: GDN value dim %d not a multiple of 32", DV);
    if (HD != 64 && HD != 128 && HD != 256) return ll_err(LL_ERR_UNSUPPORTED, "cuda: head_dim %d (supported: 64, 128, 256)", HD);
    if (hp.n_head % hp.n_head_kv || hp.n_head / hp.n_head_kv > ATT_MAX_G)
        return ll_err(LL_ERR_UNSUPPORTED, "cuda: %d query heads per kv head (max %d)", hp.n_head / hp.n_head_kv, ATT_MAX_G);
    if (hp.n_expert_used > QK_MAX_TOPK || hp.n_expert > 1024)
        return ll_err(LL_ERR_UNSUPPORTED, "cuda: %d experts, top-%d (max 1024, 16)", hp.n_expert, hp.n_expert_used);
    /* prefill GEMMs walk K in steps of 64 */
    if (hp.n_embd % 64 || hp.n_ff_exp % 64 || hp.n_ff_shexp % 64 || qwen_gdn_v_dim(&hp) % 64 || (hp.n_head * HD) % 64 ||
        hp.n_rot > HD || hp.n_rot % 2)
        return ll_err(LL_ERR_UNSUPPORTED, "cuda: hidden %d / expert ff %d / shared ff %d / n_rot %d", hp.n_embd, hp.n_ff_exp,
                      hp.n_ff_shexp, hp.n_rot);
    return LL_OK;
}

/* The router fold's B = W_r diag(g_ffn) W_out per layer (lean.h lean_fold), where decode can use it:
 * lean kernels and a BF16 router (and shared gate); GDN layers also need k_lgdn (a Q4_K
 * out-projection, the fused kernel on). 2.1 MB per layer at the real shapes; the per-token bytes
 * count it (the router's own rows are still read: by k_lgdn, or by the attention combine). */
static ll_status fold_setup(cu_backend *b) {
    const qwen_hparams &hp = b->hp;
    int H = hp.n_embd, E = hp.n_expert, NL = E + (hp.n_ff_shexp ? 1 : 0), K = qwen_gdn_v_dim(&hp);
    if (!b->lean || !b->gdn_fold) return LL_OK;
    int KA = hp.n_head * hp.head_dim, KM = LL_MAX(K, KA);
    float *tmp = NULL;
    for (int l = 0; l < hp.n_layer; l++) {
        dlayer *d = &b->L[l];
        /* GDN layers: k_lgdn's Q4_K out-projection (and the fused kernel on); attention layers: any
         * out-projection the lean GEMV reads (B joins it as BF16 rows) */
        if (!(b->gdn_fold & (hp.is_attn[l] ? 2 : 1))) continue;
        const gmat &W = hp.is_attn[l] ? d->wo : d->wout;
        if (d->router.type != GT_BF16 || (hp.n_ff_shexp && d->shgate.type != GT_BF16) || W.rows != H ||
            W.cols != (hp.is_attn[l] ? KA : K) || (!hp.is_attn[l] && (W.type != GT_Q4_K || !b->gdn_fuse)))
            continue;
        if (!tmp && cudaMalloc((void **)&tmp, ((size_t)H * KM + (size_t)NL * H) * 4) != cudaSuccess) {
            cudaGetLastError();
            return LL_OK; /* no room for the scratch: decode runs without the fold */
        }
        ll_status st = dev_alloc(b, (void **)&d->fold_B, (size_t)NL * W.cols * 2);
        cudaError_t e = st == LL_OK ? lean_fold_precompute(d->fold_B, d->router.q, hp.n_ff_shexp ? d->shgate.q : NULL, d->ffn_norm, E, H,
                                                           &W, tmp, b->st)
                                    : cudaSuccess;
        if (st != LL_OK || e != cudaSuccess) {
            cudaFree(tmp);
            return st != LL_OK ? st : ll_err(LL_ERR_DEVICE, "cuda: router fold of layer %d: %s", l, cudaGetErrorString(e));
        }
        b->decode_bytes += (double)NL * W.cols * 2;
    }
    if (tmp) cudaFree(tmp);
    return LL_OK;
}

/* The zero chain's buffers of n layers (layer_zbuf): residuals [n][H] and raw logits [n][E + 1], zeros. */
static ll_status chain_alloc(cu_backend *b, int n, float **xl, float **rl) {
    size_t xb = (size_t)n * b->hp.n_embd * 4, rb = (size_t)n * (b->hp.n_expert + 1) * 4;
    LL_TRY(dev_alloc(b, (void **)xl, xb));
    LL_TRY(dev_alloc(b, (void **)rl, rb));
    CU_TRY(cudaMemset(*xl, 0, xb));
    CU_TRY(cudaMemset(*rl, 0, rb));
    return LL_OK;
}

/* k_lattn_out's arguments for layer l at load (cu_init's probes and packing): shapes and the static weights;
 * the partials', position's and buffers' stand-ins are b->x, b->x2, b->rl (launch 0 reads only whether set) */
static lean_attn cout_probe_args(cu_backend *b, int l) {
    const qwen_hparams &hp = b->hp;
    const dlayer &L = b->L[l];
    lean_attn a = {b->x, b->x, b->qg, (const int *)b->x, b->fd_ns, b->fd_minpos, b->fd_xs, hp.n_head, hp.head_dim, &L.wo, b->x,
                   b->x2, L.fold_B, L.router.q, hp.n_ff_shexp ? L.shgate.q : NULL, L.ffn_norm, hp.n_expert, b->rl, b->x, b->moe_w};
    a.rows = b->cout_r; /* the plan the launches use (the packed image's layout depends on it) */
    return a;
}

static ll_status cu_init(cu_backend *b) {
    const qwen_model *m = b->m;
    const qwen_hparams &hp = b->hp;
    uint64_t seed = 0;
    int lazy = qwen_model_synthetic_lazy(m, &seed);
    CU_TRY(cudaSetDevice(b->dev));
    cudaDeviceProp prop;
    CU_TRY(cudaGetDeviceProperties(&prop, b->dev));
    b->nsm = prop.multiProcessorCount;
    b->cc_major = prop.major;
    if (b->cc_major < 9) b->lean = 0; /* bulk copies, mbarriers */
    if (b->lean) {
        size_t cap = getenv("LILAC_CUDA_LN_SMEM") ? (size_t)LL_MAX(0, atoi(getenv("LILAC_CUDA_LN_SMEM"))) * 1024 : 0;
        CU_TRY(lean_init(cap, getenv("LILAC_CUDA_LN_CARVE") ? atoi(getenv("LILAC_CUDA_LN_CARVE")) : -1,
                         /* 6: the attention out-projection and the router never two blocks to an SM
                          * (session 17: +4.3 tok/s at 4K; 0 off, 1 every lean launch) */
                         getenv("LILAC_CUDA_LN_PAD") ? atoi(getenv("LILAC_CUDA_LN_PAD")) : 6,
                         getenv("LILAC_CUDA_LN_PRE") ? atoi(getenv("LILAC_CUDA_LN_PRE")) : 1,
                         !(getenv("LILAC_CUDA_LN_PAIR") && !atoi(getenv("LILAC_CUDA_LN_PAIR"))),
                         !(getenv("LILAC_CUDA_LN_DPAIR") && !atoi(getenv("LILAC_CUDA_LN_DPAIR"))),
                         !(getenv("LILAC_CUDA_LN_HEAD") && !atoi(getenv("LILAC_CUDA_LN_HEAD")))));
    }
    if (b->lean) { /* the fused MoE kernel's grid barrier counter: its own 128-byte line */
        LL_TRY(dev_alloc(b, (void **)&b->fz_bar, 128));
        CU_TRY(cudaMemset(b->fz_bar, 0, 128));
        /* k_lmoe_sk's counters: one per layer (a counter's launches must share one grid size; a Q4_K
         * and a Q6_K down may not), each on a 128-byte line of its own */
        LL_TRY(dev_alloc(b, (void **)&b->sk_ctr, (size_t)hp.n_layer * 128));
        CU_TRY(cudaMemset(b->sk_ctr, 0, (size_t)hp.n_layer * 128));
        /* k_lgdn's shares and arrival counters */
        LL_TRY(dev_alloc(b, (void **)&b->gdn_part, lean_gdn_part_floats(LL_MAX(1, hp.gdn_n_v_heads), hp.n_embd, hp.n_expert + 1) * 4));
        LL_TRY(dev_alloc(b, (void **)&b->x2, (size_t)hp.n_embd * 4));
        LL_TRY(dev_alloc(b, (void **)&b->moe_w, (size_t)(QK_MAX_TOPK + 1) * 4));
        LL_TRY(dev_alloc(b, (void **)&b->gdn_cnt, 128));
        CU_TRY(cudaMemset(b->gdn_cnt, 0, 128));
        LL_TRY(dev_alloc(b, (void **)&b->gdn_hc, 64 * 4));
        CU_TRY(cudaMemset(b->gdn_hc, 0, 64 * 4));
        /* LILAC_CUDA_GDN_HC=0: k_lgdn's state barrier as clusters of a head's blocks (the fallback, 11 %
         * slower on an H200 in session 35) instead of the per-head counters (the buffer stays accounted) */
        if (getenv("LILAC_CUDA_GDN_HC") && !atoi(getenv("LILAC_CUDA_GDN_HC"))) b->gdn_hc = NULL;
    }
    if (b->lean && getenv("LILAC_CUDA_LN_TRACE") && atoi(getenv("LILAC_CUDA_LN_TRACE")) && !lean_trace_built())
        fprintf(stderr, "lilac: LILAC_CUDA_LN_TRACE needs a build with NVFLAGS_EXTRA=-DLILAC_LN_TRACE; no trace\n");
    else if (b->lean && getenv("LILAC_CUDA_LN_TRACE") && atoi(getenv("LILAC_CUDA_LN_TRACE"))) {
        LL_TRY(dev_alloc(b, (void **)&b->ln_tr, (size_t)LN_TR_MAX * LN_TRS_HOST * 8));
        CU_TRY(cudaMemset(b->ln_tr, 0, (size_t)LN_TR_MAX * LN_TRS_HOST * 8));
        b->ln_print_at = atoi(getenv("LILAC_CUDA_LN_TRACE")) > 1 ? atoi(getenv("LILAC_CUDA_LN_TRACE")) : 40;
    }
    snprintf(b->devname, sizeof(b->devname), "%s", prop.name);
    CU_TRY(cudaStreamCreateWithFlags(&b->st, cudaStreamNonBlocking));
    CU_TRY(cudaFuncSetAttribute(k_flash_prefill<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash_smem_bytes<256>()));
    CU_TRY(cudaFuncSetAttribute(k_flash_prefill<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash_smem_bytes<128>()));
    CU_TRY(cudaFuncSetAttribute(k_flash_prefill<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash_smem_bytes<64>()));
    CU_TRY(cudaFuncSetAttribute(k_flash2_prefill<256>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash2_smem_bytes<256>()));
    CU_TRY(cudaFuncSetAttribute(k_flash2_prefill<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash2_smem_bytes<128>()));
    CU_TRY(cudaFuncSetAttribute(k_flash2_prefill<256, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash2_smem_bytes<256, true>()));
    CU_TRY(cudaFuncSetAttribute(k_flash2_prefill<128, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash2_smem_bytes<128, true>()));
    CU_TRY(cudaFuncSetAttribute(k_gemv, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<128>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<128>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<128, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<128>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<64>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<64>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<32>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<128, 2, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<128, 1>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<64, 2, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<64, 1>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<32, 2, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<32, 1>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<128, 2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<128, 2>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<64, 2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<64, 2>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_prep<32, 2, 2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_prep_smem_bytes<32, 2>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan<128, 32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_smem_bytes<128, 32>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan<64, 32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_smem_bytes<64, 32>()));
    CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan<32, 32>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_smem_bytes<32, 32>()));
    {
        constexpr int F = GTC_PS | GTC_SA, FL = F | GTC_LS;
        CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan_tc<128, F>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_tc_smem_bytes<128, F>()));
        CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan_tc<64, F>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_tc_smem_bytes<64, F>()));
        CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan_tc<32, F>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_tc_smem_bytes<32, F>()));
        CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan_tc<128, FL>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_tc_smem_bytes<128, FL>()));
        CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan_tc<64, FL>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_tc_smem_bytes<64, FL>()));
        CU_TRY(cudaFuncSetAttribute(k_gdn_chunk_scan_tc<32, FL>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)gdn_scan_tc_smem_bytes<32, FL>()));
    }
    CU_TRY(cudaFuncSetAttribute(k_gemv_tma<GT_Q4_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CU_TRY(cudaFuncSetAttribute(k_gemv_tma<GT_Q6_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CU_TRY(cudaFuncSetAttribute(k_moe_gateup_tma<GT_Q4_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CU_TRY(cudaFuncSetAttribute(k_moe_gateup_tma<GT_Q6_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CU_TRY(cudaFuncSetAttribute(k_moe_down_tma<GT_Q4_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CU_TRY(cudaFuncSetAttribute(k_moe_down_tma<GT_Q6_K>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    CU_TRY(cudaFuncSetAttribute(k_moe_down, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
    CU_TRY(cudaFuncSetAttribute(k_attn_decode, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
    /* flash-decoding attention: G <= 8 query heads per kv head, head_dim 64/128/256; as many
     * splits per kv head as fill the GPU once (LILAC_CUDA_ATTN_FD=0: the older kernel) */
    b->fd_ns = 0;
    if (!(getenv("LILAC_CUDA_ATTN_FD") && !atoi(getenv("LILAC_CUDA_ATTN_FD"))) && hp.n_head_kv > 0 &&
        hp.n_head / hp.n_head_kv <= FD_G && (hp.head_dim == 256 || hp.head_dim == 128 || hp.head_dim == 64)) {
        int occ = 0, HDd = hp.head_dim;
        size_t fsm = attn_fd_smem(HDd);
        if (HDd == 256) {
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, false, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)attn_fd_smem(HDd, 4)));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, true, FD_G, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, false, FD_G, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, false, 4, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)attn_fd_smem(HDd, 4)));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, true, FD_G, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, false, FD_G, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, true, FD_G, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, false, FD_G, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, false, FD_G, true, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<8, false, FD_G, true, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            if (getenv("LILAC_CUDA_FD_CARVE") && atoi(getenv("LILAC_CUDA_FD_CARVE"))) {
                /* experiment (session 31): flash decoding at the lean kernels' shared-memory split (lean_init
                 * keeps those at 100 %), so that no SM changes its L1 / shared split between the qkv
                 * projection, flash decoding and the cout kernel (H100 trace: the cout kernel's last block
                 * passes its wait ~6 µs after flash decoding's end, flash decoding's 2.5 after the qkv's) */
                const void *fk[10] = {(const void *)k_attn_decode_fd<8>, (const void *)k_attn_decode_fd<8, false>,
                                      (const void *)k_attn_decode_fd<8, false, 4>, (const void *)k_attn_decode_fd<8, true, FD_G, true>,
                                      (const void *)k_attn_decode_fd<8, false, FD_G, true>, (const void *)k_attn_decode_fd<8, false, 4, true>,
                                      (const void *)k_attn_decode_fd<8, true, FD_G, false, true>, (const void *)k_attn_decode_fd<8, false, FD_G, false, true>,
                                      (const void *)k_attn_decode_fd<8, true, FD_G, true, true>, (const void *)k_attn_decode_fd<8, false, FD_G, true, true>};
                for (int i = 0; i < 10; i++) CU_TRY(cudaFuncSetAttribute(fk[i], cudaFuncAttributePreferredSharedMemoryCarveout, 100));
            }
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_attn_decode_fd<8>, FD_WARPS * 32, fsm);
        } else if (HDd == 128) {
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<4, true, FD_G, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_attn_decode_fd<4>, FD_WARPS * 32, fsm);
        } else {
            CU_TRY(cudaFuncSetAttribute(k_attn_decode_fd<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fsm));
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k_attn_decode_fd<2>, FD_WARPS * 32, fsm);
        }
        if (occ >= 1) b->fd_ns = LL_MAX(1, b->nsm * occ / hp.n_head_kv);
    }
    /* the q8 cache has readers in the flash-decoding kernel and flash2 prefill only */
    int any_attn = 0;
    for (int l = 0; l < hp.n_layer; l++) any_attn |= hp.is_attn[l];
    int q8_ok = b->fd_ns && b->flash2 && hp.n_head == FL2_G * hp.n_head_kv && (hp.head_dim == 256 || hp.head_dim == 128);
    /* auto (session 12): q8 where its kernels fit, because with the tensor-core flash-decoding loop
     * it is as fast as bf16 up to 4K and faster past it (128K: 450 vs 388 tok/s), with 1.26 GB less
     * at 128K and a mean KL of 4e-5 against bf16; bf16 where the persistent decode kernel is asked
     * for (LILAC_CUDA_PERSIST=1: it reads a bf16 cache) */
    if (b->kv_want == 0) b->kv_q8 = any_attn && q8_ok && !(getenv("LILAC_CUDA_PERSIST") && atoi(getenv("LILAC_CUDA_PERSIST")));
    b->base.params.kv_q8 = b->kv_q8 ? 1 : -1; /* what runs, for the engine's snapshot identity and bench's report */
    if (b->kv_q8 && any_attn && !q8_ok)
        return ll_err(LL_ERR_UNSUPPORTED, "cuda: a q8 KV cache needs the flash-decoding and flash2 kernels (head_dim 256 or 128, "
                      "%d query heads per kv head); this model or setting has head_dim %d, %d/%d heads%s",
                      FL2_G, hp.head_dim, hp.n_head, hp.n_head_kv, b->flash2 ? "" : ", LILAC_CUDA_FLASH2=0");
    b->alloc_host = b->embd_host;
    ll_status est = upload_mat(b, &m->tok_embd, 1, lazy, seed, &b->tok_embd);
    b->alloc_host = 0;
    LL_TRY(est);
    if (b->embd_host) b->weight_bytes -= gmat_bytes(b->tok_embd); /* weight_bytes: device-resident weights */
    double before_lm = b->weight_bytes;
    LL_TRY(upload_mat(b, &m->lm_head, 1, lazy, seed, &b->lm_head));
    double lm_bytes = b->weight_bytes - before_lm;
    LL_TRY(upload_f32(b, m->out_norm, hp.n_embd, &b->out_norm, "output_norm"));
    float inv[256];
    for (int i = 0; i < hp.n_rot / 2; i++) inv[i] = (float)pow((double)hp.rope_theta, -2.0 * i / hp.n_rot);
    LL_TRY(upload_f32(b, inv, (size_t)LL_MAX(hp.n_rot / 2, 1), &b->inv_freq, "inv_freq"));
    if (hp.n_rot >= 2 && !(getenv("LILAC_CUDA_ROPE_CS") && !atoi(getenv("LILAC_CUDA_ROPE_CS"))))
        LL_TRY(dev_alloc(b, (void **)&b->rope_cs, (size_t)hp.n_rot * 4));
    int H = hp.n_embd, E = hp.n_expert, HV = hp.gdn_n_v_heads;
    double per_tok = lm_bytes;
    for (int l = 0; l < hp.n_layer; l++) {
        ll_progress("uploading weights", (double)l / hp.n_layer);
        const qwen_layer *ly = &m->layers[l];
        dlayer *d = &b->L[l];
        double before = b->weight_bytes;
        LL_TRY(upload_f32(b, ly->attn_norm, H, &d->attn_norm, "attn_norm"));
        LL_TRY(upload_f32(b, ly->ffn_norm, H, &d->ffn_norm, "ffn_norm"));
        if (hp.is_attn[l]) {
            d->attn_idx = b->n_attn++;
            LL_TRY(upload_mat(b, &ly->wq, 1, lazy, seed, &d->wq));
            LL_TRY(upload_mat(b, &ly->wk, 1, lazy, seed, &d->wk));
            LL_TRY(upload_mat(b, &ly->wv, 1, lazy, seed, &d->wv));
            LL_TRY(upload_mat(b, &ly->wo, 1, lazy, seed, &d->wo));
            LL_TRY(upload_f32(b, ly->q_norm, hp.head_dim, &d->q_norm, "q_norm"));
            LL_TRY(upload_f32(b, ly->k_norm, hp.head_dim, &d->k_norm, "k_norm"));
        } else {
            d->gdn_idx = b->n_gdn++;
            LL_TRY(upload_mat(b, &ly->wqkv, 1, lazy, seed, &d->wqkv));
            LL_TRY(upload_mat(b, &ly->wz, 1, lazy, seed, &d->wz));
            LL_TRY(upload_mat(b, &ly->wb, 1, lazy, seed, &d->wb));
            LL_TRY(upload_mat(b, &ly->wa, 1, lazy, seed, &d->wa));
            LL_TRY(upload_mat(b, &ly->wout, 1, lazy, seed, &d->wout));
            LL_TRY(upload_f32(b, ly->conv, (size_t)qwen_gdn_conv_dim(&hp) * hp.gdn_conv_k, &d->conv, "conv1d"));
            LL_TRY(upload_f32(b, ly->dt_bias, HV, &d->dt_bias, "dt_bias"));
            LL_TRY(upload_f32(b, ly->ssm_a, HV, &d->ssm_a, "ssm_a"));
            LL_TRY(upload_f32(b, ly->gdn_norm, hp.gdn_v_dim, &d->gdn_norm, "ssm_norm"));
        }
        LL_TRY(upload_mat(b, &ly->router, 1, lazy, seed, &d->router));
        if (hp.n_ff_shexp) {
            LL_TRY(upload_mat(b, &ly->sh_gate_inp, 1, lazy, seed, &d->shgate));
            LL_TRY(upload_mat(b, &ly->sh_gate, 1, lazy, seed, &d->sgate));
            LL_TRY(upload_mat(b, &ly->sh_up, 1, lazy, seed, &d->sup));
            LL_TRY(upload_mat(b, &ly->sh_down, 1, lazy, seed, &d->sdown));
        }
        double dense = b->weight_bytes - before;
        LL_TRY(upload_mat(b, ly->exp_gate, E, lazy, seed, &d->egate));
        LL_TRY(upload_mat(b, ly->exp_up, E, lazy, seed, &d->eup));
        LL_TRY(upload_mat(b, ly->exp_down, E, lazy, seed, &d->edown));
        per_tok += dense + (gmat_bytes(d->egate) + gmat_bytes(d->eup) + gmat_bytes(d->edown)) / E * hp.n_expert_used;
    }
    b->decode_bytes = per_tok;
    if (check_hparams(hp) != LL_OK) return LL_ERR_UNSUPPORTED;
    LL_TRY(fold_setup(b));
    b->wdev_bytes = b->alloc_bytes;
    LL_TRY(alloc_scratch(b));
    /* every GDN layer must take the atomic form, or a layer after one that does not would find its
     * buffers as the previous step left them */
    for (int l = 0; l < hp.n_layer; l++)
        if (!hp.is_attn[l] && !b->L[l].fold_B) b->gdn_atom = 0;
    /* three GDN layers at least: a launch zeroes the NEXT GDN layer's buffers while it reads the
     * previous one's residual (with two, those are the same buffer) */
    if (b->gdn_atom && b->lean && b->n_gdn >= 3) {
        LL_TRY(chain_alloc(b, b->n_gdn, &b->gdn_xl, &b->gdn_rl));
    } else b->gdn_atom = 0;
    if (b->gdn_in) { /* the GDN layers whose shapes and types the in-projection's cluster form takes (the rest
                      * keep the in-projection launch; the decode decides per layer with the same call).
                      * Launch 0 reads shapes and whether pointers are set: b->x / b->x2 stand in */
        int n = 0;
        for (int l = 0; l < hp.n_layer && b->gdn_atom && b->lean && b->gdn_fuse == 1 && !b->fuse; l++) {
            if (hp.is_attn[l] || !(b->gdn_fold & 1)) continue;
            const dlayer &L = b->L[l];
            int HV = hp.gdn_n_v_heads;
            pk_layer pl;
            decode_layer_args(b, l, &pl, b->x, b->x2);
            gdn_args g = {b->qkv, b->ab, b->ab + HV, 0, L.conv, b->x, b->x, L.dt_bias, L.ssm_a, b->o, (const int *)b->x, 1, hp.gdn_n_k_heads,
                          HV, hp.gdn_v_dim, hp.gdn_v_tiled, b->gdn_db ? b->x : NULL};
            lean_fold fo = {L.fold_B, L.router.q, hp.n_ff_shexp ? L.shgate.q : NULL, L.ffn_norm, hp.n_expert, b->x, b->rl, b->x, b->moe_w,
                            b->gdn_atom, &pl.in, b->gdn_in_nst, b->gdn_in_wpre};
            n += L.fold_B && lean_gdn(&g, hp.gdn_k_dim, &pl.out, b->gdn_part, NULL, b->gdn_hc, 3, 0, b->st, NULL, 0, &fo);
        }
        b->gdn_in = n;
    }
    if (b->att_cout) { /* every attention layer must take it (the buffers' zeros are chained, layer_znext), with
                        * three layers in the chain at least (GDN layers too under gdn_atom); launch 0 reads
                        * shapes and whether pointers are set: the partials' and position's stand-ins are b->x */
        int ok = b->lean && !b->fuse && b->fd_ns && (b->gdn_fold & 2) && b->n_attn + (b->gdn_atom ? b->n_gdn : 0) >= 3;
        for (int l = 0; l < hp.n_layer && ok; l++) {
            if (!hp.is_attn[l]) continue;
            const dlayer &L = b->L[l];
            pk_layer pl;
            decode_layer_args(b, l, &pl, b->x, b->x2);
            lean_attn la = cout_probe_args(b, l);
            ok = L.fold_B && lean_attn_out(&la, 0, b->st, NULL, 0) && lean_moe(&pl.moe, b->nsm, b->pdl, b->st, 0, NULL, NULL);
        }
        if (ok) LL_TRY(chain_alloc(b, b->n_attn, &b->att_xl, &b->att_rl));
        else b->att_cout = b->cout_pk = 0;
        if (b->att_cout && b->cout_pk < 0) { /* the default: packed where the ~7 MB per attention layer leave
                                               * the same margin as MOE_PACK=auto free (max(4 GiB, 1/8 of the card)) */
            size_t need = 0, fr = 0, tot = 0;
            for (int l = 0; l < hp.n_layer; l++) {
                if (!hp.is_attn[l]) continue;
                lean_attn la = cout_probe_args(b, l);
                need += lean_attn_pack_bytes(&la);
            }
            /* the two-copy form (session 33, H100 same calls: 645.2 vs 643.4 and 644.9 vs 644.3 tok/s at 4096/1024) */
            b->cout_pk = cudaMemGetInfo(&fr, &tot) == cudaSuccess && need + LL_MAX((size_t)4 << 30, tot / 8) <= fr ? 2 : 0;
        }
        for (int l = 0; l < hp.n_layer && b->att_cout && b->cout_pk; l++) { /* the packed slices (LILAC_CUDA_COUT_PACK) */
            if (!hp.is_attn[l]) continue;
            dlayer &L = b->L[l];
            lean_attn la = cout_probe_args(b, l);
            size_t n = lean_attn_pack_bytes(&la);
            LL_ASSERT(n > 0); /* lean_attn_out took these shapes above */
            LL_TRY(dev_alloc(b, (void **)&L.cout_pk, n));
            L.cout_pk_bytes = n;
            cudaError_t e = lean_attn_pack(&la, L.cout_pk, b->st);
            if (e != cudaSuccess) return ll_err(LL_ERR_DEVICE, "cuda: layer %d: packing the attention out-projection: %s", l, cudaGetErrorString(e));
        }
    }
    if (b->moe_pack && b->lean) { /* the packed copies where the lean MoE applies (a layer without keeps NULLs) */
        int packed = 0, forced = b->moe_pack > 0;
        if (!forced) { /* "auto" (gate/up only) where it leaves a margin free for sequences and the context's
                        * own: max(4 GiB, 1/8 of the card) */
            b->moe_pack = 1;
            size_t need = 0, fr = 0, tot = 0;
            for (int l = 0; l < hp.n_layer; l++) {
                pk_layer pl;
                decode_layer_args(b, l, &pl, b->x, b->x2);
                need += lean_pack_bytes(&pl.moe, 0) + lean_pack_bytes(&pl.moe, 1);
            }
            if (cudaMemGetInfo(&fr, &tot) != cudaSuccess || need + LL_MAX((size_t)4 << 30, tot / 8) > fr) b->moe_pack = 0;
        }
        size_t before = b->alloc_bytes;
        for (int l = 0; l < hp.n_layer && b->moe_pack; l++) {
            dlayer &L = b->L[l];
            pk_layer pl;
            decode_layer_args(b, l, &pl, b->x, b->x2);
            if (!lean_pack_bytes(&pl.moe, 0)) continue;
            void **dst[4] = {&L.pack.gu, &L.pack.sgu, &L.pack.dn, &L.pack.sdn};
            for (int w = 0; w < 4; w++) {
                size_t n = lean_pack_bytes(&pl.moe, w);
                if (n && (b->moe_pack & (w < 2 ? 1 : 2))) LL_TRY(dev_alloc(b, dst[w], n));
            }
            if (!lean_pack(&pl.moe, &L.pack, b->st)) return ll_err(LL_ERR_DEVICE, "cuda: layer %d: packing the MoE weights failed", l);
            packed++;
        }
        CU_TRY(cudaStreamSynchronize(b->st));
        b->wdev_bytes += b->alloc_bytes - before; /* weights (a second layout of them), not scratch */
        if (!packed) b->moe_pack = 0;
    }
    if (b->moe_sk) { /* on only where the kernel takes this model's MoE (the first layer's shapes = every layer's) */
        pk_layer pl;
        decode_layer_args(b, 0, &pl, b->x, b->x);
        b->moe_sk = b->lean && lean_moe(&pl.moe, b->nsm, b->pdl, b->st, 0, NULL, NULL) &&
                    lean_moe_sk(&pl.moe, b->nsm, b->pdl, b->st, NULL, 0, NULL, b->sk_ctr, b->sk_cap, 0) &&
                    lean_moe_sk(&pl.moe, b->nsm, b->pdl, b->st, NULL, 1, NULL, b->sk_ctr, b->sk_cap, 0);
    }
    LL_TRY(pk_setup(b));
    b->scratch_bytes = b->alloc_bytes - b->wdev_bytes;
    for (int i = 0; i < 2 * PROF_MAX; i++) CU_TRY(cudaEventCreate(&b->prof.ev[i]));
    CU_TRY(cudaDeviceSynchronize());
    return LL_OK;
}

extern "C" ll_status cuda_backend_new(const qwen_model *model, const ll_backend_params *params, ll_backend **out) {
    *out = NULL;
    if (!model) return ll_err(LL_ERR_INVALID, "cuda: no model");
    LL_TRY(check_hparams(model->hp));
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) return ll_err(LL_ERR_DEVICE, "cuda: no CUDA device");
    cu_backend *b = (cu_backend *)ll_calloc(1, sizeof(cu_backend));
    if (!b) return ll_err(LL_ERR_OOM, "cuda: out of host memory");
    b->base.v = &cu_vtbl;
    b->base.model = model;
    if (params) b->base.params = *params;
    b->m = model;
    b->hp = model->hp;
    b->dev = params ? params->device : 0;
    if (b->dev < 0 || b->dev >= n) { ll_free(b); return ll_err(LL_ERR_INVALID, "cuda: device %d of %d", b->dev, n); }
    b->TB = params && params->max_batch > 0 ? params->max_batch : 2048;
    /* The prefetching / batched-row kernels (k_gemv_pf, k_moe_*_pf, with PDL) measured no faster
     * than the plain ones on the H200 (dev/kernels/NOTES.md), so they are opt-in for now. */
    b->no_prefetch = !(getenv("LILAC_CUDA_PREFETCH") && atoi(getenv("LILAC_CUDA_PREFETCH")));
    b->pdl = !(getenv("LILAC_CUDA_PDL") && !atoi(getenv("LILAC_CUDA_PDL")));
    b->pdl_off = getenv("LILAC_CUDA_PDL_OFF") ? atoi(getenv("LILAC_CUDA_PDL_OFF")) : 0;
    lean_gdn_stagger(getenv("LILAC_CUDA_GDN_STAGGER") ? (unsigned)atoi(getenv("LILAC_CUDA_GDN_STAGGER")) : 0);
    b->qmode = !(getenv("LILAC_CUDA_QACT") && !atoi(getenv("LILAC_CUDA_QACT")));
    b->gq_rb = getenv("LILAC_CUDA_GQ_RB") ? atoi(getenv("LILAC_CUDA_GQ_RB")) : 1;
    /* prefill defaults from bench/results/2026-11-30-h200-cudapre (call1: lab-verified kernels) */
    b->flash2 = !(getenv("LILAC_CUDA_FLASH2") && !atoi(getenv("LILAC_CUDA_FLASH2")));
    /* the KV cache: ll_backend_params.kv_q8 (1 q8, -1 bf16, 0 auto: resolved in cu_init), or
     * LILAC_CUDA_KV=q8|bf16 over it */
    b->kv_want = params ? params->kv_q8 : 0;
    if (getenv("LILAC_CUDA_KV")) b->kv_want = !strcmp(getenv("LILAC_CUDA_KV"), "q8") ? 1 : !strcmp(getenv("LILAC_CUDA_KV"), "bf16") ? -1 : b->kv_want;
    b->kv_q8 = b->kv_want > 0;
    b->gemm_bm = getenv("LILAC_CUDA_GEMM_BM") && atoi(getenv("LILAC_CUDA_GEMM_BM")) == 64 ? 64 : 128;
    b->gemm_mb = getenv("LILAC_CUDA_GEMM_MB") ? atoi(getenv("LILAC_CUDA_GEMM_MB")) : 2;
    b->gemm_red4 = !(getenv("LILAC_CUDA_GEMM_RED4") && !atoi(getenv("LILAC_CUDA_GEMM_RED4")));
    /* default 2: k_gemm2 in 64/128-row tiles (4K prefill 15.1K -> 21.5K tok/s; 256-row tiles, =1, 21.1K:
     * bench/results/2026-12-02-h200-s14); 0 the older k_gemm everywhere */
    b->gemm2 = getenv("LILAC_CUDA_GEMM2") ? atoi(getenv("LILAC_CUDA_GEMM2")) : 2;
    /* (k_gemm2's PF 1, the next k-step's fragments loaded first, measured no faster: lab only) */
    /* default 1: 4K prefill 21.4K -> 22.35K tok/s, the same h bits (bench/results/2026-12-02-h200-s14 call 2) */
    b->gemm_glu = getenv("LILAC_CUDA_GLU") ? atoi(getenv("LILAC_CUDA_GLU")) : 1;
    /* session 12: the prefill MoE down can add its rows in fixed point (k_gemm.cuh), so that a prefill
     * is the same bits on every run; opt-in (ll_backend_params.deterministic, `lilac bench
     * --deterministic`, LILAC_CUDA_MOE_DET=1) because it costs ~5 % of prefill (4K: 14.4K vs 15.1K tok/s:
     * scalar 64-bit atomics instead of fp32 vector ones, bench/results/2026-12-01-h200-s12 call 4) */
    b->moe_det = params && params->deterministic ? 1 : 0;
    if (getenv("LILAC_CUDA_MOE_DET")) b->moe_det = atoi(getenv("LILAC_CUDA_MOE_DET")) == 2 ? 2 : atoi(getenv("LILAC_CUDA_MOE_DET")) ? 1 : 0;
    /* session 27: the GDN fold's shares by atomics, default 1: the in-graph trace at 4K, 1632.8 -> 1517.8
     * us per step; with the split-K MoE 499 -> 525 tok/s in a same-call A/B (bench/results/
     * 2026-12-07-h200-s26 calls 2, 4); its GPU tests passed. The untraced A/B against =0 is still to
     * run (bench/results/2026-12-05-h200-s27/call1). Never in a deterministic run (other orders) */
    b->gdn_atom = b->moe_det ? 0 : getenv("LILAC_CUDA_GDN_ATOM") ? atoi(getenv("LILAC_CUDA_GDN_ATOM")) : 1;
    if (b->gdn_atom != 1 && b->gdn_atom != 2) b->gdn_atom = 0; /* 2: the x rows as four-float reductions */
    /* session 28: the attention layers' combine + out-projection + fold as one launch, opt-in (not yet
     * measured); never in a deterministic run (atomics) */
    /* opt-in: the same-call A/B against the byte-identical default kernels found no gain (session 29, H100:
     * 625.6 vs 627.3 tok/s at 4K; with ATT_COUT 633.6 / 631.3 vs 634.7 / 635.6); -1 (auto: gate/up where
     * max(4 GiB, 1/8 of the card) stays free) is kept for LILAC_CUDA_MOE_PACK=auto */
    b->moe_pack = !getenv("LILAC_CUDA_MOE_PACK") ? 0 : !strcmp(getenv("LILAC_CUDA_MOE_PACK"), "auto") ? -1 : atoi(getenv("LILAC_CUDA_MOE_PACK")) & 3;
    /* the default since session 29 (H100, same call: 634.7 / 635.6 vs 627.3 tok/s at 4K), never in
     * deterministic runs */
    b->att_cout = b->moe_det ? 0 : getenv("LILAC_CUDA_ATT_COUT") ? atoi(getenv("LILAC_CUDA_ATT_COUT")) : 1;
    if (b->att_cout != 1 && b->att_cout != 2) b->att_cout = 0; /* 2: x's rows as four-float reductions */
    b->cout_xl = getenv("LILAC_CUDA_COUT_XL") ? atoi(getenv("LILAC_CUDA_COUT_XL")) != 0 : 0;
    /* the default since session 32 (H200, same call: 702.5 vs 695.9 tok/s at 4096/1024; the cout kernel's
     * wait passes 0.8 µs after flash decoding ends, was 5.4): -1 = where memory allows (cu_init), as the
     * two-copy form since session 33 */
    b->cout_pk = getenv("LILAC_CUDA_COUT_PACK") ? atoi(getenv("LILAC_CUDA_COUT_PACK")) : -1;
    if (b->cout_pk != 2 && b->cout_pk > 0) b->cout_pk = 1; /* 2: the image as two copies (k_lattn_out<.., SPLIT>) */
    b->cout_cl = getenv("LILAC_CUDA_COUT_CL") && atoi(getenv("LILAC_CUDA_COUT_CL")) == 1;
    /* session 26: the decode MoE as one split-K launch, opt-in: correct but 22 % slower at 4K (bench/results/2026-12-07-h200-s26 call 2); never in a deterministic run */
    /* session 30: the GDN layer's in-projection inside its fused launch, opt-in (not yet run on a device);
     * with gdn_atom only (cu_init), so never in a deterministic run */
    b->gdn_in = getenv("LILAC_CUDA_GDN_IN") && !b->moe_det ? atoi(getenv("LILAC_CUDA_GDN_IN")) == 1 : 0;
    b->gdn_in_wpre = getenv("LILAC_CUDA_GDN_IN_WPRE") && atoi(getenv("LILAC_CUDA_GDN_IN_WPRE"));
    b->gdn_in_nst = getenv("LILAC_CUDA_GDN_IN_NST") ? LL_MAX(0, atoi(getenv("LILAC_CUDA_GDN_IN_NST"))) : 0;
    b->step_pdl = getenv("LILAC_CUDA_STEP_PDL") && atoi(getenv("LILAC_CUDA_STEP_PDL"));
    b->graph_steps = getenv("LILAC_CUDA_GRAPH_STEPS") ? LL_MAX(1, LL_MIN(64, atoi(getenv("LILAC_CUDA_GRAPH_STEPS")))) : 1;
    b->moe_sk = getenv("LILAC_CUDA_MOE_SK") && !b->moe_det ? atoi(getenv("LILAC_CUDA_MOE_SK")) == 1 : 0;
    b->sk_cap = getenv("LILAC_CUDA_MOE_SK_SMEM") ? (size_t)LL_MAX(0, atoi(getenv("LILAC_CUDA_MOE_SK_SMEM"))) * 1024 : 0;
    /* 2 (an experiment, not yet measured: session 12 wrote it after its device time): plain stores of
     * the sorted rows into an [T * K][H] buffer and a per-token sum in slot order (k_misc.cuh), also
     * deterministic, without 64-bit atomics, for 268 MB more scratch at a 4096-token chunk */
    b->gdn_prep_mb = getenv("LILAC_CUDA_GDN_PREP_MB") && atoi(getenv("LILAC_CUDA_GDN_PREP_MB")) == 1 ? 1 : 2;
    {
        const char *gp = getenv("LILAC_CUDA_GDN_PREP");
        b->gdn_prep_ti = b->gdn_prep_mb != 2 || (gp && !strcmp(gp, "sub")) ? 0 : gp && !strcmp(gp, "ti") ? 1 : 2;
    }
    /* the chunked GDN scan is 1.6x faster on a 4K chunk (70.7 -> 44.9 ms) and matches the fp64
     * recurrence in the lab (7e-7); the default since the GPU tests' tolerances were settled
     * (LILAC_CUDA_GDN_CHUNK=0: the token-serial scan) */
    b->gdn_chunk = !(getenv("LILAC_CUDA_GDN_CHUNK") && !atoi(getenv("LILAC_CUDA_GDN_CHUNK")));
    {
        const char *sc = getenv("LILAC_CUDA_GDN_SCAN");
        b->gdn_scan_tc = sc && !strcmp(sc, "fp32") ? 0 : sc && !strcmp(sc, "tc-early") ? 1 : 2;
    }
    /* the GDN states double-buffered (session 36): k_lgdn reads one copy and writes the other, so it needs no
     * barrier between its blocks' reads of the old state and their write-backs (in place, that barrier cost
     * 1.4 % at 4K on an H200, session 35) */
    b->gdn_db = !(getenv("LILAC_CUDA_GDN_DB") && !atoi(getenv("LILAC_CUDA_GDN_DB")));
    b->eager_graph = !(getenv("LILAC_CUDA_EAGER_GRAPH") && !atoi(getenv("LILAC_CUDA_EAGER_GRAPH")));
    b->embd_host = !(getenv("LILAC_CUDA_EMBED_DEVICE") && atoi(getenv("LILAC_CUDA_EMBED_DEVICE")));
    /* measured defaults (bench/results/2026-11-30-h200-cuda2): k_qact + k_gemv_q (1 row per warp
     * batch) for the GEMVs, the bulk-copy MoE; the bulk-copy GEMV measured slower (opt-in) */
    b->tma = getenv("LILAC_CUDA_TMA") && atoi(getenv("LILAC_CUDA_TMA"));
    b->tma_self = getenv("LILAC_CUDA_TMA_SELF") && atoi(getenv("LILAC_CUDA_TMA_SELF"));
    b->lean = !(getenv("LILAC_CUDA_LEAN") && !atoi(getenv("LILAC_CUDA_LEAN"))); /* and sm_90+ (cu_init) */
    /* the lm head stays on k_gemv_q: 172 vs 209 µs through k_lgemv (bench/results/2026-11-30-h200-s5) */
    b->lean_head = !(getenv("LILAC_CUDA_LEAN_HEAD") && !atoi(getenv("LILAC_CUDA_LEAN_HEAD")));
    b->fd_minpos = getenv("LILAC_CUDA_FD_MINPOS") ? atoi(getenv("LILAC_CUDA_FD_MINPOS")) : 0;
    b->fd_xs = !(getenv("LILAC_CUDA_FD_XS") && !atoi(getenv("LILAC_CUDA_FD_XS"))); /* session 17: +5 tok/s at 4K */
    b->gdn_pre = getenv("LILAC_CUDA_GDN_PRE") ? atoi(getenv("LILAC_CUDA_GDN_PRE")) & 15 : 11;
    b->gdn_fuse = !(getenv("LILAC_CUDA_GDN_FUSE") && !atoi(getenv("LILAC_CUDA_GDN_FUSE")));
    b->gdn_fold = getenv("LILAC_CUDA_FOLD") ? atoi(getenv("LILAC_CUDA_FOLD")) & 3 : 3; /* GDN layers since session 10 (+7 tok/s), attention layers since session 23 (+1.4 / +1.8 at 4096 / 256) */
    /* session 10: 4 is +2.5 tok/s at 4K but -80 at 128K (half the splits of half the heads, K/V read
     * twice, 2-position tiles), so opt-in: the graph's launch shape cannot follow the context */
    b->fd_fg = getenv("LILAC_CUDA_FD_FG") && atoi(getenv("LILAC_CUDA_FD_FG")) == 4 ? 4 : 8;
    /* session 12: flash-decoding's loop on tensor cores (k_attn_dec.cuh, fd_mma_tile) */
    b->fd_mma = !(getenv("LILAC_CUDA_FD_MMA") && !atoi(getenv("LILAC_CUDA_FD_MMA")));
    b->fd_ph = getenv("LILAC_CUDA_FD_PH") && atoi(getenv("LILAC_CUDA_FD_PH")) == 1;
    b->cout_r = getenv("LILAC_CUDA_COUT_R") ? atoi(getenv("LILAC_CUDA_COUT_R")) : 0;
    if (b->cout_r != 128 && b->cout_r != 256 && b->cout_r != 512) b->cout_r = 0;
    b->comb_nd = getenv("LILAC_CUDA_COMB_ND") && atoi(getenv("LILAC_CUDA_COMB_ND")) == 64 ? 64 : 32;
    /* the 4-head blocks' splits: the 8-head count / fd_nsdiv (2: as many blocks; 1: twice as many) */
    b->fd_nsdiv = getenv("LILAC_CUDA_FD_NSDIV") && atoi(getenv("LILAC_CUDA_FD_NSDIV")) == 1 ? 1 : 2;
    /* session 10: slower (566 vs 571 at entry); session 19, the chain since moved: at entry +2.1 tok/s
     * at 4096/1024 (3 of 3 rounds), +3.9 at 4K and +2.2 on the mean of the full bench; after the
     * wait still -12 */
    b->pfnext = getenv("LILAC_CUDA_PFNEXT") ? atoi(getenv("LILAC_CUDA_PFNEXT")) : 2;
    b->pf_cout = getenv("LILAC_CUDA_PF_COUT") && atoi(getenv("LILAC_CUDA_PF_COUT")) == 1;
    b->fuse = getenv("LILAC_CUDA_FUSE") ? atoi(getenv("LILAC_CUDA_FUSE")) : 0; /* opt-in (slower, session 7); 2: without the next projection */
    b->fd_fused = !(getenv("LILAC_CUDA_ATTN_FUSED") && !atoi(getenv("LILAC_CUDA_ATTN_FUSED")));
    b->moe_tma = !(getenv("LILAC_CUDA_MOE_TMA") && !atoi(getenv("LILAC_CUDA_MOE_TMA")));
    b->moe_tr = getenv("LILAC_CUDA_MOE_TR") ? atoi(getenv("LILAC_CUDA_MOE_TR")) : 8;
    b->fuse_hq = !(getenv("LILAC_CUDA_HQ") && !atoi(getenv("LILAC_CUDA_HQ")));
    b->tma_kb = getenv("LILAC_CUDA_TMA_KB") ? LL_MAX(1, atoi(getenv("LILAC_CUDA_TMA_KB"))) : 16;
    b->tma_st = getenv("LILAC_CUDA_TMA_ST") ? LL_MIN(TMA_MAX_ST, LL_MAX(1, atoi(getenv("LILAC_CUDA_TMA_ST")))) : 4;
    ll_status st = cu_init(b);
    if (st != LL_OK) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", ll_errmsg());
        cu_free(&b->base);
        return ll_err(st, "%s", msg);
    }
    *out = &b->base;
    return LL_OK;
}

extern "C" int cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

/* ------------------------------------------------------------------ extensions */

extern "C" ll_status cuda_backend_info(ll_backend *be, cuda_info *out) {
    cu_backend *b = CB(be);
    memset(out, 0, sizeof(*out));
    snprintf(out->device, sizeof(out->device), "%s", b->devname);
    out->n_sm = b->nsm;
    out->weight_bytes = b->weight_bytes;
    out->decode_bytes_per_token = b->decode_bytes;
    size_t fr, tot;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && tot - fr > b->mem_peak) b->mem_peak = tot - fr;
    out->mem_peak_bytes = (double)b->mem_peak;
    out->mem_backend_bytes = (double)b->alloc_bytes;
    out->mem_weights_bytes = (double)b->wdev_bytes;
    out->mem_scratch_bytes = (double)b->scratch_bytes;
    out->mem_seq_peak_bytes = (double)b->seq_bytes_peak;
    out->host_weight_bytes = (double)b->host_bytes;
    out->gdn_atom = b->gdn_atom;
    out->moe_sk = b->moe_sk;
    out->att_cout = b->att_cout;
    out->moe_pack = b->moe_pack;
    out->gdn_db = b->gdn_db;
    out->graph_builds = b->graph_n;
    out->graph_build_ms = b->graph_n ? 1e3 * b->graph_s / b->graph_n : 0;
    out->gdn_in = b->gdn_in;
    out->cout_pk = b->att_cout ? b->cout_pk : 0;
    out->fd_ph = b->att_cout && b->cout_pk == 2 && b->kv_q8 && b->fd_fg != 4 && b->fd_ns && b->fd_fused ? b->fd_ph : 0;
    out->cout_cl_launches = lean_attn_cl_launches();
    out->gdn_scan_tc = b->gdn_chunk ? b->gdn_scan_tc : 0;
    out->gdn_prep_ti = b->gdn_chunk && b->hp.gdn_v_dim == b->hp.gdn_k_dim ? b->gdn_prep_ti : 0;
    return LL_OK;
}

extern "C" ll_status cuda_backend_generate(ll_backend *be, ll_seq *sq, int32_t first_token, int32_t n, int32_t *out_tokens) {
    cu_backend *b = CB(be);
    cu_seq *s = (cu_seq *)sq;
    if (n < 0 || n > GEN_CAP) return ll_err(LL_ERR_INVALID, "cuda: generate: n = %d (max %d)", n, GEN_CAP);
    if ((int64_t)s->pos + n > s->n_ctx) return ll_err(LL_ERR_OVERFLOW, "cuda: generate: position %d + %d exceeds n_ctx %d", s->pos, n, s->n_ctx);
    if (first_token >= b->hp.n_vocab) return ll_err(LL_ERR_INVALID, "cuda: generate: token %d", first_token);
    CU_TRY(cudaSetDevice(b->dev));
    LL_TRY(ensure_graph(b, s));
    if (first_token >= 0) {
        *b->h_tok = first_token;
        CU_TRY(cudaMemcpyAsync(b->d_tok, b->h_tok, 4, cudaMemcpyHostToDevice, b->st));
    }
    LL_TRY(ensure_graph_k(b, s));
    CU_TRY(cudaMemsetAsync(b->d_gen_n, 0, 4, b->st));
    int32_t i = 0;
    if (s->graph_k) /* runs of graph_steps tokens, then the rest one by one (the same kernels, the same bits) */
        for (; i + b->graph_steps <= n; i += b->graph_steps) CU_TRY(cudaGraphLaunch(s->graph_k, b->st));
    for (; i < n; i++) CU_TRY(cudaGraphLaunch(s->graph, b->st));
    if (out_tokens && n) CU_TRY(cudaMemcpyAsync(out_tokens, b->d_gen, (size_t)n * 4, cudaMemcpyDeviceToHost, b->st));
    CU_TRY(cudaStreamSynchronize(b->st));
    LL_TRY(pk_check(b));
    if (b->ln_tr && n >= 8) ln_trace_print(b, s->pos + n - 1);
    s->pos += n;
    return LL_OK;
}

extern "C" ll_status cuda_backend_profile(ll_backend *be, ll_seq *sq, const int32_t *tokens, int32_t n, cuda_kernel_time *out,
                                          int cap, int *n_out) {
    cu_backend *b = CB(be);
    cu_seq *s = (cu_seq *)sq;
    *n_out = 0;
    LL_TRY(check_tokens(b, s, tokens, n));
    if (n > b->TB) return ll_err(LL_ERR_INVALID, "cuda: profile: %d tokens > chunk %d", n, b->TB);
    CU_TRY(cudaSetDevice(b->dev));
    CU_TRY(cudaStreamSynchronize(b->st));
    b->prof.on = 1;
    b->prof.n = 0;
    int pk = n == 1 && b->persist;
    if (pk) { /* the persistent step, timed at its grid barriers (block 0's globaltimer) */
        b->prof.on = 0;
        *b->h_tok = tokens[0];
        CU_TRY(cudaMemcpyAsync(b->d_tok, b->h_tok, 4, cudaMemcpyHostToDevice, b->st));
        LL_TRY(pk_params_write(b, s, 0, b->d_pk_ts, b->pk_prof));
        CU_TRY(cudaMemsetAsync(b->d_pk_ts, 0, 2 * PK_TS * 8, b->st));           /* block 0, last arrivals */
        CU_TRY(cudaMemsetAsync(b->d_pk_ts + 2 * PK_TS, 0xff, PK_TS * 8, b->st)); /* first arrivals (min) */
        CU_TRY(cudaMemsetAsync(b->d_pk_ts + 3 * PK_TS, 0, PK_TS * 8, b->st));   /* activations built (max) */
        decode_step_persist(b, s, b->pk_prof);
    } else if (n == 1) {
        *b->h_tok = tokens[0];
        CU_TRY(cudaMemcpyAsync(b->d_tok, b->h_tok, 4, cudaMemcpyHostToDevice, b->st));
        decode_step(b, s, 0);
    } else {
        memcpy(b->h_tokens, tokens, (size_t)n * 4);
        CU_TRY(cudaMemcpyAsync(b->d_tokens, b->h_tokens, (size_t)n * 4, cudaMemcpyHostToDevice, b->st));
        prefill_chunk(b, s, n, 1);
    }
    b->prof.on = 0;
    LL_TRY(check_launch("profile"));
    CU_TRY(cudaStreamSynchronize(b->st));
    static unsigned long long ts[4 * PK_TS];
    if (pk) {
        LL_TRY(pk_check(b));
        int nb = pk_n_barriers(b->hp);
        if (nb + 1 > PK_TS) nb = PK_TS - 1;
        CU_TRY(cudaMemcpy(ts, b->d_pk_ts, sizeof(ts), cudaMemcpyDeviceToHost));
        b->prof.n = LL_MIN(nb, PROF_MAX);
        for (int i = 0; i < b->prof.n; i++) {
            b->prof.name[i] = pk_phase(b, s, i, &b->prof.bytes[i]);
            b->prof.flops[i] = 2.0 * b->prof.bytes[i];
        }
        if (getenv("LILAC_CUDA_PK_TRACE")) pk_trace(b, s, ts, b->prof.n);
    }
    s->pos += n;
    int k = 0;
    for (int i = 0; i < b->prof.n; i++) {
        float ms = 0;
        if (pk) ms = (float)((ts[i + 1] - ts[i]) * 1e-6);
        else CU_TRY(cudaEventElapsedTime(&ms, b->prof.ev[2 * i], b->prof.ev[2 * i + 1]));
        int j = 0;
        while (j < k && strcmp(out[j].name, b->prof.name[i])) j++;
        if (j == k) {
            if (k == cap) continue;
            memset(&out[k], 0, sizeof(out[k]));
            snprintf(out[k].name, sizeof(out[k].name), "%s", b->prof.name[i]);
            k++;
        }
        out[j].calls++;
        out[j].ms += ms;
        out[j].bytes += b->prof.bytes[i];
        out[j].flops += b->prof.flops[i];
    }
    *n_out = k;
    return LL_OK;
}

extern "C" ll_status cuda_measure_read_bw(int device, size_t bytes, double *gbps) {
    *gbps = 0;
    CU_TRY(cudaSetDevice(device));
    uint4 *buf = NULL;
    unsigned int *sink = NULL;
    CU_TRY(cudaMalloc(&buf, bytes));
    cudaError_t e = cudaMalloc(&sink, 4);
    if (e == cudaSuccess) e = cudaMemset(buf, 1, bytes);
    cudaEvent_t a, z;
    cudaEventCreate(&a);
    cudaEventCreate(&z);
    int nsm = 132;
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, device);
    long n = (long)(bytes / 16);
    float best = 1e30f;
    for (int it = 0; it < 6 && e == cudaSuccess; it++) {
        cudaEventRecord(a);
        k_bw_read<<<nsm * 8, 512>>>(buf, n, sink);
        cudaEventRecord(z);
        e = cudaEventSynchronize(z);
        float ms;
        cudaEventElapsedTime(&ms, a, z);
        if (it > 0 && ms < best) best = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(z);
    cudaFree(buf);
    cudaFree(sink);
    if (e != cudaSuccess) return ll_err(LL_ERR_DEVICE, "cuda: bandwidth probe: %s", cudaGetErrorString(e));
    *gbps = (double)bytes / (best * 1e-3) / 1e9;
    return LL_OK;
}
