#!/bin/bash
# session 22 call 2: pre-wait request delays (k_lean.cuh ln_delay_ns), A/B at 4096/1024, 3 rounds vs HEAD:
#   gd05 / gd1 / gd15   -DLN_GDN_DELAY=500 / 1000 / 1500 (fused GDN's pre-wait requests)
#   gd1gu1 / gd1gu2     gd1 + -DLN_GU_DELAY=1000 / 2000 (gate/up's pre-wait shared-expert tiles)
#   gd1gv1              gd1 + -DLN_GEMV_DELAY=1000 (k_lgemv's pre-wait tiles)
#   gd1pf1              gd1 with LILAC_CUDA_PFNEXT=1 (the down's L2 prefetch after its wait)
# then traces of HEAD and gd1 (trace builds).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="head:lilac-head gd05:lilac-gd05 gd1:lilac-gd1 gd15:lilac-gd15 gd1gu1:lilac-gd1gu1 gd1gu2:lilac-gd1gu2 gd1gv1:lilac-gd1gv1 gd1pf1:lilac-gd1:LILAC_CUDA_PFNEXT=1"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in head:lilac-head gd1gv1:lilac-gd1gv1; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
for t in head gd1; do LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-t$t $Q > $OUT/trace_$t.txt 2>&1; echo "== trace $t"; grep -A 12 "lean trace at position 4159" $OUT/trace_$t.txt | head -21; done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
