#!/bin/bash
# session 23 call 3: the attention chain at short context.
#   head  = the tree before (LILAC_CUDA_FOLD=3, the new default)
#   xs    = + the appended position's flash-decoding block writes its one-position partial from the
#           rows it has just appended (FD_XS_DIRECT; it had run a 16-position tile and the 8-warp merge)
#   lilac = xs + the combine: per-group merges against the group's own maximum, one L2 round trip
#           and one barrier (attn_combine_part)
# Digests, 3 A/B rounds at 4096/1024 and 256, the trace of lilac at 4159 and 263.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="head:lilac-head:LILAC_CUDA_FOLD=3 xs:lilac-xs lilac:lilac"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-txc $Q > $OUT/trace_txc.txt 2>&1; echo "== trace"; grep -A 30 "lean trace at position 4159" $OUT/trace_txc.txt | grep -E "kernel|attn|moe.down  " | head -12
grep -A 12 "lean trace at position 263" $OUT/trace_txc.txt | grep -E "attn" | head -4
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
