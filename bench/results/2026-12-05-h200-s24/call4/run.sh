#!/bin/bash
# session 24 call 4: base = HEAD b9f3341; new = LN_EVF=1 the default (lean tile copies evict-first);
# noevf = new with -DLN_EVF=0; pfl = new + -DLN_PFL=1 (the MoE down's L2 prefetch of the next input
# projection evict-last); fd1 / fd2 / fd3 = new with LILAC_CUDA_FDPF=1 / 2 / 3 (flash decoding asks
# the L2 for the out-projection's W_o / the fold's B / both at entry). Digests, 3 quick rounds.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 120 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="base:lilac-base new:lilac noevf:lilac-noevf pfl:lilac-pfl fd1:lilac:LILAC_CUDA_FDPF=1 fd2:lilac:LILAC_CUDA_FDPF=2 fd3:lilac:LILAC_CUDA_FDPF=3"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b ${e//,/ }; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
