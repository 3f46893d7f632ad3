#!/bin/bash
# call A (carry [".cuda-wt/f.tar.xz"]; any card: same-call ratios): session 30's two opt-ins, never run
# before. The lab lgdn_in first (GDN_IN's kernel against the two launches it replaces, bit for bit where
# it should be), then the same-call A/B at 4096/1024, 2 rounds, with every variant's --deterministic
# digest first (GRAPH_STEPS and STEP_PDL act there too: the digest must not move): the default; GDN_IN
# with ring depths 3 (its default) and 6, and with the W_out / B slices before the wait (WPRE); 8 decode steps per graph launch, without and with STEP_PDL;
# the token embedding table on the device (LILAC_CUDA_EMBED_DEVICE=1, never measured since the early
# sessions); GDN_IN with 8 steps per graph. Their GPU tests (--gdnin, --steps) are in call C's suite.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/f.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 120 ./lab/lgdn_in 2>&1 | tee $OUT/lab_lgdn_in.txt
V="new:lilac gin:lilac:LILAC_CUDA_GDN_IN=1 gin6:lilac:LILAC_CUDA_GDN_IN=1,LILAC_CUDA_GDN_IN_NST=6 ginw:lilac:LILAC_CUDA_GDN_IN=1,LILAC_CUDA_GDN_IN_WPRE=1 k8:lilac:LILAC_CUDA_GRAPH_STEPS=8 k8p:lilac:LILAC_CUDA_GRAPH_STEPS=8,LILAC_CUDA_STEP_PDL=1 emb:lilac:LILAC_CUDA_EMBED_DEVICE=1 gink8:lilac:LILAC_CUDA_GDN_IN=1,LILAC_CUDA_GRAPH_STEPS=8" ROUNDS=2 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
