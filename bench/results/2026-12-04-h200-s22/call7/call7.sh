#!/bin/bash
# session 22 call 7: the router fold in attention layers by the out-projection's own blocks
# (k_lgemv_fb: each block dots two of B's 257 rows with att, pre-wait cp.async of the rows; the
# combine writes the x_old term; no router launch; gate/up on its raw-logit path), switched by
# LILAC_CUDA_FOLD=3 (default 1: GDN layers only). Digests, 3 A/B rounds, then the GPU suite and the
# full benchmark with FOLD=3 (the default if it wins).
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in 1 3; do LILAC_CUDA_FOLD=$v timeout 90 ./lilac $Q --deterministic > $OUT/det_$v.txt 2>&1; echo "det fold=$v: $(grep -o 'digest [0-9a-f]*' $OUT/det_$v.txt | head -1)"; done
for r in 0 1 2; do
  for v in 1 3; do
    LILAC_CUDA_FOLD=$v timeout 90 ./lilac $Q > $OUT/r${r}_$v.txt 2>&1
    echo "r$r fold=$v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$v.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
LILAC_CUDA_FOLD=3 timeout 290 ./gpu_session.sh test > $OUT/gpu_session.txt 2>&1; grep -E "not ok|# .* tests" $OUT/gpu_test.txt | tail -5
LILAC_CUDA_FOLD=3 timeout 200 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/bench3 > $OUT/bench3.txt 2>&1
echo "== bench fold=3"; sed -n 4,20p $OUT/bench3/bench.md
cd $OUT && tar czf all.tgz *.txt bench3 && rm -rf r*_*.txt det_*.txt bench3.txt
