/*
 * lean.h — launchers of the lean decode kernels (lean.cu, k_lean.cuh). Each takes the caller's
 * gemv_args / moe_args (the layout of k_gemv.cuh) and returns 1 when it launched the kernel on st,
 * 0 when the shapes or weight types are outside what the kernel handles (the caller then uses the
 * older kernels). Launches use programmatic dependent launch when pdl != 0. tr: NULL, or a trace
 * record of LN_TRS (40) device u64 (k_lean.cuh; stamped only in -DLILAC_LN_TRACE builds).
 */
#ifndef LILAC_LEAN_H
#define LILAC_LEAN_H

#include <cuda_runtime.h>
#include <stddef.h>

/* Allows the kernels their dynamic shared memory; once per device. smem_cap: bytes of dynamic
 * shared memory per block of the GEMV / MoE kernels (0: the measured default, 110 KB, so that two
 * consecutive kernels' blocks share an SM; clamped to [32, 220] KB). More lets a block keep its whole
 * share of a large matrix in flight and keeps two blocks of one kernel off one SM (above ~114 KB),
 * at the price of consecutive kernels that no longer fit one SM together. carveout: prefer the
 * largest shared-memory split for these kernels (ncu showed launches at 135 KB and 233 KB splits;
 * an SM changes its split only when idle). Both are LILAC_CUDA_LN_SMEM=<KB> / LILAC_CUDA_LN_CARVE=1
 * switches, not yet measured (docs/notes.md). */
cudaError_t lean_init(size_t smem_cap, int carveout);
/* 1 when lean.cu was built with -DLILAC_LN_TRACE (the kernels stamp trace records). */
int lean_trace_built(void);
/* y_s (+)= W_s x̂ (gemv_args without argmax): k_lgemv. */
int lean_gemv(const void *gemv_args, int nsm, int pdl, cudaStream_t st, unsigned long long *tr);
/* MoE gate/up + SwiGLU and down + combine (moe_args): k_lmoe_gu then k_lmoe_down. which: 1 gate/up
 * only, 2 down only, 3 both (the per-kernel profile times them apart). Returns 0 (nothing launched)
 * unless both kernels apply. */
int lean_moe(const void *moe_args, int nsm, int pdl, cudaStream_t st, int which, unsigned long long *tr);

#endif
