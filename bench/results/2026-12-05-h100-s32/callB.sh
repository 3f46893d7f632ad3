#!/bin/bash
# session 32, call B (carry [".cuda-wt/m.tar.xz"]: lilac + lilac-trace with COUT_PACK the default): the
# benchmark of record with the defaults, then the A/B default / PF_COUT=1 (the MoE down of the layer
# before an attention layer also prefetches its packed cout slices into L2) / COUT_PACK=0, 3 rounds, and
# traces default vs PF_COUT.
B=/tmp/bm; mkdir -p $B; tar xJf .cuda-wt/m.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
SUITE=0 bash $OLDPWD/dev/record_bench.sh
mkdir -p $OUT/rec && mv $OUT/all.tgz $OUT/bench $OUT/rec/ 2>/dev/null
V="new:lilac pfc:lilac:LILAC_CUDA_PF_COUT=1 nopk:lilac:LILAC_CUDA_COUT_PACK=0" ROUNDS=3 DET=1 TO=60 bash $OLDPWD/dev/ab_bench.sh
mkdir -p $OUT/ab && mv $OUT/all.tgz $OUT/ab/
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:lilac-trace:" "pfc:lilac-trace:LILAC_CUDA_PF_COUT=1"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./$b $Q > $OUT/tr_$n.txt 2>&1
  echo "== $n"; awk '/position 4159/{f=1} f' $OUT/tr_$n.txt | grep -E "position|attn|entry" | sed -n 1,26p
done
xz -9 $OUT/*.txt 2>/dev/null
