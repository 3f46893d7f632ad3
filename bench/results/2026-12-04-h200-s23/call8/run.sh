#!/bin/bash
# session 23 call 8: flash-decoding / combine switches re-measured on HEAD now that the merge is
# fast: LILAC_CUDA_FD_MINPOS=64 / 128 (fewer splits at short contexts), LILAC_CUDA_FD_FG=4 (4-head
# blocks that fit beside the qkv projection), LILAC_CUDA_COMB_ND=64. 3 rounds at 4096/1024 and 256.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="base:lilac mp64:lilac:LILAC_CUDA_FD_MINPOS=64 mp128:lilac:LILAC_CUDA_FD_MINPOS=128 fg4:lilac:LILAC_CUDA_FD_FG=4 cnd64:lilac:LILAC_CUDA_COMB_ND=64"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt
