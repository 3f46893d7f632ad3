#!/bin/bash
# session 23 call 11: base = HEAD (lilac-base); lilac = + LN_QSWAP: the Q4_K chunk halves read in a
# bank-conflict-free order, the activation halves swapped once per kernel to match (the same integer
# sums: the same bits expected). Digests, 3 A/B rounds; if the digests agree and it wins, the quick
# GPU suite on it.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in base:lilac-base new:lilac; do timeout 90 ./${v#*:} $Q --deterministic > $OUT/det_${v%%:*}.txt 2>&1; done
d0=$(grep -o 'digest [0-9a-f]*' $OUT/det_base.txt | head -1); d1=$(grep -o 'digest [0-9a-f]*' $OUT/det_new.txt | head -1)
echo "det base: $d0 | new: $d1"
for r in 0 1 2; do
  for v in base:lilac-base new:lilac; do
    n=${v%%:*}; timeout 90 ./${v#*:} $Q > $OUT/r${r}_$n.txt 2>&1
    a=$(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*' | awk '{print $2}')
    s=$(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1 | awk '{print $2}')
    echo "r$r $n : $a | 256: $s"; echo "$n $a $s" >> $OUT/ab.txt
  done
done
win=$(awk '{n[$1]++; a[$1]+=$2} END {print (a["new"]/n["new"] > a["base"]/n["base"] + 1) ? 1 : 0}' $OUT/ab.txt)
echo "win=$win"
if [ "$win" = 1 ] && [ "$d0" = "$d1" ]; then timeout 170 ./gpu_session.sh test-quick > $OUT/gpu_session.txt 2>&1; grep -E "not ok|# .* tests" $OUT/gpu_test.txt | tail -5; fi
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt
