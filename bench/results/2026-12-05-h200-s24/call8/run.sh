#!/bin/bash
# session 24 call 8: settings measured before LN_EVF, again with it (the final binary, HEAD d8969bd; env only):
# ref; pre0 / pre2 = LILAC_CUDA_LN_PRE=0 / 2 (all / two of k_lgemv's stages requested before the wait, was 1);
# pf1 = LILAC_CUDA_PFNEXT=1 (the down's L2 prefetch after its wait, was 2: at entry). 3 quick rounds.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 120 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="ref:lilac pre0:lilac:LILAC_CUDA_LN_PRE=0 pre2:lilac:LILAC_CUDA_LN_PRE=2 pf1:lilac:LILAC_CUDA_PFNEXT=1"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b ${e//,/ }; }
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
