#!/usr/bin/env bash
# gpu_run.sh — the one training run on the GPU machine. Expects, beside it: train.py, data.npz (from
# data.py) and tok/ (tokenizer.json + tokenizer_config.json from tokenizer.py). Writes the model to
# $OUT/lilac-demo and the console log to $OUT/train_stdout.txt.
set -eo pipefail
cd "$(dirname "$0")"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-out}
mkdir -p "$OUT"
{
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
    python3 train.py --data data.npz --tokenizer tok --out "$OUT/lilac-demo" --minutes "${MINUTES:-3.7}" \
        --save-every 50 ${EXTRA:-}
    ls -la "$OUT/lilac-demo"
} 2>&1 | tee "$OUT/train_stdout.txt"
