#!/bin/bash
# session 27 call 1 (carry [".cuda-wt/c2.tar.xz"]: HEAD with LILAC_CUDA_GDN_ATOM=1 the default):
# the same-call A/B of the GDN fold's reductions, 3 rounds: atom0 = the ordered tail (the old
# default), atom1 = fp32 atomics (the new default), atom2 = the residual rows four per
# red.global.add.v4.f32; then the benchmark of record (digest, full bench, split-K tests, GPU suite).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/c2.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
V="atom0:lilac:LILAC_CUDA_GDN_ATOM=0 atom1:lilac atom2:lilac:LILAC_CUDA_GDN_ATOM=2" ROUNDS=3 DET=0 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/ 2>/dev/null
bash $OLDPWD/dev/record_bench.sh
