#!/bin/bash
# call A (carry [".cuda-wt/f.tar.xz"]; the record wants an H200, the rest runs anywhere): session 30's
# LILAC_CUDA_GDN_IN=1 (never run before: the lab lgdn_in first, the kernel against the two launches it
# replaces, bit for bit where it should be; then its GPU tests, under timeouts: a wrong cluster barrier
# would hang), then the same-call A/B of the default against GDN_IN with ring depths 3 (its default),
# 2 and 6, 2 rounds, then the record of the default without the suite.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
timeout 120 ./lab/lgdn_in 2>&1 | tee $OUT/lab_lgdn_in.txt
./gpu_session.sh test-gdnin > $OUT/gpu_session_gdnin.txt 2>&1
echo "gdnin: $(grep -E '^# .* tests' $OUT/gpu_test_gdnin.txt || echo 'no summary (hung or crashed)')"
grep -E "not ok" $OUT/gpu_test_gdnin.txt | head -8
V="new:lilac gin:lilac:LILAC_CUDA_GDN_IN=1 gin2:lilac:LILAC_CUDA_GDN_IN=1,LILAC_CUDA_GDN_IN_NST=2 gin6:lilac:LILAC_CUDA_GDN_IN=1,LILAC_CUDA_GDN_IN_NST=6" ROUNDS=2 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
SUITE=0 bash $OLDPWD/dev/record_bench.sh
