"""MLX affine 4-bit fixture made from shared/fixtures/small, with golden logits computed by the
reference model (transformers) on the dequantized weights — so that lilac's MLX loading (and
`lilac convert` from an MLX folder) is checked against an exact reference.

Run on a machine with torch + transformers >= 5.17 (the GPU machine has both; everything runs on
the CPU in float32):
    python3 tests/gen/gen_mlx_fixture.py ../shared/fixtures/small OUTDIR
then place OUTDIR as shared/fixtures/small-mlx4 (tests/test_convert.c looks there and skips with a
message when it is absent).

What it writes (the layout of mlx-community/Qwen3.6-35B-A3B-4bit):
  config.json             small's config + MLX's "quantization" block (and "quantization_config",
                          as mlx-lm saves both): bits 4, group_size 64, with per-module 8-bit
                          overrides for every layer's `mlp.gate` and `mlp.shared_expert_gate`.
  model.safetensors       mlx-lm's names and transforms, quantized weights as X.weight (U32 codes),
                          X.scales and X.biases (BF16)
  golden.safetensors      tokens (small's 300-token prompt), logits [T, V] (one prefill),
                          greedy.tokens [24]

Sources:
  * tensor naming and transforms: mlx-lm `mlx_lm/models/qwen3_5_moe.py` / `qwen3_5.py`
    (Model.sanitize): `model.language_model.X` -> `language_model.model.X`, `lm_head.weight` ->
    `language_model.lm_head.weight`, `model.visual.*` and `mtp.*` dropped, fused
    `mlp.experts.gate_up_proj` [E, 2FF, H] split into `mlp.switch_mlp.gate_proj.weight` and
    `mlp.switch_mlp.up_proj.weight` [E, FF, H], `mlp.experts.down_proj` ->
    `mlp.switch_mlp.down_proj.weight`, conv1d [C, 1, K] -> [C, K, 1] (moveaxis), and +1 added to
    the zero-centred norms (input_layernorm, post_attention_layernorm, final norm, q_norm,
    k_norm; not linear_attn.norm) in the weights' dtype (bf16).
  * which modules are quantized: mlx `nn.quantize` quantizes every Linear / Embedding (and
    mlx-lm's SwitchLinear) whose input dim is a multiple of the group size: embed_tokens,
    lm_head, all projections, experts, router; not norms, conv1d, A_log, dt_bias. mlx-lm's
    quant_predicate for this model gives `mlp.gate` and `mlp.shared_expert_gate` 8 bits.
  * the affine formula, as MLX documents it for mx.quantize (mode "affine"):
    https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.quantize.html
    per group of 64 consecutive elements of a row: scale = (max - min) / (2^bits - 1),
    bias = min, q = round((w - bias) / scale), w_hat = scale * q + bias; codes packed
    little-endian into uint32 words, element 0 in the lowest bits. Scale and bias are stored
    in bf16 (the weights' dtype); the codes are chosen against the rounded values, and the
    golden model uses exactly w_hat = float(scale_bf16) * q + float(bias_bf16) in fp32 — what
    a dequantizing engine computes.
"""
import json
import math
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file

torch.set_grad_enabled(False)

GROUP = 64
NORM_SUFFIXES = ("input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_norm.weight",
                 "self_attn.k_norm.weight")


