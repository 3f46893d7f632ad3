#!/usr/bin/env bash
# dev/gpu_session.sh — one batched GPU session: kernel lab, GPU tests, and `lilac bench`, each under
# a timeout, logs into $OUT (the device tool's output folder) or ./gpu-out. Expects the binaries
# built on the development machine next to it: lilac, gpu_test, lab/*.
#   usage: gpu_session.sh [lab] [test|test-sk|test-cout|test-pack|test-gdnin|test-steps|test-nosk] [bench-quick|bench-full] [profile]
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/gpu-out}
export LILAC_SHARED=${LILAC_SHARED:-$PWD/shared}
export LD_LIBRARY_PATH=$PWD/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
# SM/memory clocks, power and utilization every 0.5 s while the session runs
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 500 > "$OUT/clocks.csv" 2>&1 &
SMI=$!
for what in "$@"; do
  case $what in
    probe) echo "== lab probe"; timeout 60 ./lab/probe 2>&1 | tee "$OUT/lab_probe.txt" ;;
    lab) for k in gemv moe gdn attn probe; do echo "== lab $k"; timeout 120 ./lab/$k 2>&1 | tee "$OUT/lab_$k.txt"; done ;;
    test) echo "== gpu tests"; timeout 480 ./gpu_test 2>&1 | tee "$OUT/gpu_test.txt" ;;
    test-sk) echo "== gpu tests (split-K MoE alone)"; timeout 150 ./gpu_test --sk 2>&1 | tee "$OUT/gpu_test_sk.txt" ;;
    test-cout) echo "== gpu tests (the attention combine + out-projection, ATT_COUT)"; timeout 150 ./gpu_test --cout 2>&1 | tee "$OUT/gpu_test_cout.txt" ;;
    test-pack) echo "== gpu tests (the tile-packed MoE weights, MOE_PACK)"; timeout 150 ./gpu_test --pack 2>&1 | tee "$OUT/gpu_test_pack.txt" ;;
    test-gdnin) echo "== gpu tests (the in-projection inside the fused GDN launch, GDN_IN)"; timeout 200 ./gpu_test --gdnin 2>&1 | tee "$OUT/gpu_test_gdnin.txt" ;;
    test-steps) echo "== gpu tests (several decode steps per graph launch, GRAPH_STEPS)"; timeout 150 ./gpu_test --steps 2>&1 | tee "$OUT/gpu_test_steps.txt" ;;
    test-nosk) echo "== gpu tests (without the split-K MoE's)"; GPU_TEST_NO_SK=1 timeout 570 ./gpu_test 2>&1 | tee "$OUT/gpu_test.txt" ;;
    test-quick) echo "== gpu tests (quick)"; timeout 200 ./gpu_test --quick 2>&1 | tee "$OUT/gpu_test.txt" ;;
    bench-quick) echo "== bench quick"; timeout 300 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda --quick -o "$OUT/bench_quick" 2>&1 | tee "$OUT/bench_quick.txt" ;;
    bench-full) echo "== bench full"; timeout 420 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o "$OUT/bench_full" 2>&1 | tee "$OUT/bench_full.txt" ;;
  esac
done
kill $SMI 2>/dev/null
echo "== clocks (sm MHz, mem MHz, W, util) sampled during the session: min / median / max of SM clock"
awk -F', ' 'NR>1 && $2+0>0 {print $2+0}' "$OUT/clocks.csv" | sort -n | awk '{a[NR]=$1} END {if (NR) print a[1], a[int((NR+1)/2)], a[NR], "(" NR " samples)"}'
