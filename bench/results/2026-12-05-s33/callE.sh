#!/bin/bash
# session 33 call E (carry [".cuda-wt/x.tar.xz"]; wants an H200): the benchmark of record with
# COUT_PACK=2 exported (the new default's code path), then new (pack 1) vs pk2 A/B, 2 rounds.
B=/tmp/bx; if [ ! -x $B/lilac ]; then mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
LILAC_CUDA_COUT_PACK=2 SUITE=0 bash $OLDPWD/dev/record_bench.sh
mkdir -p $OUT/rec && mv $OUT/all.tgz $OUT/bench $OUT/rec/
V="pk1:lilac:LILAC_CUDA_COUT_PACK=1 pk2:lilac:LILAC_CUDA_COUT_PACK=2" ROUNDS=${R:-2} TO=60 bash $OLDPWD/dev/ab_bench.sh
