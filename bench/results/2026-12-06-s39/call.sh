#!/bin/bash
# Session 39's adaptive call (session 38's, the suite's main part without --late) (carry [".cuda-wt/x.tar.xz"]; timeout_s 420-480). Bundle: `
# LAB="gdn_chunk" dev/gpu_bundle.sh && mv .cuda-wt/b.tar.xz .cuda-wt/x.tar.xz` after the build (with fixtures).
# On an H200: the deterministic digest (must be 4e7b33960f3925bd since session 39; a0f5c154b4eafd0d with LILAC_CUDA_GDN_PREP=ti, session 38), then the benchmark of record
# (session 37's call.sh, the same bundle layout). Then, on any card, each only if asked:
#   LAB=1  the GDN chunk lab (fp32 scan vs the 3xTF32 tensor-core scans, errors vs fp64, times at T=4096)
#   GT=a,b gpu_test a, then gpu_test b (e.g. --scan,--tail; main: the suite without its sk and steps parts)
#   NCU="regex:K ..." ncu --set full of the lab's first launch of each kernel K (its timings only)
#   V=...  dev/ab_bench.sh of $V (quick bench; its raw outputs carry the prefill figures too)
# Everything goes into $OUT/s39.tgz.
R=$PWD; B=/tmp/bx; W=/tmp/w39
rm -rf $B $W; mkdir -p $B $W; tar xJf ${BX:-.cuda-wt/x.tar.xz} -C $B
export LD_LIBRARY_PATH=$B/lib
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g" | tee $W/gpu.txt
pk() { tar czf $OUT/s39.tgz -C $W .; }
if echo "$g" | grep -q H200; then  # the record first; then LAB as asked (GT / V only with GT200=1 / V200=1: the call's time)
  V=none bash $R/bench/results/2026-12-06-s37/call.sh; cp $OUT/s37.tgz $W/ 2>/dev/null; pk
  export LD_LIBRARY_PATH=$B/lib
  [ -z "$GT200" ] && GT=
  [ -z "$V200" ] && V=
fi
cd $B
[ -n "$LAB" ] && timeout 120 ./lab/gdn_chunk 2>&1 | tee $W/lab_gdn_chunk.txt | tail -${LABTAIL:-8}
if [ -n "$NCU" ]; then  # NCU="regex:k_gdn_chunk_prep regex:scan_tc": one ncu --set full report each, on the lab's timings
  N=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for k in $NCU; do
    GDN_LAB_TIME_ONLY=1 timeout 150 $N --clock-control none -k "$k" --launch-count 1 --set full ./lab/gdn_chunk > $W/ncu_${k#regex:}.txt 2>&1
    echo "ncu $k rc=$?"; grep -E "Duration|Registers Per|Achieved Occupancy|Warp Cycles Per Issued|Compute \(SM\) Throughput|Memory Throughput|Stall" $W/ncu_${k#regex:}.txt | head -12
  done
fi
for a in ${GT//,/ }; do  # GT="--fixtures,--tail": one gpu_test run each
  if [ "$a" = main ]; then  # the suite without the split-K and steps parts (README's first half)
    GPU_TEST_NO_SK=1 GPU_TEST_NO_STEPS=1 GPU_TEST_NO_LATE=1 LILAC_SHARED=$B/shared timeout ${GTTO:-200} ./gpu_test > $W/gpu_test$a.txt 2>&1
  else LILAC_SHARED=$B/shared timeout ${GTTO:-200} ./gpu_test $a > $W/gpu_test$a.txt 2>&1; fi
  echo "gpu_test $a rc=$?"
  grep -E "^not ok|^# " $W/gpu_test$a.txt | tail -20
done
if [ -n "$V" ] && [ "$V" != none ]; then
  V="$V" ROUNDS=${ROUNDS:-3} DET=${DET:-0} TO=60 OUT=$W bash $R/dev/ab_bench.sh
  mkdir -p $W/raw && tar xzf $W/all.tgz -C $W/raw && grep -H "len   4096" $W/raw/*.txt | sed 's/.*raw\///' | cut -c1-120
fi
pk
