#!/usr/bin/env bash
# The next session's bundles (~10 min here; run scripts/setup.sh first on a fresh machine):
#   .cuda-wt/f.tar.xz  lilac + gpu_test + lab/lgdn_in + fixtures + gpu_session.sh at HEAD (calls A and B)
#   .cuda-wt/t.tar.xz  lilac + lilac-trace (-DLILAC_LN_TRACE in lean.cu and cuda_backend.cu) (call C)
set -e
cd "$(dirname "$0")/../../../.."
A="-gencode arch=compute_90a,code=sm_90a"
make -j2 CUARCH="$A"
tests/gpu/run.sh --help > /dev/null
make -s CUARCH="$A" build/lab/lgdn_in
mkdir -p .cuda-wt
rm -f build/lilac-*
LAB=lgdn_in dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/f.tar.xz
SRCS="lean.cu cuda_backend.cu" dev/lean_variant.sh trace -DLILAC_LN_TRACE
MIN=1 dev/gpu_bundle.sh
mv .cuda-wt/b.tar.xz .cuda-wt/t.tar.xz
rm -f build/lilac-*
git rev-parse HEAD > .cuda-wt/HEAD.txt
ls -la .cuda-wt
