#!/bin/bash
# session 23 call 7: base = HEAD fb7c13c; gcv = + the fused GDN kernel's q / k rows padded to 33 floats in shared
# memory (the recurrence's 4 key-row groups read one bank: 4-way conflicts); lilac = gcv + the Q4_K / Q6_K
# chunk loads of every lean dot in a bank-conflict-free order (LN_QSWAP). Digests, 3 A/B rounds.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="base:lilac-base gcv:lilac-gcv lilac:lilac"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
