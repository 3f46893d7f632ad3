#!/usr/bin/env bash
# after_gpu.sh RESULT_DIR — everything after the GPU training run, in one command, on this machine.
# RESULT_DIR is the run's fetched $OUT: lilac-demo/ (model.safetensors, config.json,
# generation_config.json, tokenizer files, train_log.csv, loss.png) and train_stdout.txt.
#
#   1. checks the run kept the shipped tokenizer, then copies the weights and configs into
#      models/lilac-demo/ and the training log, loss plot and console log into bench/results/;
#   2. builds lilac if needed and writes the held-out report (24 per task, both modes, four formats):
#      bench/results/demo-model.md and bench/results/demo-model-cpu.json.gz (about 10 minutes);
#   3. train/floors.py: the previous report against the new one task by task (regressions named), the
#      test's own samples measured, and FLOORS / FORMAT_FLOORS / KNOWN_GAPS rewritten in
#      tests/py/test_demo_model.py;
#   4. runs tests/py/test_demo_model.py and tests/py/test_demo_corpus.py (SKIP_TESTS=1 to skip).
# PER_TASK= and FORMATS= shrink step 2 (a quick check of this script only: the report must be 24 and all four).
#
# Nothing is committed: `git diff` shows every change, and `git checkout -- models/lilac-demo bench/results
# tests/py/test_demo_model.py` puts the previous model back if the new one is worse.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 RESULT_DIR" >&2; exit 2; }
RES=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
cd "$ROOT"
M=models/lilac-demo
B=bench/results
SRC=$RES/lilac-demo
[ -f "$SRC/model.safetensors" ] || { echo "$SRC/model.safetensors is missing" >&2; exit 1; }
for f in tokenizer.json tokenizer_config.json; do
    cmp -s "$SRC/$f" "$M/$f" || { echo "$SRC/$f differs from $M/$f: the run did not keep the shipped tokenizer" >&2; exit 1; }
done
grep -q '^done:' "$RES/train_stdout.txt" || echo "warning: $RES/train_stdout.txt has no 'done:' line (run cut short?)" >&2

echo "== 1. copy =="
OLD=$(mktemp -d /tmp/lilac-after-gpu.XXXXXX)
cp "$B/demo-model-cpu.json.gz" "$OLD/old.json.gz"   # the previous model's report, for the comparison
cp "$SRC/model.safetensors" "$SRC/config.json" "$SRC/generation_config.json" "$M/"
cp "$SRC/train_log.csv" "$B/demo-model-train-log.csv"
cp "$SRC/loss.png" "$B/demo-model-loss.png"
cp "$RES/train_stdout.txt" "$B/demo-model-train-stdout.txt"
grep '^done:' "$B/demo-model-train-stdout.txt" || true

echo "== 2. build and evaluate (about 10 minutes) =="
[ -x build/lilac ] || make -j2 CUDA=0
python3 train/evaluate.py --per-task "${PER_TASK:-24}" --formats "${FORMATS:-safetensors,bf16,q8_0,q4_k_m}" \
    --md "$B/demo-model.md" --json "$B/demo-model-cpu.json.gz" > "$OLD/eval.txt" 2>&1 \
    || { tail -30 "$OLD/eval.txt"; exit 1; }
sed -n '/^## Per task/,/^## Per format/p' "$B/demo-model.md" | head -n -1

echo "== 3. comparison and floors =="
python3 train/floors.py --old "$OLD/old.json.gz" --new "$B/demo-model-cpu.json.gz" --apply

if [ -z "${SKIP_TESTS:-}" ]; then
    echo "== 4. tests =="
    python3 -m pytest -q tests/py/test_demo_model.py tests/py/test_demo_corpus.py 2>&1 | tail -15
fi
echo
echo "changed (nothing committed):"
git status --short -- "$M" "$B" tests/py/test_demo_model.py
cat <<EOF

Left by hand: models/README.md (the figures and the training line), train/README.md ("Retraining":
the run's wall time and steps, from $B/demo-model-train-stdout.txt), and the CUDA comparison
($B/demo-model-cuda.json.gz is the previous model's until a CUDA run of this one replaces it).
EOF
