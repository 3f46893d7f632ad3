#!/bin/bash
# call A (carry [".cuda-wt/x.tar.xz"]; any card: same-call ratios): COUT_PACK=2 (two copies) and
# COUT_CL=1 (the merge shared by a head's cluster), both session 32, never run, and the LA_DIAG_PART
# ceiling. Lab lattn (10 forms vs the fp64 reference), gpu_test --cout (15), A/B at 4096/1024 (3 rounds; dpart's results are wrong by design, its digest too), traces.
B=/tmp/bx; mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 60 ./lab/lattn 2>&1 | tee $OUT/lab_lattn.txt | tail -22
timeout 300 ./gpu_test --cout > $OUT/gpu_test_cout.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test_cout.txt | tail -6
V="new:lilac pk2:lilac:LILAC_CUDA_COUT_PACK=2 cl:lilac:LILAC_CUDA_COUT_CL=1 nopk:lilac:LILAC_CUDA_COUT_PACK=0 dpart:lilac-dpart" ROUNDS=3 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:lilac-trace:" "pk2:lilac-trace:LILAC_CUDA_COUT_PACK=2" "cl:lilac-trace:LILAC_CUDA_COUT_CL=1"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./$b $Q > $OUT/tr_$n.txt 2>&1
  echo "== $n"; awk '/position 4159/{f=1} f' $OUT/tr_$n.txt | grep -E "position|attn|entry" | sed -n 1,26p
done
xz -9 $OUT/*.txt 2>/dev/null
