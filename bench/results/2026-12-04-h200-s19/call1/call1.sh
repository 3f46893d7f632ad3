#!/bin/bash
# session 19 call 1: A/B at the 4096/1024 point (3 rounds, interleaved) of session 18's uncommitted
# switches, all on in `lilac`: the flash-decoding merge weights once per (head, warp) (lilac-mw0:
# off), stage-filling BF16 tiles in the GDN in-projection (lilac-mixbf0: off), the RMSNorm gain
# before the wait (lilac-gpre: on, LN_GPRE=3), and session 19's combine inside the flash-decoding
# launch (lilac-join = lilac + FD_JOIN); --deterministic digests; a trace of lilac-join's build
# (lilac-jtrace) with the last-block stamps; join-fold3: lilac-join with the router fold in attention
# layers too (LILAC_CUDA_FOLD=3), whose x_old term the join computes
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in lilac lilac-mw0 lilac-mixbf0 lilac-join; do timeout 90 ./$v $Q --deterministic > $OUT/det_$v.txt 2>&1; echo "det $v: $(grep -o 'digest [0-9a-f]*' $OUT/det_$v.txt | head -1)"; done
for r in 0 1 2; do
  V="lilac lilac-join lilac-mixbf0 lilac-mw0 lilac-gpre join-fold3"; [ $r = 2 ] && V="lilac lilac-join lilac-mixbf0"
  for v in $V; do
    if [ $v = join-fold3 ]; then LILAC_CUDA_FOLD=3 timeout 90 ./lilac-join $Q > $OUT/r${r}_$v.txt 2>&1
    else timeout 90 ./$v $Q > $OUT/r${r}_$v.txt 2>&1; fi
    echo "r$r $v : $(grep '4096/1024' $OUT/r${r}_$v.txt | head -1) | $(grep -E 'len +(256|4096)' $OUT/r${r}_$v.txt | sed 's/.*decode/decode/' | tr '\n' ' ')"
  done
done
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-jtrace $Q > $OUT/trace.txt 2>&1; echo "trace: $(grep '4096/1024' $OUT/trace.txt)"
grep -A 60 "lean trace at position 4159" $OUT/trace.txt | head -70
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace.txt
