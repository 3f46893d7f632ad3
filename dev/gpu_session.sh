#!/usr/bin/env bash
# dev/gpu_session.sh — one batched GPU session: kernel lab, GPU tests, and `lilac bench`, each under
# a timeout, logs into $OUT (the device tool's output folder) or ./gpu-out. Expects the binaries
# built on the development machine next to it: lilac, gpu_test, lab/*.
#   usage: gpu_session.sh [lab] [test] [bench-quick|bench-full] [profile]
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/gpu-out}
export LILAC_SHARED=${LILAC_SHARED:-$PWD/shared}
export LD_LIBRARY_PATH=$PWD/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
for what in "$@"; do
  case $what in
    lab) for k in gemv moe gdn attn; do echo "== lab $k"; timeout 120 ./lab/$k 2>&1 | tee "$OUT/lab_$k.txt"; done ;;
    test) echo "== gpu tests"; timeout 300 ./gpu_test 2>&1 | tee "$OUT/gpu_test.txt" ;;
    test-quick) echo "== gpu tests (quick)"; timeout 200 ./gpu_test --quick 2>&1 | tee "$OUT/gpu_test.txt" ;;
    bench-quick) echo "== bench quick"; timeout 300 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda --quick -o "$OUT/bench_quick" 2>&1 | tee "$OUT/bench_quick.txt" ;;
    bench-full) echo "== bench full"; timeout 500 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o "$OUT/bench_full" 2>&1 | tee "$OUT/bench_full.txt" ;;
  esac
done
