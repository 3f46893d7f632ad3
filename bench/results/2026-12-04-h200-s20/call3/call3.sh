#!/bin/bash
# session 20 call 3: (a) does the MoE down asking for its tiles at entry slow gate/up's routed
# tiles? lilac-dd1000 / dd2500: the down's thread 0 sleeps 1.0 / 2.5 µs after its top-k before its
# requests (-DLN_DOWN_DELAY); pfd2000: the down's L2 prefetch of the next projection 2 µs after its
# tiles (-DLN_PF_DELAY). (b) do a kernel's parameter bytes cost? hnopad / hpad: HEAD built by
# lean_variant.sh, hpad with 136 unused bytes at the end of gate/up's lmoe_args (calls 1-2: unused
# prefetch fields cost 5-7 tok/s). (c) lab bulkbw: the lm head's bytes through registers (k_lsu)
# against the copy-engine ring.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { # name binary env...
  local n=$1 b=$2; shift 2
  env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1
}
for r in 0 1 2; do
  for v in "base lilac" "dd1000 lilac-dd1000" "dd2500 lilac-dd2500" "pfd2000 lilac-pfd2000" "hnopad lilac-hnopad" "hpad lilac-hpad"; do
    set -- $v; run r${r}_$1 "${@:2}"
    echo "r$r $1 : $(grep '4096/1024' $OUT/r${r}_$1.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$1.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
timeout 200 ./lab/bulkbw > $OUT/bulkbw.txt 2>&1; grep -E "ring|lsu" $OUT/bulkbw.txt
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt
