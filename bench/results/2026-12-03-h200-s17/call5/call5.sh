#!/bin/bash
# session 17 call 5: pad the attention out-projection's (2) and the router's (4) shared memory so two blocks of one launch never share an SM
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for r in 0 1 2; do
  for p in 0 2 6; do
    LILAC_CUDA_LN_PAD=$p timeout 90 ./lilac $Q > $OUT/r${r}_pad$p.txt 2>&1
    echo "r$r pad$p : $(grep '4096/1024' $OUT/r${r}_pad$p.txt | head -1) | $(grep -E 'len +(256|4096)' $OUT/r${r}_pad$p.txt | sed 's/.*decode/decode/' | tr '\n' ' ')"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt
