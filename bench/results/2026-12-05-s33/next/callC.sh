#!/bin/bash
# call C (carry [".cuda-wt/x.tar.xz"]; the record wants an H200: name no kind, or nvidia-h200 after
# give_back; ~1.5 min): the benchmark of record with the defaults; PH=1 exports LILAC_CUDA_FD_PH=1.
B=/tmp/bx; if [ ! -x $B/lilac ]; then mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
[ "${PH:-0}" = 1 ] && export LILAC_CUDA_FD_PH=1
SUITE=0 bash $OLDPWD/dev/record_bench.sh
