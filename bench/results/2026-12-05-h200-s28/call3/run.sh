#!/bin/bash
# session 28 call 3 (carry [".cuda-wt/c2.tar.xz"]; reuses /tmp/b when the machine is still warm from
# call 1): the whole GPU suite on HEAD (the split-K and ATT_COUT tests included; timeout 480 s).
B=/tmp/b
[ -x $B/gpu_test ] || { mkdir -p $B; tar xJf .cuda-wt/c2.tar.xz -C $B; }
cd $B
export LD_LIBRARY_PATH=$B/lib
./gpu_session.sh test > $OUT/gpu_session.txt 2>&1
grep -E "not ok|# .* tests" $OUT/gpu_test.txt | tail -12
xz -9 $OUT/*.txt 2>/dev/null; ls -la $OUT
