#!/bin/bash
# session 29 call 8 (carry [".cuda-wt/f.tar.xz"]: HEAD with MOE_PACK=1 (where memory allows) and ATT_COUT=1
# the defaults): the same-call A/B new vs old defaults (DET=1: the digests must be equal: the pack keeps
# the bits and ATT_COUT is off under --deterministic), the benchmark of record, then the GPU suite
# without the split-K tests (GPU_TEST_NO_SK=1) in what time is left.
B=/tmp/b8; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
V="new:lilac old:lilac:LILAC_CUDA_MOE_PACK=0,LILAC_CUDA_ATT_COUT=0 cout:lilac:LILAC_CUDA_MOE_PACK=0 pack:lilac:LILAC_CUDA_ATT_COUT=0" ROUNDS=1 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
SUITE=0 bash $OLDPWD/dev/record_bench.sh
GPU_TEST_NO_SK=1 timeout ${SUITE_TO:-280} ./gpu_test > $OUT/gpu_test.txt 2>&1; echo "suite rc $?"; grep -E "not ok" $OUT/gpu_test.txt | head; tail -2 $OUT/gpu_test.txt
