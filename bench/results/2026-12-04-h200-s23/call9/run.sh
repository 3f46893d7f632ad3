#!/bin/bash
# session 23 call 9: the in-graph trace of the final tree (fb7c13c) at positions 4159 and 263, for
# the next session's map of where a decode step's time goes.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-trace $Q > $OUT/trace.txt 2>&1
grep -A 14 "lean trace at position 4159" $OUT/trace.txt
