#!/bin/bash
# session 28 call 1 (carry [".cuda-wt/c2.tar.xz"]: HEAD, GDN_ATOM=1 the default, ATT_COUT opt-in):
# 1. the lab lattn (k_lattn_out alone vs an fp64 reference, its time in a PDL chain), then the new
#    ATT_COUT GPU tests alone (gpu_test --cout: first run of k_lattn_out in the engine);
# 2. the same-call A/B, 2 rounds: atom0 = the GDN fold's ordered tail (the old default), atom1 = fp32
#    atomics (the default since session 27, never A/B'd untraced), atom2 = four-float reductions,
#    cout = LILAC_CUDA_ATT_COUT=1 (whatever its tests said: a wrong kernel still shows its time), cout2 =
#    ATT_COUT=2 (x's rows by four-float reductions);
# 3. the benchmark of record without the suite (digest, full bench; call 3 runs the suite).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/c2.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
timeout 60 ./lab/lattn 2>&1 | tee $OUT/lab_lattn.txt
./gpu_session.sh test-cout > $OUT/gpu_session_cout.txt 2>&1
echo "cout tests: $(grep -E '^# .* tests' $OUT/gpu_test_cout.txt || echo 'no summary (crashed?)')"; grep -E "not ok" $OUT/gpu_test_cout.txt | head -8
V="atom0:lilac:LILAC_CUDA_GDN_ATOM=0 atom1:lilac atom2:lilac:LILAC_CUDA_GDN_ATOM=2 cout:lilac:LILAC_CUDA_ATT_COUT=1 cout2:lilac:LILAC_CUDA_ATT_COUT=2" ROUNDS=2 DET=0 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/ 2>/dev/null
SUITE=0 bash $OLDPWD/dev/record_bench.sh
