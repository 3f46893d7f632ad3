#!/bin/bash
# session 25 call 3 (prepared; run in the next session after calls 1-2): the in-graph trace (LILAC_LN_TRACE
# builds) at positions 263 / 4159 / 5119 of the default, of LILAC_CUDA_GDN_ATOM=1 (the fused GDN kernel
# without its ordered tail: where do the ~2.8 µs go?) and of -DLN_PFLSU (gate/up's first routed tile).
B=/tmp/b3; mkdir -p $B; tar xJf .cuda-wt/d.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:trace:" "atom:trace:LILAC_CUDA_GDN_ATOM=1" "lsu:tracelsu:"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 120 ./lilac-$b $Q > $OUT/$n.txt 2>&1
  echo "== $n"; grep -A 11 "lean trace at position 4159" $OUT/$n.txt | head -12
done
xz -9 $OUT/trace.txt $OUT/atom.txt $OUT/lsu.txt
