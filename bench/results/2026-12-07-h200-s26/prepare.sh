#!/usr/bin/env bash
# Session 26's device calls, prepared (no device was lent in sessions 25 and 26). Builds every bundle
# the four calls carry (~12 minutes here). From the repo root:
#   bash bench/results/2026-12-07-h200-s26/prepare.sh
#   .cuda-wt/c.tar.xz  call 1 + 2: lilac (HEAD), lilac-head (the variant build path), lilac-sk80
#                      (-DSK_REGS=80: the split-K MoE without spills), lilac-sk80v4 (+ -DSK_V4=1:
#                      four rows per reduction), gpu_test + fixtures, labs tmaq and lmoe
#   .cuda-wt/e.tar.xz  call 3: lilac + register-cap / PFSELF / PFLSU variants (MIN=1)
#   .cuda-wt/lean.cubin.xz  call 3: nvdisasm of the lean kernels
#   .cuda-wt/d.tar.xz  call 4: the in-graph trace builds
# Carry one bundle per call (the tracked tree is ~33 MB of the 64 MiB a call may carry).
set -e
cd "$(dirname "$0")/../../.."
A="-gencode arch=compute_90a,code=sm_90a"
make -j2 CUARCH="$A"
tests/gpu/run.sh --help > /dev/null
make build/lab/tmaq build/lab/lmoe CUARCH="$A"
rm -f build/lilac-* .cuda-wt/*.tar.xz .cuda-wt/lean.cubin*
dev/lean_variant.sh head
dev/lean_variant.sh sk80 -DSK_REGS=80
dev/lean_variant.sh sk80v4 -DSK_REGS=80 -DSK_V4=1
LAB="tmaq lmoe" dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/c.tar.xz
rm -f build/lilac-*
dev/lean_variant.sh r48 -DLN_GU_REGS=48
dev/lean_variant.sh r64 -DLN_GU_REGS=64
dev/lean_variant.sh d48 -DLN_DOWN_REGS=48
dev/lean_variant.sh d64 -DLN_DOWN_REGS=64
dev/lean_variant.sh pfself -DLN_PFSELF
dev/lean_variant.sh pflsu -DLN_PFLSU
MIN=1 dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/e.tar.xz
nvcc -O3 -std=c++17 -Isrc $A -lineinfo --expt-relaxed-constexpr -cubin -o .cuda-wt/lean.cubin src/backend/cuda/lean.cu
xz -9 -f .cuda-wt/lean.cubin
rm -f build/lilac-*
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh trace -DLILAC_LN_TRACE -DSK_REGS=80
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh tracelsu -DLILAC_LN_TRACE -DLN_PFLSU
MIN=1 dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/d.tar.xz
rm -f build/lilac-*
ls -la .cuda-wt
