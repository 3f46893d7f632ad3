#!/bin/bash
# call C (carry [".cuda-wt/x.tar.xz"]; the record wants an H200): the benchmark of record with the defaults.
B=/tmp/bx; if [ ! -x $B/lilac ]; then mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
SUITE=0 bash $OLDPWD/dev/record_bench.sh
