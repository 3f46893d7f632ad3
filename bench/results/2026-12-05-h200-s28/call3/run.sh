#!/bin/bash
# session 28 call 3 (carry [".cuda-wt/d.tar.xz"]): the in-graph trace (LILAC_LN_TRACE builds, GDN_ATOM=1
# the default) at position 4159 of HEAD, -DLN_TOPK2=1 (gate/up's stamp 44: top-k done) and
# -DFD_MINB_MMA=2 (attn.fd's entry beside the qkv projection, attn.combine / attn.out_gemv's gaps).
B=/tmp/b3; mkdir -p $B; tar xJf .cuda-wt/d.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:trace:" "tk:tracetk:" "fd:tracefd:" "atom0:trace:LILAC_CUDA_GDN_ATOM=0"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./lilac-$b $Q > $OUT/$n.txt 2>&1
  echo "== $n"; grep -A 11 "lean trace at position 4159" $OUT/$n.txt | head -12
done
xz -9 $OUT/*.txt 2>/dev/null; ls -la $OUT
