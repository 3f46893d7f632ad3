#!/bin/bash
# call A (carry [".cuda-wt/x.tar.xz"]; any card: same-call ratios):
# 1. lab lattn (12 forms; pk2h / pk2h-v4 = FP16 partials, new) and gpu_test --cout (~21 tests);
# 2. the race question of session 33 (-DLN_GEMV_TRIG=2 changed the deterministic digest): det digests
#    with and without PDL overlap (LILAC_CUDA_PDL=0), gvt2 twice;
# 3. A/B at 4096/1024, 3 rounds: new (COUT_PACK=2, the default since session 33) / ph (LILAC_CUDA_FD_PH=1) /
#    r512 (LILAC_CUDA_COUT_R=512: 4 cout blocks a head) / both / pk1 (session 32's default); traces.
# ~7-8 min: run with timeout_s 600.
B=/tmp/bx; mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 90 ./lab/lattn 2>&1 | tee $OUT/lab_lattn.txt | grep -E "OK|FAIL|per launch" | cut -c1-70
timeout 300 ./gpu_test --cout > $OUT/gpu_test_cout.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test_cout.txt | tail -6
timeout 150 ./gpu_test --steps > $OUT/gpu_test_steps.txt 2>&1  # its last test: deterministic decode with PDL on vs off, the same bits
grep -E "not ok|^# .* tests" $OUT/gpu_test_steps.txt | tail -4
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0 --deterministic"
for v in "new:lilac:" "new-pdl0:lilac:LILAC_CUDA_PDL=0" "gvt2:lilac-gvt2:" "gvt2-again:lilac-gvt2:" "gvt2-pdl0:lilac-gvt2:LILAC_CUDA_PDL=0"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env $e timeout 90 ./$b $Q > $OUT/det_$n.txt 2>&1
  echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"
done
V="new:lilac ph:lilac:LILAC_CUDA_FD_PH=1 r512:lilac:LILAC_CUDA_COUT_R=512 phr512:lilac:LILAC_CUDA_FD_PH=1,LILAC_CUDA_COUT_R=512" ROUNDS=2 DET=0 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
xz -9 $OUT/*.txt 2>/dev/null
