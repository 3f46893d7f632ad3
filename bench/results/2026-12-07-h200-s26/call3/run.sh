#!/bin/bash
# session 26 call 3 (carry [".cuda-wt/e.tar.xz", ".cuda-wt/lean.cubin.xz"]): same-call A/B, 3 rounds, of
# session 25's prepared variants: GDN_ATOM=1 / 2 (the GDN fold's shares by atomics), -DLN_PFLSU (the
# down's L2 prefetch by per-thread prefetch.global.L2), the register caps under LN_EVF (gate/up 48 / 64,
# the down 48 / 64), -DLN_PFSELF with PFNEXT 2 and 0, HEAD with PFNEXT 0; nvdisasm of the lean kernels;
# the lab tmaq if call 1's bundle is still unpacked (warm machine).
B=/tmp/b2; mkdir -p $B; tar xJf .cuda-wt/e.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
V="ref:lilac atom:lilac:LILAC_CUDA_GDN_ATOM=1 atom2:lilac:LILAC_CUDA_GDN_ATOM=2 pflsu:lilac-pflsu r48:lilac-r48 r64:lilac-r64 d48:lilac-d48 d64:lilac-d64 pfs:lilac-pfself pfs0:lilac-pfself:LILAC_CUDA_PFNEXT=0 head0:lilac:LILAC_CUDA_PFNEXT=0" ROUNDS=3 DET=0 TO=60 bash $OLDPWD/dev/ab_bench.sh
cd $OLDPWD && xz -dc .cuda-wt/lean.cubin.xz > /tmp/lean.cubin && /usr/local/cuda/bin/nvdisasm -g -c /tmp/lean.cubin | xz -6 > $OUT/lean.sass.xz
[ -x /tmp/b/lab/tmaq ] && (cd /tmp/b && timeout 100 ./lab/tmaq | tee $OUT/tmaq.txt)
ls -la $OUT
