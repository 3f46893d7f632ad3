#!/bin/bash
# session 28 call 4 (carry [".cuda-wt/d.tar.xz"]): the in-graph trace (LILAC_LN_TRACE builds) at position
# 4159: HEAD; GDN_ATOM=0 (the ordered form); -DLN_TOPK2=1 (moe.gateup's stamp 44, top-k done);
# -DFD_MINB_MMA=2 (attn.fd's entry beside the qkv projection); ATT_COUT=1 on HEAD and on FD_MINB_MMA=2
# (attn.cout in place of attn.combine + attn.out_gemv).
B=/tmp/b3; mkdir -p $B; tar xJf .cuda-wt/d.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
for v in "trace:trace:" "atom0:trace:LILAC_CUDA_GDN_ATOM=0" "tk:tracetk:" "fd:tracefd:" "cout:trace:LILAC_CUDA_ATT_COUT=1" "coutfd:tracefd:LILAC_CUDA_ATT_COUT=1"; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env LILAC_CUDA_LN_TRACE=1 $e timeout 90 ./lilac-$b $Q > $OUT/$n.txt 2>&1
  echo "== $n"; grep -A 12 "lean trace at position 4159" $OUT/$n.txt | head -13
done
xz -9 $OUT/*.txt 2>/dev/null; ls -la $OUT
