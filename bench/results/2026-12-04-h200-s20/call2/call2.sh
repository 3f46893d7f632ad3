#!/bin/bash
# session 20 call 2: keep gate/up's routed-tile window free of other DRAM requests. lilac-head =
# HEAD (call 1's lilac); lilac = this tree: PFNEXT=4 (gate/up's blocks ask the L2 for the next input
# projection once their last tile landed, instead of the down at its entry), LN_DPRE=0 (the down
# requests its tiles after its wait instead of at entry, beside gate/up's routed tiles). 3 rounds,
# interleaved; digests; traces (PFNEXT 2 and 4) at 4159.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { # name binary env...
  local n=$1 b=$2; shift 2
  env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1
}
for v in "pf2 lilac" "pf4 lilac LILAC_CUDA_PFNEXT=4" "dpre0 lilac LILAC_CUDA_LN_DPRE=0"; do
  set -- $v; EXTRA=--deterministic run det_$1 "${@:2}"; echo "det $1: $(grep -o 'digest [0-9a-f]*' $OUT/det_$1.txt | head -1)"
done
for r in 0 1 2; do
  for v in "head lilac-head" "pf2 lilac" "pf4 lilac LILAC_CUDA_PFNEXT=4" "dpre0 lilac LILAC_CUDA_LN_DPRE=0" "pf4dpre0 lilac LILAC_CUDA_PFNEXT=4 LILAC_CUDA_LN_DPRE=0" "pf0 lilac LILAC_CUDA_PFNEXT=0"; do
    set -- $v; run r${r}_$1 "${@:2}"
    echo "r$r $1 : $(grep '4096/1024' $OUT/r${r}_$1.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$1.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-trace $Q > $OUT/trace_pf2.txt 2>&1
LILAC_CUDA_LN_TRACE=1 LILAC_CUDA_PFNEXT=4 timeout 120 ./lilac-trace $Q > $OUT/trace_pf4.txt 2>&1
LILAC_CUDA_LN_TRACE=1 LILAC_CUDA_PFNEXT=4 LILAC_CUDA_LN_DPRE=0 timeout 120 ./lilac-trace $Q > $OUT/trace_pf4dpre0.txt 2>&1
for t in pf2 pf4 pf4dpre0; do echo "== trace $t"; grep -A 12 "lean trace at position 4159" $OUT/trace_$t.txt | head -13 | grep -v "^--"; grep -A 32 "lean trace at position 4159" $OUT/trace_$t.txt | grep "stamps after" | grep -E "gateup|down"; done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
