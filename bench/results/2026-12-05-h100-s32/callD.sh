#!/bin/bash
# session 32, call D (carry [".cuda-wt/f.tar.xz"]): call C's machine stopped answering mid-suite (619 s of
# budget lost, nothing back); with 588 s left, the quick suite (all tests, shorter contexts) under an
# inner timeout, its TAP lines streamed into $OUT so a partial run still reports.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
nvidia-smi --query-gpu=name --format=csv,noheader
GPU_TEST_NO_SK=1 timeout 330 ./gpu_test --quick > $OUT/gpu_test_quick.txt 2>&1
echo "rc=$?"
grep -cE "^ok" $OUT/gpu_test_quick.txt; grep -E "not ok|^# .* tests" $OUT/gpu_test_quick.txt | tail -8; tail -2 $OUT/gpu_test_quick.txt
