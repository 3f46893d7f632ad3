#!/bin/bash
# session 26 call 2 (right after call 1 while warm: reuses /tmp/b; on a fresh machine carry c.tar.xz):
# first the lab lmoe (the split-K kernel alone at the real shapes, Q4_K and Q6_K downs: against the fp64
# reference and the two-kernel pair, and the per-layer time of each form in a PDL graph; ~1 minute),
# then the same-call A/B of the split-K forms, 3 rounds: ref = HEAD (make), head = HEAD (the
# dev/lean_variant.sh path: the control of the variant builds), sk = LILAC_CUDA_MOE_SK=1 (64 registers,
# 16-52 bytes of spills), sk80 = -DSK_REGS=80 (no spills), sk138 / sk111 = sk (64 registers: 32K of the
# SM's 64K, so that k_lgdn's block, 512 x 64, fits beside it) with its shared memory capped at 138 KB
# (2 tiles + 2 slices in flight) / 111 KB (2 + 1), either of which leaves room for k_lgdn's ~75 KB,
# skat = sk80 + GDN_ATOM=1, sk4 = sk80 with -DSK_V4=1 (four rows per red.global.add.v4.f32).
# The A/B only where call 1's split-K tests passed (/tmp/b/sk_ok) or SK=1 is given.
B=/tmp/b; [ -x $B/lilac-sk80 ] || { mkdir -p $B; tar xJf .cuda-wt/c.tar.xz -C $B; }; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 120 ./lab/lmoe 2>&1 | tee $OUT/lmoe.txt
{ [ -f $B/sk_ok ] || [ "${SK:-0}" = 1 ]; } || { echo "split-K A/B skipped (no sk_ok)"; exit 0; }
K=LILAC_CUDA_MOE_SK=1
V="ref:lilac head:lilac-head sk:lilac:$K sk80:lilac-sk80:$K sk138:lilac:$K,LILAC_CUDA_MOE_SK_SMEM=138 sk111:lilac:$K,LILAC_CUDA_MOE_SK_SMEM=111 skat:lilac-sk80:$K,LILAC_CUDA_GDN_ATOM=1 sk4:lilac-sk80v4:$K" ROUNDS=3 DET=0 TO=60 bash $OLDPWD/dev/ab_bench.sh
