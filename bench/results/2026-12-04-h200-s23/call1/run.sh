#!/bin/bash
# session 23 call 1: LILAC_CUDA_FOLD=3 (the router fold in attention layers by the out-projection's
# blocks) against the default FOLD=1: digests, 2 quick A/B rounds, the full benchmark and the full
# GPU suite with FOLD=3 (session 22 ran only 56 of 75 tests with it).
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
    echo "r$r fold=$v : $a | 256: $s"
  done
done
LILAC_CUDA_FOLD=3 timeout 200 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/bench > $OUT/bench.txt 2>&1
echo "== bench fold=3"; sed -n 4,24p $OUT/bench/bench.md
LILAC_CUDA_FOLD=3 timeout 300 ./gpu_session.sh test > $OUT/gpu_session.txt 2>&1; grep -E "not ok|# .* tests" $OUT/gpu_test.txt | tail -5
cd $OUT && tar czf all.tgz *.txt bench && rm -rf r*_*.txt det_*.txt bench.txt
