#!/usr/bin/env bash
# Session 25's first two device calls, prepared (the device was not lent in session 25). Builds
# what call1/run.sh and call2/run.sh need into .cuda-wt/c.tar.xz (lilac, the A/B variants, gpu_test
# + fixtures, lab/tmaq) and .cuda-wt/lean.cubin.xz (for nvdisasm on the device). From the repo root:
#   bash bench/results/2026-12-06-h200-s25/prepare.sh
# then run call1 (carry [".cuda-wt/c.tar.xz"]) and, while the machine is warm (30 s), call2 (carry
# [".cuda-wt/lean.cubin.xz"]; it reuses /tmp/b, or unpacks c.tar.xz if the machine is fresh: then
# carry both). ~6 + ~7 minutes of device time. call3/run.sh (carry [".cuda-wt/d.tar.xz"]): the in-graph
# traces of the GDN_ATOM and PFLSU forms against the default (~1 minute), for where the time went.
# ~11 minutes here in all.
set -e
cd "$(dirname "$0")/../../.."
A="-gencode arch=compute_90a,code=sm_90a"
make -j2 CUARCH="$A"
tests/gpu/run.sh --help > /dev/null
make build/lab/tmaq CUARCH="$A"
rm -f build/lilac-*
dev/lean_variant.sh head
dev/lean_variant.sh r48 -DLN_GU_REGS=48
dev/lean_variant.sh r64 -DLN_GU_REGS=64
dev/lean_variant.sh d48 -DLN_DOWN_REGS=48
dev/lean_variant.sh d64 -DLN_DOWN_REGS=64
dev/lean_variant.sh pfself -DLN_PFSELF
dev/lean_variant.sh pflsu -DLN_PFLSU
rm -f .cuda-wt/*.tar.xz .cuda-wt/lean.cubin*
LAB=tmaq dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/c.tar.xz
nvcc -O3 -std=c++17 -Isrc $A -lineinfo --expt-relaxed-constexpr -cubin -o .cuda-wt/lean.cubin src/backend/cuda/lean.cu
xz -9 -f .cuda-wt/lean.cubin
# call 3's bundle (the in-graph trace build alone: it does not fit beside c.tar.xz under the carry limit)
rm -f build/lilac-*
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh trace -DLILAC_LN_TRACE
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh tracelsu -DLILAC_LN_TRACE -DLN_PFLSU
MIN=1 dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/d.tar.xz
ls -la .cuda-wt
