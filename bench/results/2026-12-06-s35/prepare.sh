#!/usr/bin/env bash
# Session 35's bundles (~12-15 min here; run scripts/setup.sh first on a fresh machine):
#   .cuda-wt/x.tar.xz  lilac + lilac-{trace,gvt2} + gpu_test + lab/lattn, no fixtures (calls A, C)
#   .cuda-wt/f.tar.xz  lilac + gpu_test + fixtures + gpu_session.sh (call B, the whole suite)
set -e
cd "$(dirname "$0")/../../.."
A="-gencode arch=compute_90a,code=sm_90a"
make -j2 CUARCH="$A"
tests/gpu/run.sh --help > /dev/null
make -s CUARCH="$A" build/lab/lattn
mkdir -p .cuda-wt
rm -f build/lilac-*
NOLAB=1 dev/gpu_bundle.sh && mv .cuda-wt/b.tar.xz .cuda-wt/f.tar.xz
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh trace -DLILAC_LN_TRACE
SRCS="lean.cu" dev/lean_variant.sh gvt2 -DLN_GEMV_TRIG=2
NOFIX=1 LAB=lattn dev/gpu_bundle.sh && mv .cuda-wt/b.tar.xz .cuda-wt/x.tar.xz
rm -f build/lilac-*
git rev-parse HEAD > .cuda-wt/HEAD.txt
ls -la .cuda-wt
