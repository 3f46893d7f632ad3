#!/bin/bash
# session 23 call 10: shared-memory bank conflicts of every decode kernel (ncu metrics, one launch
# of each kind inside the decode graph, replayed alone), for the next session's survey.
B=/tmp/b; mkdir -p $B; tar xJf .cuda-wt/b.tar.xz -C $B; cd $B
export LD_LIBRARY_PATH=$B/lib PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
Q="bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0"
M=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum,gpu__time_duration.sum,launch__registers_per_thread
timeout 240 ncu --csv --metrics $M --kernel-name regex:"k_l|k_attn" --launch-skip 2000 --launch-count 24 ./lilac $Q > $OUT/ncu.csv 2> $OUT/ncu_err.txt
echo "ncu rc $?"; tail -3 $OUT/ncu_err.txt
python3 - $OUT/ncu.csv <<'PY' || true
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows: sys.exit(0)
h = rows[0]; ki = h.index("Kernel Name"); mi = h.index("Metric Name"); vi = h.index("Metric Value"); ii = h.index("ID")
d = collections.OrderedDict()
for r in rows[1:]:
    d.setdefault((r[ii], r[ki][:40]), {})[r[mi]] = r[vi]
for (i, k), m in d.items():
    g = lambda n: m.get(n, "?")
    print(f"{i:>3} {k:40s} t={g('gpu__time_duration.sum'):>8} regs={g('launch__registers_per_thread'):>4} "
          f"ld inst={g('smsp__inst_executed_op_shared_ld.sum'):>8} wf={g('l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum'):>8} "
          f"conf={g('l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum'):>8} | st inst={g('smsp__inst_executed_op_shared_st.sum'):>7} "
          f"wf={g('l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum'):>7} conf={g('l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum'):>7}")
PY
