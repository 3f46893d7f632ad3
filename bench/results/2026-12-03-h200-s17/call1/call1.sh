#!/bin/bash
# session 17 call 1: tlb lab; LN_WARM variants, 512-thread MoE down, attention fold: A/B at 4096/1024, interleaved
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv | tee $OUT/gpu.txt
echo "== tlb"; timeout 120 ./lab/tlb 2>&1 | tee $OUT/tlb.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for r in 0 1; do
  for v in lilac lilac-w1 lilac-w5 lilac-w8 lilac-w13 lilac-w2 lilac-d512 lilac-d512w13 fold3; do
    if [ $v = fold3 ]; then bin=lilac; export LILAC_CUDA_FOLD=3; else bin=$v; unset LILAC_CUDA_FOLD; fi
    timeout 90 ./$bin $Q > $OUT/r${r}_$v.txt 2>&1
    echo "r$r $v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1) | $(grep 'len   4096' $OUT/r${r}_$v.txt | head -1 | sed 's/.*decode/decode/')"
  done
done
unset LILAC_CUDA_FOLD
for v in lilac lilac-d512; do timeout 90 ./$v $Q --deterministic > $OUT/det_$v.txt 2>&1; echo "det $v: $(grep -o 'digest [0-9a-f]*' $OUT/det_$v.txt | head -1)"; done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
