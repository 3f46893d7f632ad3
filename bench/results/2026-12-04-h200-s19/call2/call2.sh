#!/bin/bash
# session 19 call 2: the join with relaxed polls and back-off. `lilac` = session 19's tree (MIXBF and
# GPRE removed, the merge weights kept, FD_JOIN on with 128 ns back-off); FD_JOIN=0 the combine kernel
# as before (the baseline); ns0 / ns512: other back-offs; trig1: the out-projection released at
# arrival instead of after the wait; comb32: no join, the combine at 32 dims per block. Digests, the
# LN_PAD=0 digest (does session 17's LN_PAD=6 change bits?), traces with and without the join.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { # name binary env...
  local n=$1 b=$2; shift 2
  env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1
}
for v in "join lilac" "nojoin lilac LILAC_CUDA_FD_JOIN=0" "pad0 lilac LILAC_CUDA_FD_JOIN=0 LILAC_CUDA_LN_PAD=0"; do
  set -- $v; EXTRA=--deterministic run det_$1 "${@:2}"; echo "det $1: $(grep -o 'digest [0-9a-f]*' $OUT/det_$1.txt | head -1)"
done
for r in 0 1 2; do
  for v in "join lilac" "nojoin lilac LILAC_CUDA_FD_JOIN=0" "ns0 lilac-ns0" "ns512 lilac-ns512" "trig1 lilac-trig1" "comb32 lilac LILAC_CUDA_FD_JOIN=0 LILAC_CUDA_COMB_ND=32"; do
    set -- $v; run r${r}_$1 "${@:2}"
    echo "r$r $1 : $(grep '4096/1024' $OUT/r${r}_$1.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$1.txt | grep -o 'decode +[0-9.]*')"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-jtrace $Q > $OUT/trace_join.txt 2>&1
LILAC_CUDA_LN_TRACE=1 LILAC_CUDA_FD_JOIN=0 timeout 120 ./lilac-jtrace $Q > $OUT/trace_nojoin.txt 2>&1
for t in join nojoin; do echo "== trace $t"; grep -A 12 "lean trace at position 4159" $OUT/trace_$t.txt | grep -E "position|attn|gdn.in|gateup"; grep -A 32 "lean trace at position 4159" $OUT/trace_$t.txt | grep "last block"; done
grep -A 12 "lean trace at position 263" $OUT/trace_join.txt | grep -E "position|attn"
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
