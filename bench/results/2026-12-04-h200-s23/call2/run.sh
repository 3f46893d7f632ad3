#!/bin/bash
# session 23 call 2: the MoE down before an attention layer asks the L2 for that layer's first cached
# K / V rows of each flash-decoding split (LILAC_CUDA_KVPF rows, default 64). head = the tree before
# (run with FOLD=3, the new default); lilac = with the prefetch; KVPF=0 (code in, off) and 128.
# Digests, 3 A/B rounds at 4096/1024 and 256, traces with KVPF 0 / 64.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="head:lilac-head:LILAC_CUDA_FOLD=3 kv64:lilac kv0:lilac:LILAC_CUDA_KVPF=0 kv128:lilac:LILAC_CUDA_KVPF=128"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in head:lilac-head:LILAC_CUDA_FOLD=3 kv64:lilac; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
for k in 0 64; do LILAC_CUDA_KVPF=$k LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-tkv $Q > $OUT/trace_kv$k.txt 2>&1; echo "== trace kvpf=$k"; grep -A 30 "lean trace at position 4159" $OUT/trace_kv$k.txt | grep -E "kernel|attn|gdn.in|moe.down  " | head -12; done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
