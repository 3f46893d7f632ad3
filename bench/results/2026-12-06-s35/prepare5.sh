#!/usr/bin/env bash
# call 5's bundle: .cuda-wt/x.tar.xz = lilac + lilac-nobar + gpu_test + lab/lgdn (no fixtures)
set -e
cd "$(dirname "$0")/../../.."
A="-gencode arch=compute_90a,code=sm_90a"
make -j2 CUARCH="$A"
tests/gpu/run.sh --help > /dev/null
make -s CUARCH="$A" build/lab/lgdn
mkdir -p .cuda-wt
rm -f build/lilac-*
dev/lean_variant.sh nobar -DLG_STATE_BAR=0
NOFIX=1 LAB="lgdn" dev/gpu_bundle.sh && mv .cuda-wt/b.tar.xz .cuda-wt/x.tar.xz
rm -f build/lilac-*
git rev-parse HEAD > .cuda-wt/HEAD.txt
ls -la .cuda-wt
