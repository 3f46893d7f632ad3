#!/bin/bash
# call B (carry [".cuda-wt/x.tar.xz"]; reuses /tmp/bx when warm; the record wants an H200, an H100 run
# is still worth keeping with its card named): the benchmark with the defaults, no suite. If call A made
# COUT_PACK the default, rebuild + re-bundle first, or export LILAC_CUDA_COUT_PACK=1 here and say so.
B=/tmp/bx; if [ ! -x $B/lilac ]; then mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
SUITE=0 bash $OLDPWD/dev/record_bench.sh
