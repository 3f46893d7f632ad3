#!/usr/bin/env bash
# stage_gpu.sh DIR — builds everything the GPU training run needs into DIR: train.py, gpu_run.sh, the
# corpus sources (corpus.py, data.py, tokenizer.py: gpu_run.sh can regenerate the data there), tok/
# (the shipped model's tokenizer: a retrain keeps the same ids, so the tokenizer tests still hold) and
# a pre-tokenized data.npz. Then, on the GPU machine: OUT=... MINUTES=5 DIR/gpu_run.sh
#
#   N=600000 SEED=1 WORKERS=2 train/stage_gpu.sh /work/main/.gpu-train
#   NO_DATA=1 train/stage_gpu.sh DIR     # no data.npz: gpu_run.sh makes it there (needs `tokenizers`)
#
# DIR travels to the device as a carried ignored folder (at most 64 MiB with everything else carried);
# 600,000 conversations are about 33 MiB. Refuses to go on if DIR would be larger than MAX_MB.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
DIR=$1
N=${N:-600000}
SEED=${SEED:-1}
WORKERS=${WORKERS:-2}
MAX_MB=${MAX_MB:-56}
mkdir -p "$DIR/tok"
cp "$HERE/train.py" "$HERE/gpu_run.sh" "$HERE/corpus.py" "$HERE/data.py" "$HERE/tokenizer.py" "$DIR/"
chmod +x "$DIR/gpu_run.sh"
for f in tokenizer.json tokenizer_config.json chat_template.jinja; do
    cp "$ROOT/models/lilac-demo/$f" "$DIR/tok/"
done
rm -f "$DIR/data.npz"
if [ -z "${NO_DATA:-}" ]; then
    python3 "$HERE/data.py" --tokenizer "$DIR/tok" --n "$N" --seed "$SEED" --workers "$WORKERS" --out "$DIR/data.npz"
fi
# what was staged, for the run's record
{
    echo "staged $(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "N=$N SEED=$SEED WORKERS=$WORKERS NO_DATA=${NO_DATA:-}"
} > "$DIR/STAGED.txt"
mb=$(du -sm "$DIR" | cut -f1)
echo "$DIR: ${mb} MiB"
if [ "$mb" -gt "$MAX_MB" ]; then
    echo "$DIR is larger than $MAX_MB MiB: lower N" >&2
    exit 1
fi
