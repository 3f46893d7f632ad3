#!/bin/bash
# session 21 call 5: (1) k_lgemv at 56 registers (LN_GEMV_REGS=56, 48 B of spills) so that the
# in-projection's 16 warps fit beside the MoE down's 18 in every sub-partition's register file
# (session 10 measured caps as a loss; the chain has changed since), A/B vs HEAD, 3 rounds;
# (2) ncu source counters (per-SASS-instruction warp-stall samples) of one fused GDN launch and one
# gate/up launch, replayed alone: what the fold's B·y block and the top-k wait on.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q > $OUT/$n.txt 2>&1; }
for r in 0 1 2; do
  for v in head g56; do
    run r${r}_$v lilac-$v
    echo "r$r $v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$v.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
timeout 200 ncu --section SourceCounters --section WarpStateStats --kernel-name regex:"k_lgdn|k_lmoe_gu" --launch-skip 300 --launch-count 2 \
    -o $OUT/src ./lilac-head $Q > $OUT/ncu_run.txt 2>&1
echo "== ncu rc $?"; tail -5 $OUT/ncu_run.txt
ncu -i $OUT/src.ncu-rep --page source --csv --print-source sass > $OUT/src_sass.csv 2> $OUT/src_err.txt
echo "sass csv: $(wc -l < $OUT/src_sass.csv) lines"; head -c 600 $OUT/src_sass.csv; cat $OUT/src_err.txt | head -5
ncu -i $OUT/src.ncu-rep --page details > $OUT/src_details.txt 2>&1; grep -E "k_lgdn|k_lmoe|Stall|Duration" $OUT/src_details.txt | head -20
xz -6 $OUT/src_sass.csv
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt
