"""train.py — trains the lilac demonstration model (architecture qwen3_5_moe) on the synthetic corpus
and exports it as an HF-layout safetensors folder that lilac loads directly.

    python3 train/train.py --data data.npz --tokenizer TOKDIR --out MODELDIR --minutes 4 [--device cuda]

The model is transformers' Qwen3_5MoeForCausalLM with a small configuration (CONFIG below) and the
real layer pattern: three Gated DeltaNet layers then one gated full-attention layer, each followed by
a mixture of routed experts (top-2 of 8) plus a gated shared expert. The loss is taken only on what
the assistant writes (data.py's mask), plus the router's load-balancing loss. Training runs for a wall-
clock budget (the learning rate follows the elapsed fraction of it), and the folder is exported every
`--save-every` seconds and at the end, so a run that is cut short still leaves a usable model.

Written to MODELDIR: config.json (top-level qwen3_5_moe with text_config, as the released checkpoints),
model.safetensors (BF16; A_log and linear_attn.norm.weight in F32, as released), generation_config.json,
the tokenizer files, and train_log.csv (step, seconds, tokens, loss, lr) + loss.png.
"""
import argparse
import csv
import json
import math
import os
import shutil
import time

import numpy as np
import torch
import torch.nn.functional as F

CONFIG = dict(
    hidden_size=256, layer_types=["linear_attention"] * 3 + ["full_attention"],
    num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=64, linear_value_head_dim=64,
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128,
)


