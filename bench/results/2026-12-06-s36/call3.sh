#!/bin/bash
# session 36's third call (carry [".cuda-wt/f.tar.xz"], ~6 min): the whole GPU suite (no split-K tests)
# with the double-buffered GDN state and the eager decode graph as defaults.
B=/tmp/bf; rm -rf $B; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
nvidia-smi --query-gpu=name --format=csv,noheader
GPU_TEST_NO_SK=1 timeout ${TT:-540} ./gpu_test > $OUT/gpu_test.txt 2>&1
echo "rc=$? ok: $(grep -cE '^ok' $OUT/gpu_test.txt)"; grep -E "not ok|^# .* tests" $OUT/gpu_test.txt | tail -8
xz -9 $OUT/*.txt 2>/dev/null
