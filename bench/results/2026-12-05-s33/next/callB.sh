#!/bin/bash
# call B (carry [".cuda-wt/f.tar.xz"], ~6 min): the whole GPU suite (no split-K tests) with COUT_PACK=2 the
# default and the FD_PH tests; PH=1 exports LILAC_CUDA_FD_PH=1 (if call A made it the candidate default).
B=/tmp/b; if [ ! -x $B/gpu_test ]; then mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
[ "${PH:-0}" = 1 ] && export LILAC_CUDA_FD_PH=1
nvidia-smi --query-gpu=name --format=csv,noheader
GPU_TEST_NO_SK=1 timeout ${TT:-500} ./gpu_test > $OUT/gpu_test.txt 2>&1
echo "rc=$? ok: $(grep -cE '^ok' $OUT/gpu_test.txt)"; grep -E "not ok|^# .* tests" $OUT/gpu_test.txt | tail -8
xz -9 $OUT/*.txt 2>/dev/null
