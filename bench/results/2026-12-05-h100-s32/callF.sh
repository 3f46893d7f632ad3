#!/bin/bash
# session 32, call F (carry [".cuda-wt/f.tar.xz"]; ~300 s of budget left, the H200 refused): the quick
# suite alone with COUT_PACK the default, under an inner timeout (TAP streamed into $OUT).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
nvidia-smi --query-gpu=name --format=csv,noheader
GPU_TEST_NO_SK=1 timeout ${TT:-170} ./gpu_test --quick > $OUT/gpu_test_quick.txt 2>&1
echo "rc=$? ok: $(grep -cE '^ok' $OUT/gpu_test_quick.txt)"; grep -E "not ok|^# .* tests" $OUT/gpu_test_quick.txt | tail -8; tail -1 $OUT/gpu_test_quick.txt
