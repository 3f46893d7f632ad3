#!/usr/bin/env bash
# Session 35's bundles (~12-15 min here; run scripts/setup.sh first on a fresh machine):
#   .cuda-wt/x.tar.xz  lilac + lilac-{nobar,gvt2} + gpu_test + lab/{lattn,lgdn,lgdn_in}, no fixtures (call 3)
#   .cuda-wt/f.tar.xz  lilac + gpu_test + fixtures + gpu_session.sh (the whole suite)
# nobar: -DLG_STATE_BAR=0 (k_lgdn without the state barrier: its cost); gvt2: -DLN_GEMV_TRIG=2 (the
# timing that showed the race). (Call 2 had gvt2nb: both, the race back.)
set -e
cd "$(dirname "$0")/../../.."
A="-gencode arch=compute_90a,code=sm_90a"
make -j2 CUARCH="$A"
tests/gpu/run.sh --help > /dev/null
make -s CUARCH="$A" build/lab/lattn build/lab/lgdn build/lab/lgdn_in
mkdir -p .cuda-wt
rm -f build/lilac-*
NOLAB=1 dev/gpu_bundle.sh && mv .cuda-wt/b.tar.xz .cuda-wt/f.tar.xz
dev/lean_variant.sh nobar -DLG_STATE_BAR=0
dev/lean_variant.sh gvt2 -DLN_GEMV_TRIG=2
NOFIX=1 LAB="lattn lgdn lgdn_in" dev/gpu_bundle.sh && mv .cuda-wt/b.tar.xz .cuda-wt/x.tar.xz
rm -f build/lilac-*
git rev-parse HEAD > .cuda-wt/HEAD.txt
ls -la .cuda-wt
