#!/bin/bash
# session 28 call 2 (carry [".cuda-wt/e.tar.xz", ".cuda-wt/lean.cubin.xz"]): first the --deterministic
# digests of ref / topk2 / fdm2 / both (each must equal ref's: the sorted top-k chooses the same experts,
# the register cap changes no arithmetic), then the same-call A/B, 2 rounds (session 27's rounds agreed
# within 0.5 tok/s): ref (HEAD), head (the variant build path), topk2 (-DLN_TOPK2=1), fdm2
# (-DFD_MINB_MMA=2: flash decoding at 128 registers), both, cout (LILAC_CUDA_ATT_COUT=1) alone, on fdm2
# (its design point: the blocks enter beside flash decoding) and on both, ATT_COUT=2 on fdm2; the register caps r48
# (gate/up) and d48 (the down); PFSELF; PFNEXT 0 on HEAD; LN_GDN_DELAY 500 / 1500; then nvdisasm of the
# lean kernels.
B=/tmp/b2; mkdir -p $B; tar xJf .cuda-wt/e.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
V="ref:lilac topk2:lilac-topk2 fdm2:lilac-fdm2 both:lilac-both" ROUNDS=0 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/det && mv $OUT/all.tgz $OUT/det/ 2>/dev/null
V="ref:lilac head:lilac-head topk2:lilac-topk2 fdm2:lilac-fdm2 both:lilac-both cout:lilac:LILAC_CUDA_ATT_COUT=1 coutfd:lilac-fdm2:LILAC_CUDA_ATT_COUT=1 coutboth:lilac-both:LILAC_CUDA_ATT_COUT=1 cout2fd:lilac-fdm2:LILAC_CUDA_ATT_COUT=2 r48:lilac-r48 d48:lilac-d48 pfs:lilac-pfself pf0:lilac:LILAC_CUDA_PFNEXT=0 gd500:lilac-gd500 gd1500:lilac-gd1500" ROUNDS=2 DET=0 TO=60 bash $OLDPWD/dev/ab_bench.sh
cd $OLDPWD && xz -dc .cuda-wt/lean.cubin.xz > /tmp/lean.cubin && /usr/local/cuda/bin/nvdisasm -g -c /tmp/lean.cubin | xz -6 > $OUT/lean.sass.xz
ls -la $OUT
