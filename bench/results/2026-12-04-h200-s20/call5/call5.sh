#!/bin/bash
# session 20 call 5: k_lhead with more rows in flight: lilac-r2 (-DLN_LHEAD_R=2: two rows dotted per
# step and two more in flight, 112 registers) and lilac-t768 (-DLN_LHEAD_THREADS=768: 24 warps of one
# row each, 74 registers) against the default (512 threads, one row + one in flight) and the ring;
# digests; then the full benchmark of the default (the record).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { # name binary env...
  local n=$1 b=$2; shift 2
  env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1
}
for v in "r1 lilac" "r2 lilac-r2" "t768 lilac-t768"; do
  set -- $v; EXTRA=--deterministic run det_$1 "${@:2}"; echo "det $1: $(grep -o 'digest [0-9a-f]*' $OUT/det_$1.txt | head -1)"
done
for r in 0 1 2; do
  for v in "r1 lilac" "r2 lilac-r2" "t768 lilac-t768" "ring lilac LILAC_CUDA_LN_HEAD=0"; do
    set -- $v; run r${r}_$1 "${@:2}"
    echo "r$r $1 : $(grep '4096/1024' $OUT/r${r}_$1.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$1.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
timeout 200 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/bench > $OUT/bench.txt 2>&1
echo "== bench (default)"; sed -n 4,22p $OUT/bench/bench.md
cd $OUT && tar czf all.tgz *.txt bench && rm -rf r*_*.txt det_*.txt bench.txt
