#!/bin/bash
# session 20 call 6 (second try; the first was taken back mid-call): the tree that lands (k_lhead at
# 768 threads, the default): digest, the full
# benchmark of record, the quick GPU tests (what the remaining device time allowed).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 90 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0 --deterministic > $OUT/det.txt 2>&1
echo "det: $(grep -o 'digest [0-9a-f]*' $OUT/det.txt | head -1)"
timeout 200 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/bench > $OUT/bench.txt 2>&1
echo "== bench"; sed -n 4,22p $OUT/bench/bench.md
timeout 100 ./gpu_session.sh test-quick > $OUT/gpu_session.txt 2>&1; grep -E "not ok|# .* tests" $OUT/gpu_test.txt | tail -5; grep -i "lm head" $OUT/gpu_test.txt
cd $OUT && tar czf all.tgz *.txt bench && rm -rf det.txt bench.txt
