#!/bin/bash
# call A (carry [".cuda-wt/f.tar.xz"]; H200 for the record): the A/B of the session-29 default
# (ATT_COUT=1) against ATT_COUT=0 and =2, 4-head flash-decoding blocks (FD_FG=4: under ATT_COUT its
# blocks might fit beside the combined kernel's) and LN_PRE=2, 2 rounds, then the record without the suite.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
V="new:lilac old:lilac:LILAC_CUDA_ATT_COUT=0 cout2:lilac:LILAC_CUDA_ATT_COUT=2 fg4:lilac:LILAC_CUDA_FD_FG=4 pre2:lilac:LILAC_CUDA_LN_PRE=2" ROUNDS=2 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
SUITE=0 bash $OLDPWD/dev/record_bench.sh
