/*
 * k_persist.cuh — what the host and the persistent decode kernel (persist.cu) share: the per-layer
 * table, the step's parameters and the launch functions.
 *
 * The persistent decode kernel (issue 6) runs a whole decode step in one launch: one grid of
 * (SMs x resident blocks) blocks walks the phases decode_step launches as kernels, separated by
 * grid-wide barriers (~1.75 µs) instead of kernel boundaries (~10 µs each in the graph,
 * bench/results/2026-11-30-h200-s2). Weights stream through a ring of shared-memory stages filled
 * by the bulk-copy engine; a block requests its first tiles of the next phase before it waits at
 * the barrier that opens that phase, so DRAM keeps streaming across barriers. See persist.cu.
 *
 * The kernel lives in its own translation unit (persist.cu) so that changing it does not rebuild
 * the rest of the backend; the launch functions take the parameters as an opaque device pointer.
 */
#ifndef LILAC_K_PERSIST_CUH
#define LILAC_K_PERSIST_CUH

#include <cuda_runtime.h>

#include "k_attn.cuh"
#include "k_attn_dec.cuh"
#include "k_gdn.cuh"
#include "k_gemv.cuh"

#define PK_THREADS 256
#define PK_WARPS (PK_THREADS / 32)
#define PK_NST_MAX 8           /* ring stages */
#define PK_DOWN_MAX_TR 32      /* MoE-down tile rows (static shared memory of the partial dots) */
enum { PK_COPY_BULK = 0, PK_COPY_ASYNC = 1 }; /* how weight tiles reach shared memory (persist.cu) */
#define PK_TS 1024             /* profile: stamps per kind (barriers + 1 at most) */

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

/* Everything one step needs: the kernel's by-value parameter (constant bank: no registers, no global
 * loads); one copy per sequence, captured into its graph. */
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
    float *S2;                /* [n_gdn][HV][DK][DV] the state's second copy (gdn_state_copy; NULL: in place) */
    float *part_o, *part_ml;  /* [nsplit][NH][HD], [nsplit][NH][2] */
    int n_ctx, nsplit;
    /* activations */
    float *qkv, *ab, *o, *qg, *kb, *vb, *q, *att;
    const float *inv_freq;
    int NH, NKV, HD, n_rot, HK, HV, DK, DV, tiled, CD;
    float eps;
    /* dynamic shared memory: [0, ring_off) activation / phase scratch, then nst stages of `stage` B */
    int ring_off, nst, stage, copy;  /* copy: PK_COPY_* */
    /* barrier and diagnostics */
    unsigned *bar, *epoch, *flag;
    unsigned long long *prof; /* optional globaltimer stamps [4][PK_TS]: [0][1 + n] block 0 leaves barrier n,
                               * [1][n] / [2][n] last / first block arrives at barrier n, [3][n] last block
                               * has built the activation of the phase that barrier n - 1 opened */
    int *err;
    int empty;                /* diagnostic: > 0 runs only this many barriers (their cost), no work */
    int poll_ns;              /* barrier: pause between polls of the flag (0: none) */
    int diag;                 /* diagnostic (wrong logits): 1 tiles streamed, no dot products; 2 dots, no copies */
};

/* persist.cu: allows `smem` bytes of dynamic shared memory and returns the resident blocks per SM
 * (0 when it does not fit) for the variant compiled for `minb` resident blocks; launches one step with the parameters at `params` (a host pk_params,
 * passed by value; void because persist.cu compiles the kernel headers in a namespace of their own). */
cudaError_t pk_kernel_config(int minb, size_t smem, int *blocks_per_sm);
void pk_kernel_launch(int minb, int grid, size_t smem, cudaStream_t st, const void *params);

#endif
