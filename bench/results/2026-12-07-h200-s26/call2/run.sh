#!/bin/bash
# session 26 call 2 (right after call 1 while warm: reuses /tmp/b; on a fresh machine carry c.tar.xz):
# same-call A/B, 3 rounds. ref = HEAD (make), head = HEAD (dev/lean_variant.sh path), sk = LILAC_CUDA_MOE_SK=1
# (64 registers, 16-52 bytes of spills), sk80 = the same at 80 registers (no spills), sk138 / sk111 =
# sk80 with its shared memory capped at 138 KB (2 tiles + 2 slices in flight) / 111 KB (2 + 1: beside
# the previous kernel's block), skat = sk80 + GDN_ATOM=1, sk4 = sk80 with -DSK_V4=1 (the residual rows
# four per red.global.add.v4.f32), atom / atom2 = LILAC_CUDA_GDN_ATOM=1 / 2,
# pflsu = -DLN_PFLSU. The split-K variants only where call 1's split-K tests passed (/tmp/b/sk_ok) or
# SK=1 is given.
B=/tmp/b; [ -x $B/lilac-sk80 ] || { mkdir -p $B; tar xJf .cuda-wt/c.tar.xz -C $B; }; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
K=LILAC_CUDA_MOE_SK=1
SKV="sk:lilac:$K sk80:lilac-sk80:$K sk138:lilac-sk80:$K,LILAC_CUDA_MOE_SK_SMEM=138 sk111:lilac-sk80:$K,LILAC_CUDA_MOE_SK_SMEM=111 skat:lilac-sk80:$K,LILAC_CUDA_GDN_ATOM=1 sk4:lilac-sk80v4:$K"
{ [ -f $B/sk_ok ] || [ "${SK:-0}" = 1 ]; } || { SKV=""; echo "split-K variants skipped (no sk_ok)"; }
V="ref:lilac head:lilac-head $SKV atom:lilac:LILAC_CUDA_GDN_ATOM=1 atom2:lilac:LILAC_CUDA_GDN_ATOM=2 pflsu:lilac-pflsu" ROUNDS=3 DET=0 TO=60 bash $OLDPWD/dev/ab_bench.sh
