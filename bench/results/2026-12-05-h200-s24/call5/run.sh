#!/bin/bash
# session 24 call 5: ref = HEAD d8969bd (LN_EVF on); new = + PFNEXT=3 / PFHEAD support (defaults: code as ref);
# pg3 = LILAC_CUDA_PFNEXT=3 (gate/up asks the L2 for the next input projection at its entry, after its
# shared-expert tiles, instead of the down at its entry); ph / ph2 = LILAC_CUDA_PFHEAD=6336 / 12672 (the
# last layer's down asks for the lm head's first rows: two / four of k_lhead's row steps); pgh = both.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 120 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="ref:lilac-ref new:lilac pg3:lilac:LILAC_CUDA_PFNEXT=3 ph:lilac:LILAC_CUDA_PFHEAD=6336 ph2:lilac:LILAC_CUDA_PFHEAD=12672 pgh:lilac:LILAC_CUDA_PFNEXT=3,LILAC_CUDA_PFHEAD=6336"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b ${e//,/ }; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
