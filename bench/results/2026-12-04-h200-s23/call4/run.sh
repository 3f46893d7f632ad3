#!/bin/bash
# session 23 call 4: head = the tree before the session's attention changes (LILAC_CUDA_FOLD=3);
# lilac = + the appended position's direct partial (FD_XS_DIRECT) + the one-barrier combine + the
# flash-decoding merge's per-warp rows padded (fd_wo: the tensor-core loop's state stores hit one
# bank pair, 32 ways). Digests, 3 A/B rounds at 4096/1024 and 256, the trace at 4159 and 263.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="head:lilac-head:LILAC_CUDA_FOLD=3 lilac:lilac"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-tpad $Q > $OUT/trace_tpad.txt 2>&1; echo "== trace"; grep -A 30 "lean trace at position 4159" $OUT/trace_tpad.txt | grep -E "kernel|attn" | head -12
grep -A 12 "lean trace at position 263" $OUT/trace_tpad.txt | grep -E "attn" | head -4
timeout 200 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/bench > $OUT/bench.txt 2>&1
echo "== bench"; sed -n 10,22p $OUT/bench/bench.md
cd $OUT && tar czf all.tgz *.txt bench && rm -rf r*_*.txt det_*.txt trace_*.txt bench.txt
