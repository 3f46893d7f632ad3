#!/bin/bash
# session 32, call A (carry [".cuda-wt/x2.tar.xz"]: x + lilac-lane + lilac-tlane): session 31's call A (lab lattn,
# gpu_test --cout, A/B new / pk / pk2 / xl / fdne) plus lane (-DLA_EARLY=0: the cout kernel waits first,
# nothing before its wait) in the A/B and its trace (tlane), to tell whether the pre-wait requests hold
# the wait's release.
B=/tmp/bx; mkdir -p $B; tar xJf .cuda-wt/x2.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 60 ./lab/lattn 2>&1 | tee $OUT/lab_lattn.txt | tail -12
timeout 300 ./gpu_test --cout > $OUT/gpu_test_cout.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test_cout.txt | tail -6
V="new:lilac pk:lilac:LILAC_CUDA_COUT_PACK=1 pk2:lilac:LILAC_CUDA_COUT_PACK=1,LILAC_CUDA_ATT_COUT=2 lane:lilac-lane xl:lilac:LILAC_CUDA_COUT_XL=1 fdne:lilac-fdne" ROUNDS=3 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:lilac-trace:" "pk:lilac-trace:LILAC_CUDA_COUT_PACK=1" "tlane:lilac-tlane:"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./$b $Q > $OUT/tr_$n.txt 2>&1
  echo "== $n"; awk '/position 4159/{f=1} f' $OUT/tr_$n.txt | grep -E "position|attn|entry" | sed -n 1,30p
done
xz -9 $OUT/*.txt 2>/dev/null
