#!/bin/bash
# session 22 call 8: the router fold in attention layers, second form (LILAC_CUDA_FOLD=3): the
# out-projection's blocks compute both terms of their two logit rows (the x_old term before their
# wait, from a copy of x that the qkv projection's block 0 writes; B . att after their prologue);
# the combine is the plain one. Digests, 2 A/B rounds vs FOLD=1; the GPU suite with FOLD=3 only if
# it wins at 4096/1024 without losing at 256.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in 1 3; do LILAC_CUDA_FOLD=$v timeout 90 ./lilac $Q --deterministic > $OUT/det_$v.txt 2>&1; echo "det fold=$v: $(grep -o 'digest [0-9a-f]*' $OUT/det_$v.txt | head -1)"; done
for r in 0 1; do
  for v in 1 3; do
    LILAC_CUDA_FOLD=$v timeout 90 ./lilac $Q > $OUT/r${r}_$v.txt 2>&1
    a=$(grep '4096/1024' $OUT/r${r}_$v.txt | head -1 | grep -o 'decode [0-9.]*' | awk '{print $2}')
    s=$(grep -E 'len +256' $OUT/r${r}_$v.txt | grep -oE 'decode +[0-9.]+' | head -1 | awk '{print $2}')
    echo "r$r fold=$v : $a | 256: $s"; echo "$v $a $s" >> $OUT/ab.txt
  done
done
win=$(awk '{n[$1]++; a[$1]+=$2; s[$1]+=$3} END {print (a[3]/n[3] > a[1]/n[1] + 1 && s[3]/n[3] > s[1]/n[1] - 2) ? 1 : 0}' $OUT/ab.txt)
echo "win=$win"
if [ "$win" = 1 ]; then LILAC_CUDA_FOLD=3 timeout 200 ./gpu_session.sh test > $OUT/gpu_session.txt 2>&1; grep -E "not ok|# .* tests" $OUT/gpu_test.txt | tail -5; fi
cd $OUT && tar czf all.tgz *.txt && rm -rf r*_*.txt det_*.txt
