#!/bin/bash
# session 19 call 3: the tree to land (MIXBF / GPRE / the join removed, the merge weights kept, the
# combine at 32 dims per block by default): digests of COMB_ND 32 and 64, a 3-round A/B of the two,
# the benchmark of record, the GPU tests
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for nd in 32 64; do LILAC_CUDA_COMB_ND=$nd timeout 90 ./lilac $Q --deterministic > $OUT/det_$nd.txt 2>&1; echo "det comb$nd: $(grep -o 'digest [0-9a-f]*' $OUT/det_$nd.txt | head -1)"; done
for r in 0 1 2; do for nd in 32 64; do
  LILAC_CUDA_COMB_ND=$nd timeout 90 ./lilac $Q > $OUT/r${r}_comb$nd.txt 2>&1
  echo "r$r comb$nd : $(grep '4096/1024' $OUT/r${r}_comb$nd.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_comb$nd.txt | grep -o 'decode +[0-9.]*')"
done; done
mkdir -p $OUT/final
timeout 300 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o $OUT/final/bench > $OUT/final/final.txt 2>&1; echo "bench rc=$?"
grep -E "len|4096/4096|mean|digest|memory" $OUT/final/final.txt | head -30
echo "== gpu tests"; timeout 280 ./gpu_test > $OUT/gpu_test.txt 2>&1; grep -E "^not ok|passed|failed|tests," $OUT/gpu_test.txt | tail -8
cd $OUT && tar czf all.tgz *.txt final && rm -rf r*_*.txt det_*.txt final gpu_test.txt
