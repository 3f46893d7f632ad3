#!/bin/bash
# session 25 call 2: register caps re-measured under LN_EVF (ref = HEAD via make; head = HEAD via
# dev/lean_variant.sh; r48/r64 = gate/up at 48/64; d48/d64 = the down at 48/64 (default: launch bounds' 56);
# pfself = -DLN_PFSELF with PFNEXT 2 (default) and 0; pflsu = -DLN_PFLSU (the down's prefetch by per-thread prefetch.global.L2);
# atom = LILAC_CUDA_GDN_ATOM=1 (the GDN fold's shares by fp32 atomics; its --deterministic digest is ref's: the switch is off there);
# atom2 = LILAC_CUDA_GDN_ATOM=2 (the x rows four per red.global.add.v4.f32). 3 rounds.
B=/tmp/b; [ -x $B/lilac-r48 ] || { mkdir -p $B; tar xJf .cuda-wt/c.tar.xz -C $B; }; cd $B  # call 1 unpacked it (warm machine)
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
V="ref:lilac head:lilac-head r48:lilac-r48 r64:lilac-r64 d48:lilac-d48 d64:lilac-d64 pfs:lilac-pfself pfs0:lilac-pfself:LILAC_CUDA_PFNEXT=0 head0:lilac-head:LILAC_CUDA_PFNEXT=0 pflsu:lilac-pflsu atom:lilac:LILAC_CUDA_GDN_ATOM=1 atom2:lilac:LILAC_CUDA_GDN_ATOM=2" ROUNDS=3 bash $OLDPWD/dev/ab_bench.sh
# the current lean kernels' SASS with line info (this machine has no nvdisasm): the post-wait code's size
cd $OLDPWD && xz -dc .cuda-wt/lean.cubin.xz > /tmp/lean.cubin && /usr/local/cuda/bin/nvdisasm -g -c /tmp/lean.cubin | xz -6 > $OUT/lean.sass.xz; ls -la $OUT
# lab tmaq (session 25): does the down's entry burst (copies, bulk prefetch) delay a gate/up stage's copies on the same SM?
cd /tmp/b && [ -x lab/tmaq ] && timeout 120 ./lab/tmaq | tee $OUT/tmaq.txt
