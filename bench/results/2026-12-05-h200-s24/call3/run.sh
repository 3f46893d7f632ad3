#!/bin/bash
# session 24 call 3: L2 evict-first policies. base = HEAD b9f3341; new = this tree with the defaults
# (code as base); evf = -DLN_EVF=1 (lean tile bulk copies evict-first, call 2's winner); evg =
# -DLN_EVF=2 (+ the fused GDN kernel's W_out / B rows and the out-projection's fold rows by
# cp.async evict-first); evfd = evg + -DFD_LDCS=1 (flash decoding's K / V rows by ld.global.cs);
# new0 / evf0 = new / evf with LILAC_CUDA_PFNEXT=0 (is evf's gain the L2 prefetch's protection?).
# Digests, 3 quick rounds, then the full bench of new and evfd.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 120 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="base:lilac-base new:lilac evf:lilac-evf evg:lilac-evg evfd:lilac-evfd new0:lilac:LILAC_CUDA_PFNEXT=0 evf0:lilac-evf:LILAC_CUDA_PFNEXT=0"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b ${e//,/ }; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
for b in lilac lilac-evfd; do
  timeout 150 ./$b bench --synthetic qwen3.6-35b-a3b --backend cuda > $OUT/full_$b.txt 2>&1
  echo "== full $b"; grep -E "^\| +[0-9]+ \||mean|4096/1024" $OUT/full_$b.txt | head -14
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
