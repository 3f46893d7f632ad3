/*
 * lean.h — launchers of the lean decode kernels (lean.cu, k_lean.cuh). Each takes the caller's
 * gemv_args / moe_args (the layout of k_gemv.cuh) and returns 1 when it launched the kernel on st,
 * 0 when the shapes or weight types are outside what the kernel handles (the caller then uses the
 * older kernels). Launches use programmatic dependent launch when pdl != 0. tr: NULL, or a trace
 * record of LN_TRS (52) device u64 (k_lean.cuh; stamped only in -DLILAC_LN_TRACE builds).
 */
#ifndef LILAC_LEAN_H
#define LILAC_LEAN_H

#include <cuda_runtime.h>
#include <stddef.h>

/* Allows the kernels their dynamic shared memory; once per device. smem_cap: bytes of dynamic
 * shared memory per block of the GEMV / MoE kernels (0: the default, LN_SMEM_MAX = 120 KB; clamped
 * to [32, 220] KB). Above ~114 KB two blocks of one kernel cannot share an SM: at 110 KB every launch
 * had two of its blocks on some SM, which then did twice the tiles (session 6 measured 382 -> 422
 * tok/s with 120 KB + the carveout; 130-200 KB the same as 120). carveout: prefer the largest
 * shared-memory split for these kernels (an SM changes its split only when idle, and a block of
 * 120 KB fits no smaller split); < 0 the default (on), 0 off. LILAC_CUDA_LN_SMEM=<KB> and
 * LILAC_CUDA_LN_CARVE=0|1 set them. pad (bits, LILAC_CUDA_LN_PAD): 1 every launch asks for the
 * whole smem_cap, not just the ring it fills: the small kernels (the router's blocks, MoE down) then
 * cannot double up on an SM either, but a kernel's blocks enter an SM only as the previous
 * kernel's leave (measured slower: 445 vs 475 tok/s); 2 only the dense GEMVs with K >= 4096 (the
 * attention out-projection) and 4 only the router's launch (the engine's default 6, session 17:
 * +4.3 tok/s; the trace had two of their blocks on one SM beside the combine's). npre: a dense GEMV requests only its first npre
 * stages before griddepcontrol.wait and the rest after its prologue (0: all before; LILAC_CUDA_LN_PRE,
 * default 1: the prologue's loads of x no longer queue behind the whole burst; session 7 measured
 * 538.6 / 527.5 / 521.8 tok/s for 1 / 2 / 3 with paired tiles, 521 vs 514 for 2 vs all without).
 * pair: Q4_K rows of <= 32 chunks in tiles of twice the rows, a thread dotting two (LILAC_CUDA_LN_PAIR,
 * default 1). dpair: MoE down tiles of twice the rows, a thread dotting two (LILAC_CUDA_LN_DPAIR,
 * default 1): half the bulk copies a block issues before its wait. head: the lm head (a Q6_K argmax
 * GEMV of K = 2048) through registers, a warp per row (k_lhead, LILAC_CUDA_LN_HEAD, default 1), or
 * 0 through the copy-engine ring of the other GEMVs; the same bits either way. */
cudaError_t lean_init(size_t smem_cap, int carveout, int pad, int npre, int pair, int dpair, int head);
/* 1 when lean.cu was built with -DLILAC_LN_TRACE (the kernels stamp trace records). */
int lean_trace_built(void);
/* The router folded into an attention layer's out-projection (session 22): besides y = W_o att, the
 * launch writes lraw[r] = W_r[r] diag(g) x + B[r] . att for the NL logit rows (B = W_r diag(g_ffn)
 * W_o, BF16 [NL][K]; the x term before the wait: x is several kernels back). */
