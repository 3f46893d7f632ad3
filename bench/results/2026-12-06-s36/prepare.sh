#!/usr/bin/env bash
# Session 36's bundles (~12-15 min here; run scripts/setup.sh first on a fresh machine):
#   .cuda-wt/x.tar.xz  lilac + lilac-nobar + gpu_test + lab/lgdn, no fixtures (the A/B call)
#   .cuda-wt/f.tar.xz  lilac + gpu_test + fixtures + gpu_session.sh (the whole suite)
# nobar: -DLG_STATE_BAR=0, k_lgdn without the state barrier; with the state in place
# (LILAC_CUDA_GDN_DB=0) that is the racy kernel, the upper bound the double-buffered state should reach.
set -e
cd "$(dirname "$0")/../../.."
A="-gencode arch=compute_90a,code=sm_90a"
make -j2 CUARCH="$A"
tests/gpu/run.sh --help > /dev/null
make -s CUARCH="$A" build/lab/lgdn
mkdir -p .cuda-wt
rm -f build/lilac-*
NOLAB=1 dev/gpu_bundle.sh && mv .cuda-wt/b.tar.xz .cuda-wt/f.tar.xz
dev/lean_variant.sh nobar -DLG_STATE_BAR=0
NOFIX=1 LAB="lgdn" dev/gpu_bundle.sh && mv .cuda-wt/b.tar.xz .cuda-wt/x.tar.xz
rm -f build/lilac-*
git rev-parse HEAD > .cuda-wt/HEAD.txt
ls -la .cuda-wt
