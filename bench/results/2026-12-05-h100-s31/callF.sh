#!/bin/bash
# call F (carry [".cuda-wt/y.tar.xz"]: lilac + lilac-trace): flash decoding at the 100 % shared-memory
# split (LILAC_CUDA_FD_CARVE=1, the lean kernels' split) against the default, A/B at 4096/1024 with
# det digests (3 rounds; carve + COUT_XL too), then in-graph traces at 4K of the default and carve.
B=/tmp/by; mkdir -p $B; tar xJf .cuda-wt/y.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
V="new:lilac carve:lilac:LILAC_CUDA_FD_CARVE=1 cxl:lilac:LILAC_CUDA_FD_CARVE=1,LILAC_CUDA_COUT_XL=1" ROUNDS=3 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:" "carve:LILAC_CUDA_FD_CARVE=1"; do
  n=${v%%:*}; e=${v#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./lilac-trace $Q > $OUT/tr_$n.txt 2>&1
  echo "== $n"; awk '/position 4159/{f=1} f' $OUT/tr_$n.txt | grep -E "position|attn|  [a-z]" | head -12
done
xz -9 $OUT/*.txt 2>/dev/null
