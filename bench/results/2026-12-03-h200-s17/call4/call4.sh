#!/bin/bash
# session 17 call 4: the benchmark of record (the append split on: LILAC_CUDA_FD_XS=1, the default from this session on), then GPU tests with it
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared LILAC_CUDA_FD_XS=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
mkdir -p $OUT/final
timeout 300 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/final/bench > $OUT/final/final.txt 2>&1; echo "bench rc=$?"
grep -E "len|4096/4096|mean|digest" $OUT/final/final.txt | head -20
echo "== gpu tests (FD_XS=1)"; timeout 280 ./gpu_test > $OUT/gpu_test.txt 2>&1; grep -E "^not ok|passed|failed|tests," $OUT/gpu_test.txt | tail -6
cd $OUT && tar czf all.tgz final gpu_test.txt && rm -rf final gpu_test.txt
