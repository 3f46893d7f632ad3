#!/bin/bash
# session 22 call 4: A/B at 4096/1024, 3 rounds vs base (HEAD: LN_GDN_DELAY=1000):
#   in384     -DLN_IN_THREADS=384: input projections (after the MoE down) in 12-warp blocks at 72
#             registers (k_lgemv_in), which fit beside the down's 18 warps in the register file
#   in384d1/2 in384 + -DLN_IN_DELAY=1000 / 2000 (their pre-wait tiles later)
#   in384p2   in384d1 with LILAC_CUDA_LN_PRE=2
#   op1 / rt1 -DLN_OUT_DELAY / -DLN_RT_DELAY=1000: the attention out-projection's / router's pre-wait tiles later
# then the trace of in384d1 (trace build).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="base:lilac-base in384:lilac-in384 in384d1:lilac-in384d1 in384d2:lilac-in384d2 in384p2:lilac-in384d1:LILAC_CUDA_LN_PRE=2 op1:lilac-op1 rt1:lilac-rt1"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in base:lilac-base in384:lilac-in384; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-tin $Q > $OUT/trace_in.txt 2>&1; echo "== trace in384d1"; grep -A 12 "lean trace at position 4159" $OUT/trace_in.txt | head -12
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
