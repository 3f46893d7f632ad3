#!/bin/bash
# session 34's first call (carry [".cuda-wt/x.tar.xz"]): on an H200 the benchmark of record first
# (call C), then the lab and the A/B of call A; on an H100 call A (trimmed) as is.
R=$PWD
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g"
if echo "$g" | grep -q H200; then
  bash $R/bench/results/2026-12-05-s33/next/callC.sh 2>&1 | tail -30
  B=/tmp/bx; cd $B; export LD_LIBRARY_PATH=$B/lib
  timeout 90 ./lab/lattn 2>&1 | tee $OUT/lab_lattn.txt | grep -E "OK|FAIL|per launch" | cut -c1-70
  V="new:lilac ph:lilac:LILAC_CUDA_FD_PH=1 r512:lilac:LILAC_CUDA_COUT_R=512 phr512:lilac:LILAC_CUDA_FD_PH=1,LILAC_CUDA_COUT_R=512" ROUNDS=2 DET=0 TO=60 bash $R/dev/ab_bench.sh
  mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
  xz -9 $OUT/*.txt 2>/dev/null
else
  bash $R/bench/results/2026-12-06-s34/callA.sh
fi
