#!/bin/bash
# For the next session (carry [".cuda-wt/x.tar.xz"] from bench/results/2026-12-06-s36/prepare.sh, ~4 min,
# timeout_s 400): on an H200 only, the deterministic digest (must be e37949b3c33931b9) and then the
# benchmark of record (SUITE=0). Refuses to bench on another card (the record is stated for the H200).
R=$PWD; B=/tmp/bx; W=/tmp/wr
rm -rf $B $W; mkdir -p $B $W; tar xJf .cuda-wt/x.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g"
echo "$g" | grep -q H200 || { echo "not an H200: no record"; exit 0; }
OUT=$W SUITE=0 bash $R/dev/record_bench.sh 2>&1 | tail -30
tar czf $OUT/record.tgz -C $W .
