#!/usr/bin/env bash
# gpu_run.sh — the one training run on the GPU machine, from a folder made by stage_gpu.sh: train.py,
# tok/ (tokenizer.json, tokenizer_config.json, chat_template.jinja) and data.npz; without data.npz it
# first makes it here from corpus.py/data.py (GEN_N conversations, one process per core; needs the
# `tokenizers` package). Writes the model to $OUT/lilac-demo and the console log to
# $OUT/train_stdout.txt.
#
#   OUT=/path MINUTES=6 GEN_N=1000000 ./gpu_run.sh    [BATCH_TOKENS=131072] [LR=2e-3] [FINAL_LR=0.05] [EXTRA=...]
#
# The recipe of the session-3 run (train/README.md, "Retraining"): 6 minutes of training at about
# 0.21 s a step = about 1,700 steps of 131,072 tokens (about 225M tokens), AdamW at 2e-3 with 100
# warm-up steps and a cosine to 5 % of it at the end of the budget. In one 600-second command:
# data generation (16 cores: well under a minute for 1,000,000 conversations) + 360 s + export.
set -eo pipefail
cd "$(dirname "$0")"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-out}
mkdir -p "$OUT"
{
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
    python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
    cat STAGED.txt 2>/dev/null || true
    if [ ! -f data.npz ]; then
        echo "generating ${GEN_N:-1000000} conversations on $(nproc) cores"
        SECONDS=0
        python3 data.py --tokenizer tok --n "${GEN_N:-1000000}" --seed 1 --workers "$(nproc)" --out data.npz
        echo "data generation took ${SECONDS}s"
    fi
    # a step is bound by kernel launches (transformers' reference Gated DeltaNet loops over 64-token
    # chunks; the experts run one by one), not by arithmetic: twice the tokens per step cost little
    # more time, so the default batch is twice the first run's
    python3 train.py --data data.npz --tokenizer tok --out "$OUT/lilac-demo" --minutes "${MINUTES:-6}" \
        --batch-tokens "${BATCH_TOKENS:-131072}" --lr "${LR:-2e-3}" --final-lr "${FINAL_LR:-0.05}" \
        --save-every 50 ${EXTRA:-}
    ls -la "$OUT/lilac-demo"
} 2>&1 | tee "$OUT/train_stdout.txt"
