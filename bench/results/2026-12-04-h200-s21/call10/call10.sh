#!/bin/bash
# session 21 call 10: what the fused GDN kernel requests before its wait, now that the window is known
# to be partly intake-bound (call 9): LILAC_CUDA_GDN_PRE 11 (default: W_out slice + state + fold
# slice) vs 10 (the W_out slice after the wait), 3 (the fold slice after), 2 (state only before).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in 11 10; do LILAC_CUDA_GDN_PRE=$v timeout 90 ./lilac $Q --deterministic > $OUT/det_$v.txt 2>&1; echo "det pre=$v: $(grep -o 'digest [0-9a-f]*' $OUT/det_$v.txt | head -1)"; done
for r in 0 1; do
  for v in 11 10 3 2; do
    LILAC_CUDA_GDN_PRE=$v timeout 90 ./lilac $Q > $OUT/r${r}_$v.txt 2>&1
    echo "r$r pre=$v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$v.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
