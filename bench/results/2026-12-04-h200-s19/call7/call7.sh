#!/bin/bash
# session 19 call 7: the join's anomaly (call 2) with stamps: [45] last arrival, [46] last spin
# exit, [47] last combine exit (trace build of experiments-fd-join.patch + the stamps), and the
# trace's entry / per-SM columns fixed for 2-D grids (flat block ids)
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
LILAC_CUDA_LN_TRACE=1 timeout 100 ./lilac-jtrace $Q > $OUT/trace_join.txt 2>&1
LILAC_CUDA_LN_TRACE=1 LILAC_CUDA_FD_JOIN=0 timeout 100 ./lilac-jtrace $Q > $OUT/trace_nojoin.txt 2>&1
for t in join nojoin; do for p in 263 4159; do echo "== $t $p"; grep -A 40 "lean trace at position $p" $OUT/trace_$t.txt | grep -E "^ +kernel|attn\.|moe.router" | head -12; done; done
cd $OUT && tar czf all.tgz *.txt && rm -f trace_*.txt
