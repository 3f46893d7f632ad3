#!/bin/bash
# session 35's fifth call (carry [".cuda-wt/x.tar.xz"], ~2.5 min): counters v3 (a relaxed add; only the
# writing warps wait, no block barrier). On an H200 the benchmark of record first; then the digests
# (new, the stagger with counters and with clusters, nobar), lab lgdn, A/B new vs nobar (3 rounds),
# gpu_test --steps.
R=$PWD; B=/tmp/bx
rm -rf $B; mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g"
if echo "$g" | grep -q H200; then
  SUITE=0 bash $R/dev/record_bench.sh 2>&1 | tail -24
  mkdir -p $OUT/rec && mv $OUT/all.tgz $OUT/gpu.txt $OUT/rec/ 2>/dev/null
fi
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0 --deterministic"
for v in "new:lilac:" "stag:lilac:LILAC_CUDA_GDN_STAGGER=20000" "stag-hc0:lilac:LILAC_CUDA_GDN_STAGGER=20000,LILAC_CUDA_GDN_HC=0" \
         "nobar:lilac-nobar:"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env ${e//,/ } timeout 60 ./$b $Q > $OUT/det_$n.txt 2>&1
  echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"
done
timeout 60 ./lab/lgdn 2>&1 | tee $OUT/lab_lgdn.txt | grep -E "OK|FAIL|refused|error" | cut -c1-60,130-160 | head -6
V="new:lilac nobar:lilac-nobar" ROUNDS=3 DET=0 TO=60 bash $R/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
timeout 200 ./gpu_test --steps > $OUT/gpu_test_steps.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test_steps.txt | tail -4
xz -9 $OUT/*.txt 2>/dev/null
T=$(mktemp -d); mv $OUT/* $T/; tar czf $OUT/call5.tgz -C $T .
