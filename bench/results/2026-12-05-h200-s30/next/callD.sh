#!/bin/bash
# call D (carry [".cuda-wt/t.tar.xz"]): the in-graph trace (LILAC_LN_TRACE build) of the default and of
# GDN_IN=1 at 4K: where the fused GDN launch's time goes now (stamps 40: x̂ ready, 46: the k-head's
# exchange done; then the step as before), and what the next kernel's entry looks like beside it.
B=/tmp/bt; mkdir -p $B; tar xJf .cuda-wt/t.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:" "gin:LILAC_CUDA_GDN_IN=1"; do
  n=${v%%:*}; e=${v#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./lilac-trace $Q > $OUT/$n.txt 2>&1
  echo "== $n"; grep -A 30 "lean trace at position 4159" $OUT/$n.txt | head -31
done
xz -9 $OUT/*.txt 2>/dev/null; ls -la $OUT
