#!/bin/bash
# session 24 call 1: base = HEAD b9f3341; xo = base + -DLN_FB2_XO=1 (the attention out-projection's
# x_old term after its wait by warps 0-1); new = the tiling experiments' tree with none enabled;
# gut = LILAC_CUDA_GUTILE=1 (routed gate/up stage as one bulk copy from a tiled second copy);
# dnt = LILAC_CUDA_DNTILE=1 (each down slot's tile rows as one bulk copy); both. Digests, 3 A/B rounds.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 120 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="base:lilac-base xo:lilac-xo new:lilac gut:lilac:LILAC_CUDA_GUTILE=1 dnt:lilac:LILAC_CUDA_DNTILE=1 both:lilac:LILAC_CUDA_GUTILE=1,LILAC_CUDA_DNTILE=1"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b ${e//,/ }; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
tail -5 $OUT/r0_both.txt
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