def affine_quantize(w: torch.Tensor, bits: int):
    """w [..., cols] float -> (codes u32 [..., cols*bits/32], scales bf16, biases bf16, w_hat fp32)."""
    nmax = (1 << bits) - 1
    shp = w.shape
    g = w.float().reshape(-1, shp[-1] // GROUP, GROUP)
    lo, hi = g.min(-1).values, g.max(-1).values
    bias = lo.to(torch.bfloat16)
    scale = ((hi - bias.float()) / nmax).to(torch.bfloat16)
    s, b = scale.float().unsqueeze(-1), bias.float().unsqueeze(-1)
    q = torch.where(s > 0, torch.round((g - b) / torch.where(s > 0, s, torch.ones_like(s))), torch.zeros_like(g))
    q = q.clamp(0, nmax).to(torch.int64)
    w_hat = (s * q.float() + b).reshape(shp)
    per = 32 // bits
    qw = q.reshape(-1, shp[-1] // per, per)
    words = torch.zeros(qw.shape[:2], dtype=torch.int64)
    for k in range(per):
        words |= qw[..., k] << (bits * k)
    if not hasattr(torch, "uint32"):
        sys.exit("torch >= 2.3 (torch.uint32) is needed to write MLX's U32 codes")
    codes = words.to(torch.uint32)
    codes = codes.reshape(*shp[:-1], shp[-1] * bits // 32)
    return codes, scale.reshape(*shp[:-1], -1), bias.reshape(*shp[:-1], -1), w_hat


def main(src, out):
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    tc = cfg["text_config"]
    idx = json.load(open(os.path.join(src, "model.safetensors.index.json")))
    hf = {}
    for shard in sorted(set(idx["weight_map"].values())):
        hf.update(load_file(os.path.join(src, shard)))
    n_layer, FF = tc["num_hidden_layers"], tc["moe_intermediate_size"]

    mlx = {}       # name -> tensor written to model.safetensors
    ref = {}       # HF name -> fp32 tensor the reference model gets (dequantized / shifted back)
    quant_cfg = {"group_size": GROUP, "bits": 4, "mode": "affine"}

    def put_quant(module, w, bits, hf_name, hf_slice=None):
        codes, sc, bi, w_hat = affine_quantize(w, bits)
        mlx[module + ".weight"], mlx[module + ".scales"], mlx[module + ".biases"] = codes, sc, bi
        if bits != 4:
            quant_cfg[module] = {"group_size": GROUP, "bits": bits}
        if hf_slice is None:
            ref[hf_name] = w_hat
        else:
            ref.setdefault(hf_name, hf[hf_name].float().clone())[hf_slice] = w_hat

    for name, t in hf.items():
        if name.startswith("model.visual.") or name.startswith("mtp."):
            continue  # Model.sanitize drops them
        m = "language_model.lm_head.weight" if name == "lm_head.weight" else "language_model.model." + name[len("model.language_model."):]
        m_mod = m[: -len(".weight")] if m.endswith(".weight") else m
        if name.endswith("mlp.experts.gate_up_proj"):
            base = m.replace(".experts.gate_up_proj", ".switch_mlp")
            put_quant(base + ".gate_proj", t[:, :FF], 4, name, (slice(None), slice(0, FF)))
            put_quant(base + ".up_proj", t[:, FF:], 4, name, (slice(None), slice(FF, 2 * FF)))
        elif name.endswith("mlp.experts.down_proj"):
            put_quant(m.replace(".experts.down_proj", ".switch_mlp.down_proj"), t, 4, name)
        elif name.endswith(NORM_SUFFIXES) or name == "model.language_model.norm.weight":
            shifted = (t + 1.0).to(t.dtype)  # sanitize adds 1 in the weights' dtype
            mlx[m] = shifted
            ref[name] = shifted.float() - 1.0  # exact: the reference computes 1 + w
        elif name.endswith("conv1d.weight"):
            mlx[m] = t.moveaxis(2, 1).contiguous()  # [C, 1, K] -> [C, K, 1]
            ref[name] = t.float()
        elif t.dim() == 2 and t.shape[-1] % GROUP == 0 and not name.endswith(("A_log", "dt_bias")):
            bits = 8 if name.endswith(("mlp.gate.weight", "mlp.shared_expert_gate.weight")) else 4
            put_quant(m_mod, t, bits, name)
        else:
            mlx[m] = t
            ref[name] = t.float()

    cfg = dict(cfg)
    cfg["quantization"] = quant_cfg
    cfg["quantization_config"] = quant_cfg
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file({k: v.contiguous() for k, v in mlx.items()}, os.path.join(out, "model.safetensors"), metadata={"format": "mlx"})

    # the reference model on the dequantized weights
    from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig
    tcfg = Qwen3_5MoeTextConfig(**{k: v for k, v in tc.items() if k not in ("model_type", "dtype")})
    tcfg._attn_implementation = "eager"
    model = Qwen3_5MoeForCausalLM(tcfg).float().eval()
    sd = {("model." + k[len("model.language_model."):] if k.startswith("model.language_model.") else k): v for k, v in ref.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    gold = load_file(os.path.join(src, "golden.safetensors"))
    tokens = gold["tokens"].to(torch.int64).view(1, -1)
    o = model(input_ids=tokens, use_cache=True)
    logits = o.logits[0].float()
    pkv = o.past_key_values
    nxt = logits[-1].argmax().view(1, 1)
    greedy = []
    for _ in range(24):
        greedy.append(int(nxt))
        o = model(input_ids=nxt, past_key_values=pkv, use_cache=True)
        pkv = o.past_key_values
        nxt = o.logits[0, -1].argmax().view(1, 1)
    save_file({"tokens": gold["tokens"].contiguous(), "logits": logits.contiguous(),
               "greedy.tokens": torch.tensor(greedy, dtype=torch.int32)},
              os.path.join(out, "golden.safetensors"),
              metadata={"reference": "transformers Qwen3_5MoeForCausalLM on MLX-dequantized weights, float32, CPU, eager"})
    diff = (logits - gold["logits"].float()).abs().max().item()
    print(f"wrote {out}: {len(mlx)} tensors; |logits - small's bf16 golden| max {diff:.3f} (quantization effect)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: gen_mlx_fixture.py SMALL_FIXTURE_DIR OUTDIR")
    main(sys.argv[1], sys.argv[2])
