#!/bin/bash
# session 22 call 5: the tree that lands (HEAD + notes: the fused GDN kernel's pre-wait requests
# 1 us after entry, fd_allreduce as one template): digest, LILAC_CUDA_PFNEXT=0 vs the default 2
# (2 rounds), the full benchmark of record, the full GPU suite.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
timeout 90 ./lilac $Q --deterministic > $OUT/det.txt 2>&1
echo "det: $(grep -o 'digest [0-9a-f]*' $OUT/det.txt | head -1)"
for r in 0 1; do
  for v in 2 0; do
    LILAC_CUDA_PFNEXT=$v timeout 90 ./lilac $Q > $OUT/r${r}_$v.txt 2>&1
    echo "r$r pfnext=$v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$v.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
timeout 200 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/bench > $OUT/bench.txt 2>&1
echo "== bench"; sed -n 4,24p $OUT/bench/bench.md
timeout 290 ./gpu_session.sh test > $OUT/gpu_session.txt 2>&1; grep -E "not ok|# .* tests" $OUT/gpu_test.txt | tail -5
cd $OUT && tar czf all.tgz *.txt bench && rm -rf r*_*.txt det.txt bench.txt