struct lean_fb {
    int mode;               /* 1: the layer's qkv projection copies its input x to x (below); 2: its out-projection */
    const void *B;          /* [NL][K] BF16 */
    float *lraw;            /* [NL] */
    int NL;
    const void *Wr, *Ws;    /* BF16 router rows [NL - (Ws ? 1 : 0)][H], shared-expert gate row [H] or NULL */
    const float *g;         /* [H] ffn norm gain */
    float *x;               /* [H] a copy of the layer's input (mode 1 writes it, mode 2 reads it before its
                             * wait: the out-projection's blocks add to the residual itself meanwhile) */
    int H;
};
/* y_s (+)= W_s x̂ (gemv_args without argmax): k_lgemv; with fb, k_lgemv_fb (0, nothing launched,
 * where its shapes do not apply: plain dense rows, K % 2048 == 0, NL <= 2 x the grid). launch 0:
 * only whether it would launch (fb's shape check). */
int lean_gemv(const void *gemv_args, int nsm, int pdl, cudaStream_t st, unsigned long long *tr, const struct lean_fb *fb = NULL,
              int launch = 1);
/* MoE gate/up + SwiGLU and down + combine (moe_args): k_lmoe_gu then k_lmoe_down. which: 1 gate/up
 * only, 2 down only, 3 both (the per-kernel profile times them apart). Returns 0 (nothing launched)
 * unless both kernels apply. */
/* Byte ranges of weights a kernel asks the L2 to fetch ahead (cp.async.bulk.prefetch.L2): the MoE down
 * prefetches the next layer's input projection (session 10). when: 0 off, 1 after the down's wait
 * (gate/up's routed tiles have landed by then), 2 at the down's entry. */
#define LEAN_PF_MAX 8
struct lean_pf {
    const void *p[LEAN_PF_MAX];
    size_t bytes[LEAN_PF_MAX];
    int n, when;
};
/* The MoE weights tile-packed (LILAC_CUDA_MOE_PACK, session 29, opt-in): every ring stage's piece of
 * one matrix is contiguous in the stage's shared-memory layout, so it is one bulk copy instead of
 * one per plane (gate/up: 1 instead of 4 per stage; the down: 1 instead of 2 (Q4_K) or 4 (Q6_K) per
 * slot). gu / sgu: routed / shared gate+up; dn / sdn: routed / shared down. Each NULL or device
 * memory of lean_pack_bytes(moe_args, 0 / 1 / 2 / 3) bytes (0 where the lean MoE does not apply),
 * filled by lean_pack from moe_args' planes on stream st (0 on failure). The planes stay: prefill
 * and the other kernels read them, so this is extra memory. */
typedef struct lean_pack_t {
    void *gu, *sgu, *dn, *sdn;
} lean_pack_t;
size_t lean_pack_bytes(const void *moe_args, int which);
int lean_pack(const void *moe_args, const lean_pack_t *pk, cudaStream_t st);
int lean_moe(const void *moe_args, int nsm, int pdl, cudaStream_t st, int which, unsigned long long *tr, float *wraw,
             const lean_pf *pf = NULL, const lean_pack_t *pk = NULL);
/* wraw: NULL, or the router is folded into lean_gdn (lean_fold): moe_args.logits are raw and its x
 * is the previous kernel's output; wraw is device [k + 1] floats for the routing weights that
 * gate/up hands to down. */

/* A layer's MoE as ONE launch split by K (k_lmoe_sk.cuh; session 26, opt-in): gate/up, SwiGLU, down
 * and the weighted combine, added into m.out (the residual, which is also m.x) by fp32 reductions,
 * so the sums' order varies from run to run. Clusters of 8 blocks share each unit of h through
 * distributed shared memory. raw: the router is folded into the kernel before (lean_fold: the
 * logits are raw). pf: the next layer's input projection into L2 (as lean_moe's down, `when`
 * ignored beyond on / off). ctr: a device u64, zero at first use, never reset: the grid-wide "past
 * the prologue" counter, whose epochs are grid-size increments, so every launch on one counter must
 * have the same grid (the backend keeps one per layer: a layer's shapes and settings never change). cap: bytes of dynamic shared memory a block may take (0: 220 KB). Returns 1 when
 * it launched (launch 0: would launch), 0 where the shapes, types or device do not allow it. */
int lean_moe_sk(const void *moe_args, int nsm, int pdl, cudaStream_t st, unsigned long long *tr, int raw, const lean_pf *pf,
                unsigned long long *ctr, size_t cap, int launch);

