#!/bin/bash
# session 32, call E (carry [".cuda-wt/f.tar.xz"]; ~400 s of budget left): the benchmark of record with
# the defaults (COUT_PACK on), then the quick suite under an inner timeout (TAP streamed into $OUT).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
SUITE=0 bash $OLDPWD/dev/record_bench.sh
mkdir -p $OUT/rec && mv $OUT/all.tgz $OUT/bench $OUT/rec/ 2>/dev/null
GPU_TEST_NO_SK=1 timeout ${TT:-200} ./gpu_test --quick > $OUT/gpu_test_quick.txt 2>&1
echo "rc=$? ok: $(grep -cE '^ok' $OUT/gpu_test_quick.txt)"; grep -E "not ok|^# .* tests" $OUT/gpu_test_quick.txt | tail -8; tail -1 $OUT/gpu_test_quick.txt
