#!/bin/bash
# call G (carry [".cuda-wt/z.tar.xz"]): traces at 4K with the timeline of the first 20 launches (block 0's
# and the last block's entry): where the cout kernel's ~6 µs gap after flash decoding sits; ATT_COUT=0 beside.
B=/tmp/bz; mkdir -p $B; tar xJf .cuda-wt/z.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in ${VS:-"trace:" "c0:LILAC_CUDA_ATT_COUT=0"}; do
  n=${v%%:*}; e=${v#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./lilac-trace $Q > $OUT/tr_$n.txt 2>&1
  echo "== $n"; awk '/position 4159/{f=1} f' $OUT/tr_$n.txt | grep -E "entry|cout" | head -24
done
xz -9 $OUT/*.txt 2>/dev/null
