#!/bin/bash
# call E (carry [".cuda-wt/x.tar.xz"]: lilac, lilac-trace, gpu_test, lab lattn; no fixtures): the cout
# kernel with the x_old term after the wait (LILAC_CUDA_COUT_XL=1). Lab lattn (every form against the
# fp64 reference), gpu_test --cout with XL on (cout vs the combine + out-projection), the same-call A/B
# at 4096/1024 (det digests, 3 rounds), then in-graph traces at 4K of the default and XL.
B=/tmp/bx; mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 60 ./lab/lattn 2>&1 | tee $OUT/lab_lattn.txt
LILAC_CUDA_COUT_XL=1 timeout 240 ./gpu_test --cout > $OUT/gpu_test_cout_xl.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test_cout_xl.txt | tail -6
V="new:lilac xl:lilac:LILAC_CUDA_COUT_XL=1 xl2:lilac:LILAC_CUDA_COUT_XL=1,LILAC_CUDA_ATT_COUT=2" ROUNDS=3 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:" "xl:LILAC_CUDA_COUT_XL=1"; do
  n=${v%%:*}; e=${v#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./lilac-trace $Q > $OUT/tr_$n.txt 2>&1
  echo "== $n"; awk '/position 4159/{f=1} f' $OUT/tr_$n.txt | grep -E "position|attn" | head -6
done
xz -9 $OUT/*.txt 2>/dev/null
