#!/bin/bash
# session 24 call 9: the in-graph trace of the final tree (LN_EVF on, lilac-trace) and of the same with
# -DLN_EVF=0 (lilac-tracen), positions 263 / 4159 / 5119, for the next session's map: where LN_EVF's
# 2.9 tok/s went.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for t in trace tracen; do
  LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-$t $Q > $OUT/$t.txt 2>&1
  echo "== $t"; grep -A 11 "lean trace at position 4159" $OUT/$t.txt | head -12
done
xz -9 $OUT/trace.txt $OUT/tracen.txt