/* One launch for a layer's MoE (router logits, top-k, gate/up + SwiGLU, down + combine + residual:
 * the same results as lean_gemv(router) + lean_moe) and, when tail != NULL, the next layer's input
 * projection (a gemv_args with the RMSNorm prologue), k_fused.cuh. One block per SM (nsm blocks,
 * grid barriers through *gbar: a device u64, zero at first use, shared by every launch on the stream
 * and never reset). Returns 2 when it launched with the tail, 1 without it (the tail's shapes were
 * not handled: the caller launches it), 0 when nothing was launched. */
int lean_moe_fused(const void *moe_args, const void *router_gemv_args, const void *tail_gemv_args, int nsm, int pdl, cudaStream_t st,
                   unsigned long long *gbar, unsigned long long *tr);

/* A GDN layer's decode step and output projection in one launch (k_lgdn.cuh): gdn is the step's
 * gdn_args (T = 1), dk its key head size, out the output projection's gemv_args (the gated head
 * norm prologue, one Q4_K segment added into the residual). part: device [HV][H] floats for the
 * heads' shares; cnt: LG_MAX_PARTS (16) device counters, zero at first use and never reset (NULL:
 * the shares go into x by fp32 atomics, whose order and last bits vary from run to run). hc: 64 device
 * counters, zero at first use and never reset, for the barrier between the head's blocks' reads of the
 * old state and their write-backs (NULL, or a grid too big to be resident at once: the launch is in
 * clusters of a head's blocks instead, correct but slower). pre: what
 * is requested before griddepcontrol.wait (1 the W slice, 2 the state; 3 both). Returns 0
 * (nothing launched) outside DK = DV = 128, power-of-two HV and Q4_K rows of 256 | H; with launch 0
 * only says whether it would launch. */
int lean_gdn(const void *gdn, int dk, const void *out, float *part, unsigned *cnt, unsigned *hc, int pre, int pdl, cudaStream_t st,
             unsigned long long *tr, int launch, const struct lean_fold *fold);
/* Test hook (LILAC_CUDA_GDN_STAGGER): from now on every lean_gdn block but each head's part 0 waits ns
 * at entry (0: off), which makes a missing barrier between the head's state reads and write-backs
 * show as wrong results instead of a rare race. */
void lean_gdn_stagger(unsigned ns);

/* The MoE router folded into lean_gdn (k_lgdn.cuh): the kernel also writes the raw router logits
 * lraw = W_r diag(g) x (x the new residual; no 1/rms), from B = W_r diag(g) W_out (precomputed at
 * load, lean_fold_precompute) and W_r itself. Then it reads the residual from xin and writes
 * out's y = xin + W_out y (xin != out's y). part must hold lean_gdn_part_floats(HV, H, NL). */
struct lean_fold {
    const void *B;     /* __nv_bfloat16 [NL][HV * DV] */
    const void *wr;    /* __nv_bfloat16 [E][H] router rows */
    const void *ws;    /* __nv_bfloat16 [1][H] shared-expert gate row, NULL: none (NL = E) */
    const float *g;    /* [H] ffn norm gain */
    int E;
    const float *xin;  /* [H] */
    float *lraw;       /* [NL] */
    /* the atomic form (lean_gdn's cnt NULL; k_lgdn<true, 1 | 2>): out's y and lraw are all zeros at
     * entry and receive the shares by fp32 atomics; the launch zeroes zx [H] and zl [NL], the next
     * GDN layer's y and lraw (NULL: the ordered form, cnt required); atom 2: y's rows four per
     * reduction (red.global.add.v4.f32), else one */
    float *zx, *zl;
    int atom;
    /* NULL, or the layer's input projection in the same launch (k_lgdn<true, ATOM, true>, session 30,
     * LILAC_CUDA_GDN_IN=1; atomic form only): its gemv_args (the RMSNorm prologue of x = xin; the
     * segments qkv, z, b, a as gemv_add gave them), whose outputs are then never stored: the step
     * reads them from the k-head's cluster. in_nst: ring stages (0: the default, 3); in_wpre: the W_out / B
     * slices requested before the wait into their own shared memory (else into the ring after the dots) */
    const void *in;
    int in_nst, in_wpre;
};
size_t lean_gdn_part_floats(int HV, int H, int NL);
/* The attention layer's split combine + out-projection + router fold in one launch split by head
 * (k_lattn.cuh; LILAC_CUDA_ATT_COUT=1). x and lraw are all zeros at entry and receive x_old + W_o y
 * and W_r diag(g) x_new by fp32 atomics (the order varies: not for deterministic runs); the launch
 * zeroes zx [H] and zl [NL], the next attention layer's. Returns 0 (nothing launched) outside head
 * dim 256, Q4_K W_o, H / NH / 8 a power of two <= 32, nsplit + xs <= 1024; with launch 0 only says
 * whether it would launch (for max_splits partials). */
