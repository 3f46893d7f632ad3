#!/bin/bash
# session 21 call 1: the cjoin lab (in-projection -> GDN boundary as kernels vs a cluster join),
# A/B of LN_GU_NB=1 and k_lhead 2 x 384 against a HEAD binary built the same way (3 rounds
# interleaved, digests), a trace of HEAD, then the full GPU suite on the tree.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
echo "== cjoin"; timeout 60 ./lab/cjoin 2>&1 | tee $OUT/lab_cjoin.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="head gunb lh384"
for v in $V; do EXTRA=--deterministic run det_$v lilac-$v; echo "det $v: $(grep -o 'digest [0-9a-f]*' $OUT/det_$v.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    run r${r}_$v lilac-$v
    echo "r$r $v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$v.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-trace $Q > $OUT/trace_head.txt 2>&1
echo "== trace"; grep -A 40 "lean trace at position 4159" $OUT/trace_head.txt | head -60
timeout 290 ./gpu_session.sh test > $OUT/gpu_session.txt 2>&1; grep -E "not ok|passed|failed" $OUT/gpu_test.txt | tail -5
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
