#!/bin/bash
# session 26 call 1 (carry [".cuda-wt/c.tar.xz"]): HEAD's --deterministic digest (expect e37949b3c33931b9),
# the full benchmark of record, the split-K MoE's GPU tests alone under a short timeout (first run
# on a GPU), then the GPU suite (without the split-K tests if they failed). LN_GU_REGS=56 (session
# 24) and GDN_ATOM's tests (session 25) run under the suite for the first time too.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/c.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
bash $OLDPWD/dev/record_bench.sh
grep -qE '^# [0-9]+ tests, 0 failed' $OUT/gpu_test_sk.txt 2>/dev/null && touch $B/sk_ok && echo "sk tests passed: /tmp/b/sk_ok"
