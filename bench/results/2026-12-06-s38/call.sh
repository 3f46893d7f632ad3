#!/bin/bash
# Session 38's adaptive call (carry [".cuda-wt/x.tar.xz", ".cuda-wt/lab_gdn_chunk"]; timeout_s 420).
# On an H200: the deterministic digest (must be e37949b3c33931b9), then the benchmark of record
# (session 37's call.sh). On any other card: the GDN chunk lab (fp32 scan vs the 3xTF32 tensor-core
# scan: errors against fp64 and time at T = 4096), then, if V is set, session 37's A/B of $V.
# Everything goes into $OUT/s38.tgz.
R=$PWD; W=/tmp/w38; rm -rf $W; mkdir -p $W
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g" | tee $W/gpu.txt
if echo "$g" | grep -q H200; then
  V=none bash $R/bench/results/2026-12-06-s37/call.sh; cp $OUT/s37.tgz $W/ 2>/dev/null
  tar czf $OUT/s38.tgz -C $W .; exit 0
fi
[ -x .cuda-wt/lab_gdn_chunk ] && timeout 120 .cuda-wt/lab_gdn_chunk 2>&1 | tee $W/lab_gdn_chunk.txt
if [ -n "$V" ] && [ "$V" != none ]; then
  V="$V" bash $R/bench/results/2026-12-06-s37/call.sh; cp $OUT/s37.tgz $W/ 2>/dev/null
fi
tar czf $OUT/s38.tgz -C $W .
