#!/bin/bash
# session 21 call 11: the cost of a cluster exchange for a fused-GDN step split by value columns:
# lab cjoin4 (32 clusters of 4 one-per-SM blocks, 33 values each, 64 KB shared memory) next to cjoin
# (16 clusters of 8, 97 values, 120 KB). Mode "cluster join" minus "producer alone" is the exchange.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
for k in cjoin4 cjoin; do echo "== $k"; timeout 60 ./lab/$k 2>&1 | tee $OUT/lab_$k.txt; done
