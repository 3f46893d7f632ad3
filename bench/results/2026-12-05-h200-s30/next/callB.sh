#!/bin/bash
# call B (carry [".cuda-wt/f.tar.xz"]; an H200 for the record; reuses /tmp/b when the machine is still
# warm): the benchmark of record with the defaults (if call A's A/B makes GDN_IN or GRAPH_STEPS the
# default, rebuild and re-bundle first, or export the winner's variables here and say so), no suite.
B=/tmp/b; if [ ! -x $B/lilac ]; then mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
SUITE=0 bash $OLDPWD/dev/record_bench.sh
