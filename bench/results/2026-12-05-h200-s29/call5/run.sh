#!/bin/bash
# session 29 call 5 (carry [".cuda-wt/p.tar.xz"]), the one call if only one comes (the device failed to
# start six times in the session's first hour):
# 1. gpu_test --cout (session 28's ATT_COUT, first run in the engine) and gpu_test --pack (the tile-packed
#    MoE weights, LILAC_CUDA_MOE_PACK: on where the shapes apply; same bits as the planes);
# 2. the A/B, 2 rounds: ref, atom0 (GDN_ATOM=0, the pre-s27 default: the untraced A/B never run), cout
#    (ATT_COUT=1), pack1 (gate/up packed), pack3 (gate/up + down), p3cout, both (TOPK2 + FD_MINB_MMA=2,
#    built at this HEAD), bothpc (both + pack 3 + cout).
B=/tmp/b5; mkdir -p $B; tar xJf .cuda-wt/p.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 170 ./gpu_test --cout > $OUT/gpu_test_cout.txt 2>&1; echo "cout tests rc $?: $(tail -1 $OUT/gpu_test_cout.txt)"; grep "not ok" $OUT/gpu_test_cout.txt | head
timeout 120 ./gpu_test --pack > $OUT/gpu_test_pack.txt 2>&1; echo "pack tests rc $?: $(tail -1 $OUT/gpu_test_pack.txt)"; grep "not ok" $OUT/gpu_test_pack.txt | head
V="ref:lilac atom0:lilac:LILAC_CUDA_GDN_ATOM=0 cout:lilac:LILAC_CUDA_ATT_COUT=1 pack1:lilac:LILAC_CUDA_MOE_PACK=1 pack3:lilac:LILAC_CUDA_MOE_PACK=3 p3cout:lilac:LILAC_CUDA_MOE_PACK=3,LILAC_CUDA_ATT_COUT=1 both:lilac-both bothpc:lilac-both:LILAC_CUDA_MOE_PACK=3,LILAC_CUDA_ATT_COUT=1" ROUNDS=2 DET=0 TO=60 bash $OLDPWD/dev/ab_bench.sh
