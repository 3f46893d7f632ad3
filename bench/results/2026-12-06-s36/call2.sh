#!/bin/bash
# session 36's second call (the SBAR=false instances: no spills; the decode graph built during the prefill, EAGER_GRAPH) (carry [".cuda-wt/x.tar.xz"], ~7 min; timeout_s 600): the double-buffered GDN
# state (LILAC_CUDA_GDN_DB=1, the new default) against the state in place with the counter barrier
# (GDN_DB=0, session 35's default) and against the racy kernel without any barrier (nobar, GDN_DB=0).
# 1. deterministic digests: all must be e37949b3c33931b9 (new, new without PDL, new with 20 us stagger,
#    DB=0, DB=0 with stagger, nobar);
# 2. lab lgdn (its own kernel copy: in place, OK expected);
# 3. A/B, 3 rounds interleaved: new / db0 / nobar;
# 4. on an H200 only, if the digests held: the benchmark of record (SUITE=0).
# Results go into one tgz, rewritten after each part (a call returns at most 8 files).
R=$PWD; B=/tmp/bx; W=/tmp/w1
rm -rf $B $W; mkdir -p $B $W; tar xJf .cuda-wt/x.tar.xz -C $B; cd $B  # always: a warm machine holds older files
export LD_LIBRARY_PATH=$B/lib
pk() { tar czf $OUT/call2.tgz -C $W .; }
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g" | tee $W/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0 --deterministic"
bad=0
for v in "new:lilac:" "new-stag:lilac:LILAC_CUDA_GDN_STAGGER=20000" "db0:lilac:LILAC_CUDA_GDN_DB=0" \
         "nobar-db0:lilac-nobar:LILAC_CUDA_GDN_DB=0" "eager0:lilac:LILAC_CUDA_EAGER_GRAPH=0"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env ${e//,/ } timeout 60 ./$b $Q > $W/det_$n.txt 2>&1
  d=$(grep -o 'digest [0-9a-f]*' $W/det_$n.txt | head -1); echo "det $n: $d"
  [ "$n" != nobar-db0 ] && [ "$d" != "digest e37949b3c33931b9" ] && bad=1
done
grep -h "decode graphs" $W/det_new.txt $W/det_eager0.txt; pk
timeout 60 ./lab/lgdn > $W/lab_lgdn.txt 2>&1; grep -E "OK|FAIL|refused|error" $W/lab_lgdn.txt | cut -c1-60,130-160 | head -4
V="new:lilac db0:lilac:LILAC_CUDA_GDN_DB=0 nobar:lilac-nobar:LILAC_CUDA_GDN_DB=0 eager0:lilac:LILAC_CUDA_EAGER_GRAPH=0" ROUNDS=3 DET=0 TO=60 OUT=$W bash $R/dev/ab_bench.sh
mv $W/all.tgz $W/ab.tgz; pk
timeout 300 ./gpu_test --steps > $W/gpu_test_steps.txt 2>&1
grep -E "not ok|^# .* tests" $W/gpu_test_steps.txt | tail -6; pk
if echo "$g" | grep -q H200 && [ $bad = 0 ]; then
  mkdir -p $W/rec; OUT=$W/rec SUITE=0 bash $R/dev/record_bench.sh 2>&1 | tail -30
  pk
fi
echo "bad=$bad"
