#!/bin/bash
# session 19 call 6: the tree to land (PFNEXT=2 the default): --deterministic digest, a 3-round sweep
# of the switches the L2 prefetch could move (LN_PRE: the in-projection's stages requested before its
# wait now hit L2; LN_PAD components; GDN_PRE=15), lilac-pfd (-DLN_GU_PFD=1: gate/up asks the L2 for
# the chosen experts' down rows once the top-k is known), then the GPU tests
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib LILAC_SHARED=$B/shared
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
timeout 90 ./lilac $Q --deterministic > $OUT/det.txt 2>&1; echo "det: $(grep -o 'digest [0-9a-f]*' $OUT/det.txt | head -1)"
S=("default" "pfd" "LILAC_CUDA_LN_PRE=0" "LILAC_CUDA_LN_PRE=2" "LILAC_CUDA_LN_PRE=3" "LILAC_CUDA_LN_PAD=2" "LILAC_CUDA_LN_PAD=4" "LILAC_CUDA_GDN_PRE=15")
for r in 0 1 2; do
  for s in "${S[@]}"; do
    n=${s//=/_}
    if [ "$s" = default ]; then timeout 90 ./lilac $Q > $OUT/r${r}_$n.txt 2>&1
    elif [ "$s" = pfd ]; then timeout 90 ./lilac-pfd $Q > $OUT/r${r}_$n.txt 2>&1; else env $s timeout 90 ./lilac $Q > $OUT/r${r}_$n.txt 2>&1; fi
    echo "r$r $s : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
echo "== gpu tests"; timeout 280 ./gpu_test > $OUT/gpu_test.txt 2>&1; grep -E "^not ok|passed|failed|tests," $OUT/gpu_test.txt | tail -8
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det.txt
