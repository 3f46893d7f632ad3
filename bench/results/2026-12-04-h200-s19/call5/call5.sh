#!/bin/bash
# session 19 call 5: the MoE down's L2 prefetch of the next input projection at entry
# (LILAC_CUDA_PFNEXT=2; +2.1 tok/s at 4096/1024 in call 4) over all ten context lengths: two full
# benchmarks, PFNEXT=2 then the default, in one call; then a 3-round quick A/B
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
for v in pf2 default; do
  mkdir -p $OUT/$v
  if [ $v = pf2 ]; then P=2; else P=0; fi
  LILAC_CUDA_PFNEXT=$P timeout 240 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/$v/bench > $OUT/$v/final.txt 2>&1; echo "$v rc=$?"
  grep -E "^\| (256|4096|32768|131072|\*\*mean)|4096/4096 point" $OUT/$v/final.txt
done
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for r in 0 1 2; do for P in 2 0; do
  LILAC_CUDA_PFNEXT=$P timeout 90 ./lilac $Q > $OUT/r${r}_pf$P.txt 2>&1
  echo "r$r pf$P : $(grep '4096/1024' $OUT/r${r}_pf$P.txt | head -1 | grep -o 'decode [0-9.]*')"
done; done
cd $OUT && tar czf all.tgz *.txt pf2 default && rm -rf r*_*.txt pf2 default
