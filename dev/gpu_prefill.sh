#!/usr/bin/env bash
# dev/gpu_prefill.sh — one device call for the prefill work (issue 6, branch cudapre): the prefill
# kernel labs, `lilac bench` at 4K in a few switch settings, then the GPU tests with the time left.
# Bundle layout next to this script (as dev/gpu_session.sh): lilac, gpu_test, lab/*, lib/ (the
# shared libraries the device lacks), shared/fixtures/{tiny,small}. Logs go to $OUT.
#   usage: [TEST_ENV="A=1 B=2"] gpu_prefill.sh BUDGET_S "ENV1" "ENV2" ...
#   (each ENV: a bench variant, e.g. "LILAC_CUDA_GEMM_BM=128"; TEST_ENV: the switches the GPU tests run with)
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/gpu-out}
export LILAC_SHARED=$PWD/shared
export LD_LIBRARY_PATH=$PWD/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
t0=$(date +%s)
budget=${1:-230}
shift
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
for k in gdn gemm attn; do
  [ -x lab/$k ] || continue
  echo "== lab $k"; timeout 60 ./lab/$k > "$OUT/lab_$k.txt" 2>&1; echo "rc=$?" >> "$OUT/lab_$k.txt"; cat "$OUT/lab_$k.txt"
done
i=0
for envs in "$@"; do
  i=$((i + 1))
  echo "== bench $i: $envs" | tee "$OUT/bench_$i.txt"
  env $envs timeout 60 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 -o "$OUT/bench_$i" >> "$OUT/bench_$i.txt" 2>&1
  echo "rc=$?" >> "$OUT/bench_$i.txt"
  grep -E "len|peak|breakdown|p\.gdn|p\.moe|p\.attn|rc=" "$OUT/bench_$i.txt" | head -40
done
left=$((budget - ($(date +%s) - t0) - 5))
echo "== gpu tests (timeout ${left}s, env: ${TEST_ENV:-})" | tee "$OUT/gpu_test.txt"
[ $left -gt 10 ] && env ${TEST_ENV:-} timeout $left ./gpu_test >> "$OUT/gpu_test.txt" 2>&1
echo "rc=$?" >> "$OUT/gpu_test.txt"
cat "$OUT/gpu_test.txt" | tail -40
echo "== total $(( $(date +%s) - t0 ))s"
