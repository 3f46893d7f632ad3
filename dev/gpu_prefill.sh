#!/usr/bin/env bash
# dev/gpu_prefill.sh — one device call for the prefill work (issue 6, branch cudapre): the prefill
# kernel labs, `lilac bench` at 4K in a few switch settings, then the GPU tests with the time left.
# Bundle layout next to this script (as dev/gpu_session.sh): lilac, gpu_test, lab/*, lib/ (the
# shared libraries the device lacks), shared/fixtures/{tiny,small}. Logs go to $OUT.
#   usage: [TEST_ENV="A=1 B=2"] [TEST_ENV2="..."] gpu_prefill.sh BUDGET_S "ENV1" "ENV2" ...
#   (each ENV: a bench variant, e.g. "LILAC_CUDA_GEMM_BM=64", `--quick --max-len 4096`, or "full:ENV"
#   for the 10-length bench; TEST_ENV / TEST_ENV2: the switches of one / a second GPU test run)
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/gpu-out}
export LILAC_SHARED=$PWD/shared
export LD_LIBRARY_PATH=$PWD/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
t0=$(date +%s)
budget=${1:-230}
shift
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
for k in gdn gdn_chunk gemm attn; do
  [ -x lab/$k ] || continue
  echo "== lab $k"; timeout 60 ./lab/$k > "$OUT/lab_$k.txt" 2>&1; echo "rc=$?" >> "$OUT/lab_$k.txt"; cat "$OUT/lab_$k.txt"
done
i=0
for envs in "$@"; do
  i=$((i + 1))
  echo "== bench $i: $envs" | tee "$OUT/bench_$i.txt"
  if [ "${envs#full:}" != "$envs" ]; then   # "full:ENV...": the 10-length bench (prefill and decode means, 4K/4K)
    env ${envs#full:} timeout 150 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o "$OUT/bench_$i" >> "$OUT/bench_$i.txt" 2>&1
  else
    env $envs timeout 60 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 -o "$OUT/bench_$i" >> "$OUT/bench_$i.txt" 2>&1
  fi
  echo "rc=$?" >> "$OUT/bench_$i.txt"
  grep -E "len|peak|breakdown|p\.gdn|p\.moe|p\.attn|rc=" "$OUT/bench_$i.txt" | head -40
done
# the GPU tests with TEST_ENV, then (if set and time is left) again with TEST_ENV2
n=0
for tenv in "${TEST_ENV:-}" ${TEST_ENV2:+"$TEST_ENV2"}; do
  n=$((n + 1))
  left=$((budget - ($(date +%s) - t0) - 5))
  echo "== gpu tests $n (timeout ${left}s, env: $tenv)" | tee "$OUT/gpu_test_$n.txt"
  [ $left -gt 10 ] && env $tenv timeout $left ./gpu_test >> "$OUT/gpu_test_$n.txt" 2>&1
  echo "rc=$?" >> "$OUT/gpu_test_$n.txt"
  grep -E "not ok|# |rc=" "$OUT/gpu_test_$n.txt"
done
echo "== total $(( $(date +%s) - t0 ))s"
