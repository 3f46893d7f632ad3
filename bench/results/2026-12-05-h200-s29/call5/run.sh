#!/bin/bash
# session 29 call 5 (carry [".cuda-wt/p.tar.xz"]): the tile-packed gate/up (LILAC_CUDA_GU_PACK=1):
# gpu_test --pack (on where the shapes apply; same bits as the planes), then the A/B, 2 rounds:
# ref, pack, cout (ATT_COUT=1), packcout, both (TOPK2 + FD_MINB_MMA=2), bothpc (both + pack + cout).
B=/tmp/b5; mkdir -p $B; tar xJf .cuda-wt/p.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 200 ./gpu_test --pack > $OUT/gpu_test_pack.txt 2>&1; echo "pack tests rc $?: $(tail -1 $OUT/gpu_test_pack.txt)"; grep "not ok" $OUT/gpu_test_pack.txt | head
V="ref:lilac pack:lilac:LILAC_CUDA_GU_PACK=1" ROUNDS=0 DET=1 TO=90 bash $OLDPWD/dev/ab_bench.sh
V="ref:lilac pack:lilac:LILAC_CUDA_GU_PACK=1 cout:lilac:LILAC_CUDA_ATT_COUT=1 packcout:lilac:LILAC_CUDA_GU_PACK=1,LILAC_CUDA_ATT_COUT=1 both:lilac-both bothpc:lilac-both:LILAC_CUDA_GU_PACK=1,LILAC_CUDA_ATT_COUT=1" ROUNDS=2 DET=0 TO=90 bash $OLDPWD/dev/ab_bench.sh
