#!/bin/bash
# call C (carry [".cuda-wt/f.tar.xz"]): the whole GPU suite (test-nosk, ~8 min on an H100); only after a
# default changed (session 31 ran it on the current defaults: 113/113).
B=/tmp/b; if [ ! -x $B/gpu_test ]; then mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
./gpu_session.sh test-nosk > $OUT/gpu_session.txt 2>&1
grep -E "not ok|^# .* tests" $OUT/gpu_test.txt | tail -8
