#!/bin/bash
# session 20 call 4: the lm head through registers (k_lhead, LILAC_CUDA_LN_HEAD=1, the new default)
# against the copy-engine ring (0); lilac-bps2: k_lhead at two blocks per SM (64 registers, 42 B of
# spills). Digests of both settings (must be equal: the same sums), 3 rounds interleaved, a trace,
# then the GPU tests (a new one asserts LN_HEAD 1 vs 0 bit for bit).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { # name binary env...
  local n=$1 b=$2; shift 2
  env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1
}
for v in "lhead lilac" "ring lilac LILAC_CUDA_LN_HEAD=0" "bps2 lilac-bps2"; do
  set -- $v; EXTRA=--deterministic run det_$1 "${@:2}"; echo "det $1: $(grep -o 'digest [0-9a-f]*' $OUT/det_$1.txt | head -1)"
done
for r in 0 1 2; do
  for v in "lhead lilac" "ring lilac LILAC_CUDA_LN_HEAD=0" "bps2 lilac-bps2"; do
    set -- $v; run r${r}_$1 "${@:2}"
    echo "r$r $1 : $(grep '4096/1024' $OUT/r${r}_$1.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$1.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-trace $Q > $OUT/trace_lhead.txt 2>&1
LILAC_CUDA_LN_TRACE=1 LILAC_CUDA_LN_HEAD=0 timeout 120 ./lilac-trace $Q > $OUT/trace_ring.txt 2>&1
for t in lhead ring; do echo "== trace $t"; grep -A 12 "lean trace at position 4159" $OUT/trace_$t.txt | grep -E "position|lm_head"; done
timeout 290 ./gpu_session.sh test > $OUT/gpu_session.txt 2>&1; grep -E "not ok|passed|failed" $OUT/gpu_test.txt | tail -5; grep -i "lm head" $OUT/gpu_test.txt
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
