#!/bin/bash
# session 35's second call (carry [".cuda-wt/x.tar.xz"], ~6-7 min; timeout_s 600): the GDN state barrier.
# 1. on an H200 only: the benchmark of record (SUITE=0) with the barrier and COUT_R=512 the defaults;
# 2. deterministic digests: lilac with and without PDL, gvt2 (the race's timing) three times with the
#    barrier, gvt2nb (no barrier) twice: the barrier is the fix if gvt2 always gives the PDL=0 digest
#    and gvt2nb does not; stag / stag-nobar: every GDN block but part 0 entering 20 us late (the new
#    gpu_test --steps check) must keep the digest with the barrier and move it without;
# 3. lab lgdn (the fused GDN launch, now clusters of P, against the two kernels) and lab lattn;
# 4. A/B, 3 rounds: new (barrier) vs nobar (-DLG_STATE_BAR=0): the barrier's cost;
# 5. gpu_test --steps (PDL on vs off same bits, multi-step graphs).
R=$PWD; B=/tmp/bx
if [ ! -x $B/lilac-gvt2nb ]; then rm -rf $B; mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g"
if echo "$g" | grep -q H200; then
  SUITE=0 bash $R/dev/record_bench.sh 2>&1 | tail -30
  mkdir -p $OUT/rec && mv $OUT/all.tgz $OUT/gpu.txt $OUT/rec/ 2>/dev/null
fi
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0 --deterministic"
for v in "new:lilac:" "new-pdl0:lilac:LILAC_CUDA_PDL=0" "gvt2:lilac-gvt2:" "gvt2-b:lilac-gvt2:" "gvt2-c:lilac-gvt2:" \
         "gvt2nb:lilac-gvt2nb:" "gvt2nb-b:lilac-gvt2nb:" "stag:lilac:LILAC_CUDA_GDN_STAGGER=20000" \
         "stag-nobar:lilac-nobar:LILAC_CUDA_GDN_STAGGER=20000" "nobar:lilac-nobar:"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env $e timeout 60 ./$b $Q > $OUT/det_$n.txt 2>&1
  echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"
done
timeout 60 ./lab/lgdn 2>&1 | tee $OUT/lab_lgdn.txt | grep -E "OK|FAIL|refused|error|us" | cut -c1-90 | head -12
timeout 60 ./lab/lattn 2>&1 > $OUT/lab_lattn.txt; echo "lattn: $(grep -c OK $OUT/lab_lattn.txt) OK, $(grep -c FAIL $OUT/lab_lattn.txt) FAIL"
V="new:lilac nobar:lilac-nobar" ROUNDS=3 DET=0 TO=60 bash $R/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
timeout 150 ./gpu_test --steps > $OUT/gpu_test_steps.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test_steps.txt | tail -4
xz -9 $OUT/*.txt 2>/dev/null
