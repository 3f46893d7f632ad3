#!/bin/bash
# session 32, call C (carry [".cuda-wt/f.tar.xz"]): the whole GPU suite (test-nosk) with COUT_PACK the default.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name --format=csv
./gpu_session.sh test-nosk > $OUT/gpu_session.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test.txt | tail -8
xz -9 $OUT/*.txt 2>/dev/null
