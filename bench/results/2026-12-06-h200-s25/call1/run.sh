#!/bin/bash
# session 25 call 1: HEAD 15a05ee (LN_GU_REGS=56, landed last session after one A/B): digest, the full
# benchmark of record, the full GPU suite.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/c.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
timeout 90 ./lilac $Q --deterministic > $OUT/det.txt 2>&1
echo "det: $(grep -o 'digest [0-9a-f]*' $OUT/det.txt | head -1)"
timeout 200 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/bench > $OUT/bench.txt 2>&1
echo "== bench"; sed -n 4,24p $OUT/bench/bench.md
timeout 300 ./gpu_session.sh test > $OUT/gpu_session.txt 2>&1; grep -E "not ok|# .* tests" $OUT/gpu_test.txt | tail -5
cd $OUT && tar czf all.tgz *.txt bench && rm -rf det.txt bench.txt
