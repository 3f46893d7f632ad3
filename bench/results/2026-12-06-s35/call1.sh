#!/bin/bash
# session 35's first call (carry [".cuda-wt/x.tar.xz"], ~6 min; run with timeout_s 600):
# 1. on an H200 only: the benchmark of record (dev/record_bench.sh, SUITE=0) with COUT_R=512 the default;
# 2. any card: same-call A/B of the new default (512 W_o rows a cout block) against 256 (the old default),
#    3 rounds at 4096/1024 and 256, with the deterministic digests;
# 3. the gvt2 race (session 34): deterministic digests of lilac-gvt2 (k_lgemv triggers after its last
#    tile) with PDL off for one family of launches at a time (LILAC_CUDA_PDL_OFF, cuda_backend.cu's
#    PDLK_*), against the PDL=0 reference; COUT_R=256 so that session 34's e37949b3c33931b9 is the reference;
# 4. gpu_test --cout (the 512 / 256 / 128 switch tests) if time is left.
R=$PWD; B=/tmp/bx
if [ ! -x $B/lilac ]; then mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "gpu: $g"
if echo "$g" | grep -q H200; then
  SUITE=0 bash $R/dev/record_bench.sh 2>&1 | tail -30
  mkdir -p $OUT/rec && mv $OUT/all.tgz $OUT/gpu.txt $OUT/rec/ 2>/dev/null
fi
V="new:lilac r256:lilac:LILAC_CUDA_COUT_R=256" ROUNDS=3 DET=1 TO=60 bash $R/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0 --deterministic"
for v in "ref:lilac:LILAC_CUDA_PDL=0" "gvt2:lilac-gvt2:" "gvt2-again:lilac-gvt2:" "off1:lilac-gvt2:LILAC_CUDA_PDL_OFF=1" \
         "off2:lilac-gvt2:LILAC_CUDA_PDL_OFF=2" "off4:lilac-gvt2:LILAC_CUDA_PDL_OFF=4" "off8:lilac-gvt2:LILAC_CUDA_PDL_OFF=8" \
         "off16:lilac-gvt2:LILAC_CUDA_PDL_OFF=16"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_COUT_R=256 $e timeout 60 ./$b $Q > $OUT/det_$n.txt 2>&1
  echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"
done
timeout 200 ./gpu_test --cout > $OUT/gpu_test_cout.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test_cout.txt | tail -6
xz -9 $OUT/*.txt 2>/dev/null
