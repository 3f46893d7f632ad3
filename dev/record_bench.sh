#!/usr/bin/env bash
# dev/record_bench.sh — the benchmark of record on the device, from a call script after the bundle is
# unpacked (cd into it first; needs ./lilac, and ./gpu_session.sh + gpu_test + fixtures for the suite):
#   cd /tmp/b && bash $OLDPWD/dev/record_bench.sh
# The --deterministic digest of the quick bench, the full `lilac bench` (its Markdown table printed),
# then (SUITE=1) the full GPU suite. Since session 36 the suite alone takes ~10 min on an H100, past a
# device call's limit, so SUITE defaults to 0: run the suite as two calls (README). Everything raw goes to
# $OUT/all.tgz.
set -u
O=${OUT:-.}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee "$O/gpu.txt"
timeout 90 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda --quick --max-len 4096 --mem-ctx 0 --deterministic > "$O/det.txt" 2>&1
echo "det: $(grep -o 'digest [0-9a-f]*' "$O/det.txt" | head -1)"
timeout 200 ./lilac bench --synthetic qwen3.6-35b-a3b --backend cuda -o "$O/bench" > "$O/bench.txt" 2>&1
echo "== bench"; sed -n 4,24p "$O/bench/bench.md"
if [ "${SUITE:-0}" = 1 ]; then
    # the split-K MoE's tests alone first, under a short timeout (never run on a GPU before session 27:
    # a wrong cluster barrier or counter would hang); the suite skips them if they did not pass
    ./gpu_session.sh test-sk > "$O/gpu_session_sk.txt" 2>&1
    echo "sk: $(grep -E '^# .* tests' "$O/gpu_test_sk.txt" || echo 'no summary (hung or crashed)')"
    grep -E "not ok" "$O/gpu_test_sk.txt" | head -5
    if grep -qE '^# [0-9]+ tests, 0 failed' "$O/gpu_test_sk.txt"; then t=test; else t=test-nosk; fi
    ./gpu_session.sh $t > "$O/gpu_session.txt" 2>&1
    grep -E "not ok|# .* tests" "$O/gpu_test.txt" | tail -5
fi
(cd "$O" && tar czf all.tgz ./*.txt bench && rm -rf det.txt bench.txt)
