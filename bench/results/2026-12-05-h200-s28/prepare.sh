#!/usr/bin/env bash
# Session 28's device calls, prepared (no device was lent in session 28). Builds every bundle the
# three calls carry (~20 minutes here). From the repo root:
#   bash bench/results/2026-12-05-h200-s28/prepare.sh
#   .cuda-wt/c2.tar.xz     calls 1 and 3: lilac (HEAD) + gpu_test + fixtures + lab lattn
#   .cuda-wt/e.tar.xz      call 2: lilac + the variants below (MIN=1)
#   .cuda-wt/lean.cubin.xz call 2: nvdisasm of the lean kernels
#   .cuda-wt/d.tar.xz      call 4: the in-graph trace builds (HEAD, LN_TOPK2, FD_MINB_MMA=2)
# Carry one bundle per call (the tracked tree is ~33 MB of the 64 MiB a call may carry).
set -e
cd "$(dirname "$0")/../../.."
A="-gencode arch=compute_90a,code=sm_90a"
make -j2 CUARCH="$A"
tests/gpu/run.sh --help > /dev/null
mkdir -p .cuda-wt
rm -f build/lilac-* .cuda-wt/*.tar.xz .cuda-wt/lean.cubin*
git rev-parse HEAD > .cuda-wt/HEAD.txt
make build/lab/lattn CUARCH="$A"
LAB=lattn dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/c2.tar.xz
dev/lean_variant.sh head
dev/lean_variant.sh topk2 -DLN_TOPK2=1
SRCS=cuda_backend.cu dev/lean_variant.sh fdm2 -DFD_MINB_MMA=2
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh both -DLN_TOPK2=1 -DFD_MINB_MMA=2
dev/lean_variant.sh r48 -DLN_GU_REGS=48
dev/lean_variant.sh d48 -DLN_DOWN_REGS=48
dev/lean_variant.sh pfself -DLN_PFSELF
dev/lean_variant.sh gd500 -DLN_GDN_DELAY=500
dev/lean_variant.sh gd1500 -DLN_GDN_DELAY=1500
MIN=1 dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/e.tar.xz
nvcc -O3 -std=c++17 -Isrc $A -lineinfo --expt-relaxed-constexpr -cubin -o .cuda-wt/lean.cubin src/backend/cuda/lean.cu
xz -9 -f .cuda-wt/lean.cubin
rm -f build/lilac-*
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh trace -DLILAC_LN_TRACE
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh tracetk -DLILAC_LN_TRACE -DLN_TOPK2=1
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh tracefd -DLILAC_LN_TRACE -DFD_MINB_MMA=2
MIN=1 dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/d.tar.xz
rm -f build/lilac-*
ls -la .cuda-wt
