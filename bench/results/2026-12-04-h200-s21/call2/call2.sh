#!/bin/bash
# session 21 call 2: is the decode step's post-wait code cold in the instruction cache? (1) the
# in-graph trace of a build that runs the same code twice in a loop (LN_ICTEST: the in-projection's
# prologue, gate/up's top-k, the fused GDN kernel's fold block, the MoE down's prologue): cold
# pass vs warm pass; (2) the SASS of lean.cu (cuobjdump / nvdisasm exist there, not here); (3) if
# ncu exists: warp stall reasons over one whole decode graph (no_instruction = instruction fetch).
R=$PWD; B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
export PATH=$PATH:/usr/local/cuda/bin
echo "tools: $(ls /usr/local/cuda/bin | tr '\n' ' ')"; which ncu nsys cuobjdump nvdisasm
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
LILAC_CUDA_LN_TRACE=1 timeout 120 ./lilac-ictest $Q > $OUT/trace_ic.txt 2>&1
echo "== ictest trace"; grep -A 32 "lean trace at position 4159" $OUT/trace_ic.txt | head -34
C=$R/.cuda-wt/sass
cuobjdump -sass $C/lean.cubin 2>&1 | xz -6 > $OUT/lean.sass.xz
nvdisasm -g -c $C/lean.cubin 2>&1 | xz -6 > $OUT/lean.nvdisasm.xz
ls -la $OUT/*.xz
if command -v ncu >/dev/null; then
  M=smsp__warp_issue_stalled_no_instruction_per_warp_active.pct,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_barrier_per_warp_active.pct,smsp__warp_issue_stalled_imc_miss_per_warp_active.pct,smsp__warp_issue_stalled_wait_per_warp_active.pct,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_membar_per_warp_active.pct,smsp__warp_issue_stalled_branch_resolving_per_warp_active.pct,smsp__warp_issue_stalled_sleeping_per_warp_active.pct,smsp__warp_issue_stalled_selected_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct,smsp__warp_issue_stalled_drain_per_warp_active.pct,smsp__warp_issue_stalled_misc_per_warp_active.pct,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct,smsp__warp_issue_stalled_dispatch_stall_per_warp_active.pct,smsp__warp_issue_stalled_not_selected_per_warp_active.pct,smsp__warp_issue_stalled_tex_throttle_per_warp_active.pct,smsp__warp_issue_stalled_no_instruction_per_warp_active.pct
  timeout 150 ncu --graph-profiling graph --cache-control none --clock-control none --launch-skip 40 --launch-count 2 --metrics $M \
      ./lilac-head $Q > $OUT/ncu.txt 2>&1
  echo "== ncu rc $?"; tail -60 $OUT/ncu.txt
fi
cd $OUT && tar czf all.tgz *.txt && rm -f trace_*.txt
