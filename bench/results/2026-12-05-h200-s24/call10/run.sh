#!/bin/bash
# session 24 call 10: dev/ab_bench.sh's first run. ref = HEAD 8fcc75b (make); head = the same through
# dev/lean_variant.sh; g56 = gate/up at 56 registers (-DLN_GU_REGS=56: no spills; session 11 chose 48
# so that the down's block enters beside it) under LN_EVF. 3 rounds.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
V="ref:lilac head:lilac-head g56:lilac-g56" ROUNDS=3 bash $OLDPWD/dev/ab_bench.sh
