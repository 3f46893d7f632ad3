#!/bin/bash
# session 21 call 4: how fast would the chain be if every tile copy were an L2 hit? LN_L2ARENA=8:
# every bulk tile copy (dense GEMVs, MoE gate/up and down) reads an 8 MB buffer at an offset spread
# like the real addresses (results garbage; call 3's LN_L2ONLY sent every block to the same 64 rows,
# a hot spot: its in-projection was no faster). Quick bench HEAD vs arena, traces of both, and of
# HEAD with PFNEXT=0 (is the MoE down's prefetch of the next projection doing anything?).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q > $OUT/$n.txt 2>&1; }
for r in 0 1; do
  for v in head arena; do
    run r${r}_$v lilac-$v
    echo "r$r $v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$v.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-tarena $Q > $OUT/trace_arena.txt 2>&1
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-trace $Q > $OUT/trace_head.txt 2>&1
LILAC_CUDA_LN_TRACE=1 LILAC_CUDA_PFNEXT=0 timeout 120 ./lilac-trace $Q > $OUT/trace_pf0.txt 2>&1
for t in arena head pf0; do echo "== trace $t"; grep -A 12 "lean trace at position 4159" $OUT/trace_$t.txt | head -12; grep -A 40 "lean trace at position 4159" $OUT/trace_$t.txt | grep -E "^  (gdn|moe)\..* entry" | head -8; done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt trace_*.txt