struct lean_attn {
    const float *part_o, *part_ml; /* flash decoding's partials [splits][NH][HD], [splits][NH][2] */
    const float *qg;               /* [NH][2 HD]: q, then the output gate's pre-activation */
    const int *pos;
    int nsplit, minpos, xs, NH, HD;
    const void *wo;                /* gmat of W_o [H][NH HD] */
    const float *xin;              /* [H] x_old */
    float *x;                      /* [H] */
    const void *B, *wr, *ws;       /* the fold (lean_fold's) */
    const float *g;
    int E;
    float *lraw, *zx, *zl;
    int v4;                        /* x's rows four per red.global.add.v4.f32 (LILAC_CUDA_ATT_COUT=2) */
    int xl;                        /* the router's x_old term after the wait, its operands by cp.async (LILAC_CUDA_COUT_XL) */
    const void *pk;                /* NULL, or the static slices packed by lean_attn_pack (LILAC_CUDA_COUT_PACK): one bulk
                                    * copy per block instead of 16-byte cp.async; implies xl's form */
    int pk_split;                  /* with pk: two bulk copies (B's and the router rows' part first), each waited
                                    * for before its step (LILAC_CUDA_COUT_PACK=2) */
    int cl;                        /* with pk (not pk_split): a head's blocks as one cluster sharing the merge
                                    * (LILAC_CUDA_COUT_CL=1; falls back to pk's form where P > 8 or no such
                                    * cluster fits) */
    int ph;                        /* with pk_split: part_o holds FP16 o / l (k_attn_decode_fd<.., PH>,
                                    * LILAC_CUDA_FD_PH=1); lean_attn_out refuses it with any other form */
    int rows;                      /* W_o rows per block: 0 the default (512 where 64 blocks result, else 256
                                    * where a block per SM results, else 128), or 128 / 256 / 512
                                    * (LILAC_CUDA_COUT_R); the packed image must be
                                    * built with the same value */
};
int lean_attn_out(const struct lean_attn *a, int pdl, cudaStream_t st, unsigned long long *tr, int launch);
/* launches of the CL form so far (a->cl falls back to the packed form where no cluster fits: the lab checks) */
long lean_attn_cl_launches(void);
/* The packed slices of lean_attn_out's blocks (a->pk's form): their bytes (0: shapes not taken) and
 * their construction from a's W_o, B, router rows into pk (device, lean_attn_pack_bytes; synchronous on st). */
size_t lean_attn_pack_bytes(const struct lean_attn *a);
cudaError_t lean_attn_pack(const struct lean_attn *a, void *pk, cudaStream_t st);

/* B[NL][K] (BF16, device) = (wr rows, then ws) diag(g) Wout for a BF16 router [E][H], optional BF16
 * shared gate [1][H] and an out-projection gmat (any type gmat_dequant16 reads) of H rows and K
 * columns; tmp: device scratch of (H * K + NL * H) floats. Synchronous on st. */
cudaError_t lean_fold_precompute(void *B, const void *wr, const void *ws, const float *g, int E, int H, const void *wout_gmat,
                                 float *tmp, cudaStream_t st);

#endif
