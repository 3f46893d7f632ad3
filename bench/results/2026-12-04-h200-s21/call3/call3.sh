#!/bin/bash
# session 21 call 3: the next input projection prefetched into L2 by the fused GDN kernel right
# after its wait (PFNEXT=5, build -DLN_GDN_PF=1: the DRAM is idle while the step computes; PFNEXT=2,
# the default, asks from the MoE down's entry, inside gate/up's routed-expert window), A/B against
# HEAD (3 rounds interleaved, digests); traces of HEAD-with-L2-resident-weights (LN_L2ONLY, results
# garbage: how short could the in-projection's tile stream be) and of PFNEXT=5.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="head:lilac-head gpf5:lilac-gpf:LILAC_CUDA_PFNEXT=5 gpf2:lilac-gpf"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in $V; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-tl2 $Q > $OUT/trace_l2only.txt 2>&1
LILAC_CUDA_LN_TRACE=1 LILAC_CUDA_PFNEXT=5 timeout 120 ./lilac-tgpf $Q > $OUT/trace_gpf5.txt 2>&1
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-tgpf $Q > $OUT/trace_gpf2.txt 2>&1
for t in l2only gpf5 gpf2; do echo "== trace $t: $(grep -o 'decode +[0-9.]* tok/s' $OUT/trace_$t.txt | tail -1)"; grep -A 12 "lean trace at position 4159" $OUT/trace_$t.txt | head -12; done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
