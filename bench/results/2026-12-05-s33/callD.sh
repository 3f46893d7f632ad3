#!/bin/bash
# session 33 call D (carry [".cuda-wt/f.tar.xz"]): COUT_PACK=2 (won call A on an H100: 645.2 vs 643.4)
# exported = the code path of the new default: the benchmark of record, then the whole GPU suite under it.
B=/tmp/b; if [ ! -x $B/gpu_test ]; then mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared LILAC_CUDA_COUT_PACK=${PK:-2}
SUITE=0 bash $OLDPWD/dev/record_bench.sh
GPU_TEST_NO_SK=1 timeout ${TT:-380} ./gpu_test > $OUT/gpu_test.txt 2>&1
echo "rc=$? ok: $(grep -cE '^ok' $OUT/gpu_test.txt)"; grep -E "not ok|^# .* tests" $OUT/gpu_test.txt | tail -8
xz -9 $OUT/*.txt 2>/dev/null
