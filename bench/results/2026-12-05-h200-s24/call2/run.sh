#!/bin/bash
# session 24 call 2: base = HEAD b9f3341; new = + PFNEXT=3 support (default off: code as base); pf3 =
# LILAC_CUDA_PFNEXT=3 (the MoE down also prefetches the next layer's mixer out-projection and fold B into L2);
# evf = -DLN_EVF=1 (lean tile copies with the L2 evict-first policy); evpf = evf + PFNEXT=3;
# gd15 / gd20 = -DLN_GDN_DELAY=1500 / 2000 (the fused GDN kernel's pre-wait requests later). Digests, 3 rounds.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 120 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="base:lilac-base new:lilac pf3:lilac:LILAC_CUDA_PFNEXT=3 evf:lilac-evf evpf:lilac-evf:LILAC_CUDA_PFNEXT=3 gd15:lilac-gd15 gd20:lilac-gd20"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b ${e//,/ }; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
tail -5 $OUT/r0_pf3.txt
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
