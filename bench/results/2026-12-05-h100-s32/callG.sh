#!/bin/bash
# session 32, call G (carry [".cuda-wt/g.tar.xz"]: lilac + gpu_test + lab lattn + fixtures, built with
# COUT_PACK=2 written; ~280 s of budget left): the lab's 8 forms (pk2 new), the A/B default vs pk2
# (2 rounds, no digests), then the quick suite under an inner timeout, TAP streamed into $OUT.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/g.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
timeout 40 ./lab/lattn 2>&1 | tee $OUT/lab_lattn.txt | grep -E "OK|FAIL|us per" | sed -n 9,16p
V="new:lilac pk2:lilac:LILAC_CUDA_COUT_PACK=2" ROUNDS=2 DET=0 TO=40 bash $OLDPWD/dev/ab_bench.sh
GPU_TEST_NO_SK=1 timeout ${TT:-100} ./gpu_test --quick > $OUT/gpu_test_quick.txt 2>&1
echo "rc=$? ok: $(grep -cE '^ok' $OUT/gpu_test_quick.txt)"; grep -E "not ok|^# .* tests" $OUT/gpu_test_quick.txt | tail -8; tail -1 $OUT/gpu_test_quick.txt
