#!/bin/bash
# session 20 call 1: L2 evict-first hints on the decode's streams (LN_EF). lilac = HEAD (no hints);
# (ef1 / ef3, built but left home: the carry limit) ef1: the lean kernels' bulk tile copies (dense GEMVs, lm head, MoE gate/up and down) marked
# evict_first; ef3: + the fused GDN kernel's W_out and fold slices; ef7: + flash decoding's K/V rows.
# pf3 / pf3ef: LILAC_CUDA_PFNEXT=3 (the fused GDN blocks ask the L2 for the next input projection as
# they leave, instead of the MoE down at entry), without / with the ef7 hints. 3 rounds,
# interleaved; digests (hints and prefetches move no bit); traces of lilac and ef7 at 4159.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { # name binary env...
  local n=$1 b=$2; shift 2
  env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1
}
for v in "base lilac" "ef7 lilac-ef7" "pf3ef lilac-pf3ef LILAC_CUDA_PFNEXT=3"; do
  set -- $v; EXTRA=--deterministic run det_$1 "${@:2}"; echo "det $1: $(grep -o 'digest [0-9a-f]*' $OUT/det_$1.txt | head -1)"
done
for r in 0 1 2; do
  for v in "base lilac" "ef7 lilac-ef7" "pf3 lilac-pf3 LILAC_CUDA_PFNEXT=3" "pf3ef lilac-pf3ef LILAC_CUDA_PFNEXT=3" "pf3ef2 lilac-pf3ef"; do
    set -- $v; run r${r}_$1 "${@:2}"
    echo "r$r $1 : $(grep '4096/1024' $OUT/r${r}_$1.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$1.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-trace $Q > $OUT/trace_base.txt 2>&1
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-tef7 $Q > $OUT/trace_ef7.txt 2>&1
for t in base ef7; do echo "== trace $t"; grep -A 12 "lean trace at position 4159" $OUT/trace_$t.txt | head -13; done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
