#!/bin/bash
# session 22 call 1: A/B at 4096/1024 (quick bench), 3 rounds, against HEAD built the same way:
#   tree  -DLN_TOPK_TREE=1      top-k rounds with the lane maximum as a depth-3 tree (same choices)
#   defer -DLN_GSTATE_DEFER=4   fused GDN: state columns staged in smem, stored at the kernel's end
#   both  tree + defer
#   gd1 / gd25 -DLN_GDN_DELAY=1000 / 2500: fused GDN's pre-wait requests 1 / 2.5 us after entry
#   fdt   fd_allreduce4/8 as one template (session 21's patch; cuda_backend.cu)
# digests with --deterministic first (must all be 231f8e06c2ad91e5).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="head:lilac-head tree:lilac-tree defer:lilac-defer both:lilac-both gd1:lilac-gd1 gd25:lilac-gd25 fdt:lilac-fdt"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
