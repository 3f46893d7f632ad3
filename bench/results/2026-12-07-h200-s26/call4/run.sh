#!/bin/bash
# session 26 call 4 (carry [".cuda-wt/d.tar.xz"]): the in-graph trace (LILAC_LN_TRACE builds) at positions
# 263 / 4159 / 5119 of the default, the split-K MoE (trace is built with SK_REGS=80, which changes no
# other kernel), GDN_ATOM=1 and -DLN_PFLSU.
B=/tmp/b3; mkdir -p $B; tar xJf .cuda-wt/d.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:trace:" "sk:trace:LILAC_CUDA_MOE_SK=1" "atom:trace:LILAC_CUDA_GDN_ATOM=1" "lsu:tracelsu:"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./lilac-$b $Q > $OUT/$n.txt 2>&1
  echo "== $n"; grep -A 11 "lean trace at position 4159" $OUT/$n.txt | head -12
done
xz -9 $OUT/*.txt 2>/dev/null; ls -la $OUT
