#!/bin/bash
# session 17 call 2: down residual before the wait (XPRE), gate/up weights block (WB): A/B; traces default and 512-thread down; ncu?
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
which ncu nsys; ls /usr/local/cuda/bin 2>/dev/null | tr '\n' ' '; echo
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for r in 0 1 2; do
  for v in lilac lilac-old lilac-xpre0 lilac-wb0; do
    timeout 90 ./$v $Q > $OUT/r${r}_$v.txt 2>&1
    echo "r$r $v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1) | $(grep 'len   4096' $OUT/r${r}_$v.txt | head -1 | sed 's/.*decode/decode/')"
  done
done
timeout 90 ./lilac $Q --deterministic > $OUT/det.txt 2>&1; echo "det lilac: $(grep -o 'digest [0-9a-f]*' $OUT/det.txt | head -1)"
for v in trace traced512; do LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-$v $Q > $OUT/$v.txt 2>&1; echo "$v: $(grep '4096/1024' $OUT/$v.txt)"; done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det.txt trace*.txt