def text_config(vocab, eos):
    c = CONFIG
    rot = int(c["head_dim"] * 0.25)
    half = rot // 2
    sec = [half - 2 * (half // 3), half // 3, half // 3]
    return dict(
        model_type="qwen3_5_moe_text", vocab_size=vocab, hidden_size=c["hidden_size"],
        num_hidden_layers=len(c["layer_types"]), layer_types=c["layer_types"], full_attention_interval=4,
        num_attention_heads=c["num_attention_heads"], num_key_value_heads=c["num_key_value_heads"],
        head_dim=c["head_dim"], attn_output_gate=True, attention_bias=False,
        linear_num_key_heads=c["linear_num_key_heads"], linear_num_value_heads=c["linear_num_value_heads"],
        linear_key_head_dim=c["linear_key_head_dim"], linear_value_head_dim=c["linear_value_head_dim"],
        linear_conv_kernel_dim=4, mamba_ssm_dtype="float32",
        num_experts=c["num_experts"], num_experts_per_tok=c["num_experts_per_tok"],
        moe_intermediate_size=c["moe_intermediate_size"],
        shared_expert_intermediate_size=c["shared_expert_intermediate_size"],
        hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=4096, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                             mrope_interleaved=True, mrope_section=sec),
        partial_rotary_factor=0.25, mtp_num_hidden_layers=0, mtp_use_dedicated_embeddings=False,
        bos_token_id=None, eos_token_id=eos, pad_token_id=None,
        router_aux_loss_coef=0.01, output_router_logits=False, use_cache=True, dtype="bfloat16",
        initializer_range=0.02,
    )


def build_model(vocab, eos):
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
    tc = text_config(vocab, eos)
    cfg = Qwen3_5MoeTextConfig(**{k: v for k, v in tc.items() if k not in ("model_type", "dtype")})
    cfg._attn_implementation = "sdpa"
    return Qwen3_5MoeForCausalLM(cfg), tc


def special_ids(tokdir):
    tj = json.load(open(os.path.join(tokdir, "tokenizer.json"), encoding="utf-8"))
    ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
    vocab = max(max(tj["model"]["vocab"].values()), max(ids.values())) + 1
    return ids, vocab


def export(model, tc, tokdir, out, log_rows):
    """The folder lilac reads: released-checkpoint names (model.language_model.*, lm_head.weight)."""
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    keep_f32 = ("linear_attn.A_log", "linear_attn.norm.weight")
    tensors = {}
    for k, v in model.state_dict().items():
        nk = "model.language_model." + k[len("model."):] if k.startswith("model.") else k
        v = v.detach().to("cpu")
        tensors[nk] = (v.float() if nk.endswith(keep_f32) else v.to(torch.bfloat16)).contiguous()
    tmp = os.path.join(out, "model.safetensors.tmp")
    save_file(tensors, tmp, metadata={"format": "pt"})
    os.replace(tmp, os.path.join(out, "model.safetensors"))
    V = tc["vocab_size"]
    config = dict(architectures=["Qwen3_5MoeForConditionalGeneration"], model_type="qwen3_5_moe", text_config=tc,
                  vision_config=dict(model_type="qwen3_5_moe_vision", depth=1, hidden_size=8,
                                     out_hidden_size=tc["hidden_size"]),
                  tie_word_embeddings=False, transformers_version="5.17.0")
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=2)
    ids, _ = special_ids(tokdir)
    gen = dict(bos_token_id=ids["<|endoftext|>"], eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
               pad_token_id=ids["<|endoftext|>"], do_sample=False, transformers_version="5.17.0")
    json.dump(gen, open(os.path.join(out, "generation_config.json"), "w"), indent=2)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if os.path.exists(os.path.join(tokdir, f)):  # the GPU run carries only what it needs
            shutil.copy(os.path.join(tokdir, f), os.path.join(out, f))
    with open(os.path.join(out, "train_log.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "seconds", "tokens", "loss", "lr"])
        w.writerows(log_rows)
    assert V == model.lm_head.weight.shape[0]


def plot(log_rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    steps = [r[0] for r in log_rows]
    loss = [r[3] for r in log_rows]
    smooth, e = [], None
    for v in loss:  # batches are bucketed by length (so by task mix): the raw curve is noisy
        e = v if e is None else 0.9 * e + 0.1 * v
        smooth.append(e)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, loss, lw=0.8, alpha=0.45, label="per logged step")
    ax.plot(steps, smooth, lw=1.8, label="moving average")
    ax.legend()
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss on assistant tokens (log scale)")
    ax.set_title("lilac-demo training loss")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class Batches:
    """Random batches of whole conversations of similar length, padded to the longest, at most
    batch_tokens tokens (rows x padded length) each."""

    def __init__(self, data, batch_tokens, pad, seed):
        self.ids = data["ids"].astype(np.int64)
        self.mask = data["mask"]
        self.off = data["offsets"]
        self.lens = np.diff(self.off)
        self.batch_tokens, self.pad = batch_tokens, pad
        self.rng = np.random.default_rng(seed)
        self.queue = []
        self.epoch = 0

    def refill(self):
        order = self.rng.permutation(len(self.lens))
        batches = []
        for s in range(0, len(order), 8192):  # sort within windows: little padding, still random
            win = order[s:s + 8192]
            win = win[np.argsort(self.lens[win], kind="stable")]
            i = 0
            while i < len(win):
                j = i
                while j < len(win) and (j - i + 1) * self.lens[win[j]] <= self.batch_tokens:
                    j += 1
                batches.append(win[i:max(j, i + 1)])
                i = max(j, i + 1)
        self.rng.shuffle(batches)
        self.queue = batches
        self.epoch += 1

    def next(self):
        if not self.queue:
            self.refill()
        rows = self.queue.pop()
        L = int(self.lens[rows].max())
        x = np.full((len(rows), L), self.pad, np.int64)
        m = np.zeros((len(rows), L), np.float32)
        for r, c in enumerate(rows):
            a, b = self.off[c], self.off[c + 1]
            x[r, :b - a] = self.ids[a:b]
            m[r, :b - a] = self.mask[a:b]
        return torch.from_numpy(x), torch.from_numpy(m)


def replot(csv_path, png_path):
    """Redraws loss.png from a train_log.csv (python3 train/train.py --replot LOG.csv OUT.png)."""
    with open(csv_path) as f:
        rows = [[float(x) for x in r] for r in list(csv.reader(f))[1:]]
    plot(rows, png_path)


def main():
    if len(os.sys.argv) == 4 and os.sys.argv[1] == "--replot":
        return replot(os.sys.argv[2], os.sys.argv[3])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=4.0, help="wall-clock training budget")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: budget only)")
    ap.add_argument("--batch-tokens", type=int, default=65536)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--final-lr", type=float, default=0.1,
                    help="the cosine schedule ends at this fraction of --lr (at the end of the time budget)")
    ap.add_argument("--save-every", type=float, default=60.0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    dev = torch.device(a.device)
    ids, vocab = special_ids(a.tokenizer)
    vocab = (vocab + 63) // 64 * 64
    model, tc = build_model(vocab, ids["<|endoftext|>"])
    model.to(dev).train()
    nparam = sum(p.numel() for p in model.parameters())
    print(f"model: {nparam / 1e6:.2f}M parameters, vocab {vocab}, device {dev}", flush=True)

    data = np.load(a.data)
    batches = Batches(data, a.batch_tokens, ids["<|endoftext|>"], a.seed)
    print(f"data: {len(batches.lens)} conversations, {len(batches.ids)} tokens", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    budget = a.minutes * 60.0
    use_amp = dev.type == "cuda"
    log_rows, t0, last_save, step, seen = [], time.time(), time.time(), 0, 0
    ema = None
    while True:
        el = time.time() - t0
        if el >= budget or (a.steps and step >= a.steps):
            break
        frac = el / budget
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (a.final_lr + (1 - a.final_lr) * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, m = batches.next()
        x, m = x.to(dev, non_blocking=True), m.to(dev, non_blocking=True)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_amp):
            out = model(input_ids=x, output_router_logits=True, use_cache=False)
        logits = out.logits[:, :-1].float()
        tgt, w = x[:, 1:], m[:, 1:]
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none")
        loss = (ce * w.reshape(-1)).sum() / w.sum().clamp(min=1)
        total = loss + tc["router_aux_loss_coef"] * out.aux_loss
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += x.numel()
        if step % 10 == 0 or step == 1:
            lv = loss.item()
            ema = lv if ema is None else 0.9 * ema + 0.1 * lv
            log_rows.append([step, round(time.time() - t0, 2), seen, round(lv, 5), lr])
            if step % 100 == 0 or step == 1:
                print(f"step {step} t={time.time() - t0:.0f}s tokens={seen / 1e6:.1f}M loss={lv:.4f} "
                      f"ema={ema:.4f} lr={lr:.2e} epoch={batches.epoch}", flush=True)
        if time.time() - last_save > a.save_every:
            export(model, tc, a.tokenizer, a.out, log_rows)
            last_save = time.time()
    export(model, tc, a.tokenizer, a.out, log_rows)
    plot(log_rows, os.path.join(a.out, "loss.png"))
    print(f"done: {step} steps, {seen / 1e6:.1f}M tokens in {time.time() - t0:.0f}s, final loss "
          f"{log_rows[-1][3] if log_rows else float('nan')}", flush=True)


if __name__ == "__main__":
    main()
