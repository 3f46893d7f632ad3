#!/bin/bash
# call A (carry [".cuda-wt/x.tar.xz"]; any card: same-call ratios): the packed cout slices
# (LILAC_CUDA_COUT_PACK=1, session 31, never run). Lab lattn (six forms against the fp64 reference,
# the pack built over garbage), gpu_test --cout (11 tests: XL and PACK switch tests included), the A/B
# at 4096/1024 with det digests (3 rounds; also flash decoding without its pre-wait loads, lilac-fdne), then traces at 4K: the default and PACK, with the first
# 20 launches' timeline and cout's stamp 40 (the end of its pre-wait work, negative = before the wait).
B=/tmp/bx; mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 60 ./lab/lattn 2>&1 | tee $OUT/lab_lattn.txt
timeout 300 ./gpu_test --cout > $OUT/gpu_test_cout.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test_cout.txt | tail -6
V="new:lilac pk:lilac:LILAC_CUDA_COUT_PACK=1 pk2:lilac:LILAC_CUDA_COUT_PACK=1,LILAC_CUDA_ATT_COUT=2 xl:lilac:LILAC_CUDA_COUT_XL=1 fdne:lilac-fdne" ROUNDS=3 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:" "pk:LILAC_CUDA_COUT_PACK=1"; do
  n=${v%%:*}; e=${v#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./lilac-trace $Q > $OUT/tr_$n.txt 2>&1
  echo "== $n"; awk '/position 4159/{f=1} f' $OUT/tr_$n.txt | grep -E "position|attn|entry" | sed -n 1,30p
done
xz -9 $OUT/*.txt 2>/dev/null
