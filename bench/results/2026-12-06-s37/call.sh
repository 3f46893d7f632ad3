#!/bin/bash
# Session 37's adaptive call (carry [".cuda-wt/x.tar.xz"] from bench/results/2026-12-06-s36/prepare.sh;
# timeout_s 420). On an H200: the deterministic digest (must be e37949b3c33931b9), then the benchmark
# of record (SUITE=0, ~4 min). On any other card: a same-call A/B of the variants in $V (default: the
# GDN kernel's pre-wait loads, LILAC_CUDA_GDN_PRE, re-measured now that the double-buffered state
# removed its barrier; 11 is the default), ROUNDS rounds interleaved (~3 min for 4 variants x 3).
# Everything goes into $OUT/s37.tgz (a call returns at most 8 files).
R=$PWD; B=/tmp/bx; W=/tmp/w37
rm -rf $B $W; mkdir -p $B $W; tar xJf ${BX:-.cuda-wt/x.tar.xz} -C $B; cd $B  # always: a warm machine holds older files
export LD_LIBRARY_PATH=$B/lib
pk() { tar czf $OUT/s37.tgz -C $W .; }
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g" | tee $W/gpu.txt
if echo "$g" | grep -q H200; then
  OUT=$W SUITE=0 bash $R/dev/record_bench.sh 2>&1 | tail -30
  pk; exit 0
fi
: "${V:=ref:lilac gp9:lilac:LILAC_CUDA_GDN_PRE=9 gp13:lilac:LILAC_CUDA_GDN_PRE=13 gp15:lilac:LILAC_CUDA_GDN_PRE=15}"
[ "$V" = none ] && { pk; exit 0; }
V="$V" ROUNDS=${ROUNDS:-3} DET=${DET:-0} TO=60 OUT=$W bash $R/dev/ab_bench.sh
pk
