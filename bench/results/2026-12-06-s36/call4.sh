#!/bin/bash
# session 36's fourth call (carry [".cuda-wt/t.tar.xz"]): the whole suite's last tests, which call 3's
# suite did not reach in its 540 s (gpu_test --tail: the 33000-token long run on the bf16 cache with
# save/load, the small reference run, device-generated weights).
B=/tmp/bt; rm -rf $B; mkdir -p $B; tar xJf .cuda-wt/t.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name --format=csv,noheader
timeout ${TT:-150} ./gpu_test --tail > $OUT/gpu_test_tail.txt 2>&1
echo "rc=$?"; grep -E "not ok|^# .* tests" $OUT/gpu_test_tail.txt | tail -8
