#!/bin/bash
# session 22 call 3: with LN_GDN_DELAY=1000 now the default ("base"), A/B at 4096/1024, 3 rounds:
#   dr48        -DLN_DOWN_REGS=48 (the MoE down at 48 registers, 24-52 B of spills: the input
#               projection's 16 warps then fit beside its 18 in every sub-partition's register file)
#   dr48gv1/2   dr48 + -DLN_GEMV_DELAY=1000 / 2000 (input projections' pre-wait tiles later, so that
#               they do not compete with the down's last tiles)
#   dr48gv1p2   dr48gv1 with LILAC_CUDA_LN_PRE=2 (two stages before the wait)
#   basep2      base with LILAC_CUDA_LN_PRE=2
#   gdw15 / gdw3 -DLN_GDN_DELAY_W=1500 / 3000 (fused GDN: the state at +1 us, W_out / fold slices later)
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
run() { local n=$1 b=$2; shift 2; env "$@" timeout 90 ./$b $Q $EXTRA > $OUT/$n.txt 2>&1; }
V="base:lilac-base dr48:lilac-dr48 dr48gv1:lilac-dr48gv1 dr48gv2:lilac-dr48gv2 dr48gv1p2:lilac-dr48gv1:LILAC_CUDA_LN_PRE=2 basep2:lilac-base:LILAC_CUDA_LN_PRE=2 gdw15:lilac-gdw15 gdw3:lilac-gdw3"
one() { local n=${1%%:*} r=${1#*:}; local b=${r%%:*} e=${r#*:}; [ "$e" = "$r" ] && e=; run $2$n $b $e; }
for v in base:lilac-base dr48gv1:lilac-dr48gv1 gdw15:lilac-gdw15; do EXTRA=--deterministic one $v det_; n=${v%%:*}; echo "det $n: $(grep -o 'digest [0-9a-f]*' $OUT/det_$n.txt | head -1)"; done
for r in 0 1 2; do
  for v in $V; do
    one $v r${r}_; n=${v%%:*}
    echo "r$r $n : $(grep '4096/1024' $OUT/r${r}_$n.txt | head -1 | grep -o 'decode [0-9.]*') | 256: $(grep -E 'len +256' $OUT/r${r}_$n.txt | grep -oE 'decode +[0-9.]+' | head -1)"
  done
done
cd $OUT && tar czf all.tgz *.txt && rm -f r*_*.txt det_*.txt trace_*.txt
