#!/bin/bash
# call B (carry [".cuda-wt/f.tar.xz"]): the whole GPU suite (test-nosk) with COUT_PACK the default (never
# run in full with it: session 32's attempt lost its machine). The TAP lines stream into $OUT.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
nvidia-smi --query-gpu=name --format=csv,noheader
GPU_TEST_NO_SK=1 timeout ${TT:-540} ./gpu_test > $OUT/gpu_test.txt 2>&1
echo "rc=$? ok: $(grep -cE '^ok' $OUT/gpu_test.txt)"; grep -E "not ok|^# .* tests" $OUT/gpu_test.txt | tail -8; tail -1 $OUT/gpu_test.txt
xz -9 $OUT/*.txt 2>/dev/null
