/*
 * cuda_backend.h — CUDA-only extensions of the backend interface, for `lilac bench` and the GPU
 * tests. The backend itself is created with cuda_backend_new (backend.h) and used through its
 * vtable; these calls take an ll_backend that cuda_backend_new returned.
 */
#ifndef LILAC_CUDA_BACKEND_H
#define LILAC_CUDA_BACKEND_H

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuda_info {
    char device[256];
    int n_sm;
    double weight_bytes;          /* device bytes of all weights */
    double decode_bytes_per_token;/* weight bytes one decode step reads (8 routed experts/layer, no embedding table) */
    double mem_peak_bytes;        /* most device memory in use by this process so far (cudaMemGetInfo, sampled) */
    double mem_backend_bytes;     /* bytes this backend allocated on the device (weights + scratch), sequences apart */
    /* the peak, broken down (bytes): device weights, forward scratch (decode + prefill chunk
     * workspace), the largest total of live sequences (KV cache, GDN state, attention partials);
     * peak minus these three is the CUDA context and other processes */
    double mem_weights_bytes, mem_scratch_bytes, mem_seq_peak_bytes;
    double host_weight_bytes;     /* weights kept in pinned host memory (the token embedding table) */
    int gdn_atom;                 /* 1, 2: the GDN fold's shares go by fp32 atomics (LILAC_CUDA_GDN_ATOM, not in deterministic runs) */
    int moe_sk;                   /* 1: the decode MoE is one split-K launch (LILAC_CUDA_MOE_SK=1, not in deterministic runs) */
    int att_cout;                 /* 1: the attention combine + out-projection + fold are one launch (LILAC_CUDA_ATT_COUT=1, not in deterministic runs) */
    int moe_pack;                 /* the MoE weights also tile-packed (LILAC_CUDA_MOE_PACK: 1 gate/up, 2 the down, 3 both) */
    int gdn_in;                   /* GDN layers whose input projection runs inside the fused GDN launch (LILAC_CUDA_GDN_IN=1) */
    int cout_pk;                  /* ATT_COUT's slices packed at load (LILAC_CUDA_COUT_PACK: 1, 2 as two copies; 0 off) */
    long cout_cl_launches;        /* launches of its cluster-merge form so far in this process (LILAC_CUDA_COUT_CL=1) */
    int fd_ph;                    /* flash decoding's partials as FP16 o / l for the two-copy cout form (LILAC_CUDA_FD_PH=1) */
    int gdn_scan_tc;              /* the chunked GDN prefill scan on tensor cores: 2 (the default) q and k scaled at fragment load,
                                   * 1 (LILAC_CUDA_GDN_SCAN=tc-early) in the fetch; 0 (=fp32) off */
    int gdn_prep_ti;              /* where DV == DK, the chunk prep's T = (I + A)^-1 form: 2 (the default) with its Gram matrices on
                                   * tensor cores, 1 (LILAC_CUDA_GDN_PREP=ti) in fp32 FMAs; 0 (=sub) the substitution per column */
    int gdn_db;                   /* 1: the GDN states double-buffered (the default; LILAC_CUDA_GDN_DB=0: one copy in place) */
    int graph_builds;             /* decode graphs captured so far (one per sequence that decoded or prefilled) */
    double graph_build_ms;        /* their mean host time to capture + instantiate, ms */
} cuda_info;

typedef struct cuda_kernel_time {
    char name[40];
    int calls;
    double ms;                    /* total over calls */
    double bytes;                 /* bytes moved (weights + the main activations), estimated */
    double flops;
} cuda_kernel_time;

ll_status cuda_backend_info(ll_backend *be, cuda_info *out);

/* Greedy decode of n steps entirely on the device (CUDA graph per step, the next token never
 * leaves the GPU): the token fed at step i+1 is the argmax of the logits after step i. Step 0 feeds
 * first_token, or (first_token < 0) the argmax of the last forward that asked for logits, so
 * out_tokens (may be NULL) receives the n tokens fed — with first_token < 0 that is exactly the
 * greedy continuation. The sequence advances n positions; the argmax after the last step stays on
 * the device for the next call. */
ll_status cuda_backend_generate(ll_backend *be, ll_seq *s, int32_t first_token, int32_t n, int32_t *out_tokens);

/* Runs one decode step (token `tok`) or one prefill chunk of n tokens (n > 1) un-graphed with a
 * CUDA event pair around every kernel; fills up to cap per-kernel entries (summed by name). The
 * sequence advances as in forward(). */
ll_status cuda_backend_profile(ll_backend *be, ll_seq *s, const int32_t *tokens, int32_t n, cuda_kernel_time *out,
                               int cap, int *n_out);

/* Device read bandwidth measured in this process (GB/s, 1e9), streaming `bytes` (e.g. 4 GiB). */
ll_status cuda_measure_read_bw(int device, size_t bytes, double *gbps);

#ifdef __cplusplus
}
#endif

#endif
