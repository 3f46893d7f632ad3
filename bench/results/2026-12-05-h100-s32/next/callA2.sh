#!/bin/bash
# call A2 (carry [".cuda-wt/x.tar.xz"]; reuses /tmp/bx when warm; any card): where the kernels let the
# next launch in (session 32, never run): gut1 / gut2 = k_lmoe_gu triggers the MoE down after its first /
# last tile landed (-DLN_GU_TRIG), gvt2 = k_lgemv after its last (-DLN_GEMV_TRIG=2); A/B 3 rounds with
# digests (must equal new's: a later trigger changes no result), then traces default vs gut1.
B=/tmp/bx; if [ ! -x $B/lilac-gut1 ]; then mkdir -p $B; tar xJf .cuda-wt/x.tar.xz -C $B; fi; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
V="new:lilac gut1:lilac-gut1 gut2:lilac-gut2 gvt2:lilac-gvt2" ROUNDS=3 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:lilac-trace:" "gut1:lilac-tgut1:"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./$b $Q > $OUT/tr_$n.txt 2>&1
  echo "== $n"; awk '/position 4159/{f=1} f' $OUT/tr_$n.txt | grep -E "position|moe|entry" | sed -n 1,26p
done
xz -9 $OUT/*.txt 2>/dev/null
