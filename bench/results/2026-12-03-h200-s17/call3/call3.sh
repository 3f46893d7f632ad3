#!/bin/bash
# session 17 call 3: fd prep with the K row in the q loop (lilac) vs the old prep (lilac-fdold); the append split
# (LILAC_CUDA_FD_XS=1); FD_MINPOS 128/256; --deterministic digest; GPU tests of the new code
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for r in 0 1 2; do
  for v in lilac lilac-fdold xs mp128 mp256; do
    bin=lilac; unset LILAC_CUDA_FD_MINPOS LILAC_CUDA_FD_XS
    case $v in mp128) export LILAC_CUDA_FD_MINPOS=128;; mp256) export LILAC_CUDA_FD_MINPOS=256;; xs) export LILAC_CUDA_FD_XS=1;; *) bin=$v;; esac
    [ $r = 2 ] && [ ${v:0:2} = mp ] && continue
    timeout 90 ./$bin $Q > $OUT/r${r}_$v.txt 2>&1
    echo "r$r $v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1) | $(grep -E 'len +(256|4096)' $OUT/r${r}_$v.txt | sed 's/.*decode/decode/' | tr '\n' ' ')"
  done
done
unset LILAC_CUDA_FD_MINPOS LILAC_CUDA_FD_XS
timeout 90 ./lilac $Q --deterministic > $OUT/det.txt 2>&1; echo "det lilac: $(grep -o 'digest [0-9a-f]*' $OUT/det.txt | head -1)"
echo "== gpu tests"; timeout 330 ./gpu_test > $OUT/gpu_test.txt 2>&1; grep -E "^not ok|passed|failed" $OUT/gpu_test.txt | tail -8
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det.txt gpu_test.txt
