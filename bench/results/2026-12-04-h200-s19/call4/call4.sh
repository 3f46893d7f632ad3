#!/bin/bash
# session 19 call 4: the existing switches re-measured around the new defaults (3 rounds, interleaved):
# sessions 8-17 measured each against the chain of their day; the chain has moved since
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
S=("default" "LILAC_CUDA_GDN_PRE=15" "LILAC_CUDA_GDN_PRE=9" "LILAC_CUDA_LN_PRE=2" "LILAC_CUDA_LN_PRE=0" "LILAC_CUDA_PFNEXT=1" "LILAC_CUDA_PFNEXT=2" "LILAC_CUDA_FOLD=3" "LILAC_CUDA_LN_PAD=7" "LILAC_CUDA_FD_MINPOS=128")
for r in 0 1 2; do
  for s in "${S[@]}"; do
    n=${s//=/_}
    if [ "$s" = default ]; then timeout 90 ./lilac $Q > $OUT/r${r}_$n.txt 2>&1; else env $s timeout 90 ./lilac $Q > $OUT/r${r}_$n.txt 2>&1; fi
    echo "r$r $s : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt
