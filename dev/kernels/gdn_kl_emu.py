#!/usr/bin/env python3
"""gdn_kl_emu.py — GPU test 1 (tiny fixture prefill logits vs HF fp32, mean KL) emulated on the CPU.

Issue 6: with the chunked GDN scan (LILAC_CUDA_GDN_CHUNK=1) GPU test 1 measured mean KL 5.50e-3,
with the token-serial scan 4.61e-3 (bound 5e-3), while the CPU backend on bf16 weights gets 8.5e-4.
This script runs HF transformers' own Qwen3_5MoeForCausalLM on shared/fixtures/tiny and swaps in,
one at a time, what the CUDA prefill does differently from fp32:

  W   bf16 weights (every matrix, the embedding, router and lm_head: qwen_model_requantize BF16)
  A   bf16 GEMM operands (every linear's input, as launch_gemm's bf16 A: Xb, Ob, Hb, Hs) and bf16
      attention operands (Qb, the bf16 K/V cache, the softmax weights P in the PV mma)
  gdn the GDN core: hf (transformers' fp32 chunked rule), ref64 (fp64 recurrence), step / chunk /
      chunk64 (the CPU emulations of k_gdn_step and k_gdn_chunk_{prep,scan}, dev/kernels/
      gdn_chunk_emu.c through ctypes, driven in calls of 64 tokens as the test drives the GPU;
      chunk64 = the kernel with fp64 prefix sums of the log-decays)
  noise  a relative perturbation eps * N(0, 1) of every GDN output (seeded): a stand-in for "the same
      math in another fp32 summation order", to see how much KL moves when nothing is wrong
  xnoise the same on every decoder layer's output (the residual stream X): at eps = 6e-8 (one fp32
      ulp) a stand-in for the prefill's vector-atomic MoE scatter-add, whose order differs run to run

Run: python3 dev/kernels/gdn_kl_emu.py   (needs torch, transformers >= 5.17, safetensors; builds
build/dev/libgdn_chunk_emu.so with cc if it is missing). Prints mean KL(HF || emulation) over the
150 rows, as tests/gpu/gpu_test.c computes it, and top-1 agreement.
"""
import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file

import transformers.models.qwen3_5_moe.modeling_qwen3_5_moe as M
from transformers import Qwen3_5MoeForCausalLM, Qwen3_5MoeTextConfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("LILAC_SHARED", "/work/shared")
FIX = os.path.join(SHARED, "fixtures", "tiny")
LIB = os.path.join(ROOT, "build", "dev", "libgdn_chunk_emu.so")


def load_lib():
    src = os.path.join(ROOT, "dev", "kernels", "gdn_chunk_emu.c")
    if not os.path.exists(LIB) or os.path.getmtime(LIB) < os.path.getmtime(src):
        os.makedirs(os.path.dirname(LIB), exist_ok=True)
        subprocess.check_call(["cc", "-std=c11", "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-DGDN_EMU_LIB",
                               "-o", LIB, src, "-lm"])
    lib = ctypes.CDLL(LIB)
    fp = ctypes.POINTER(ctypes.c_float)
    lib.gdn_emu_run.argtypes = [ctypes.c_int] * 7 + [fp] * 7
    lib.gdn_emu_run.restype = ctypes.c_int
    return lib


def bf16(x):
    return x.to(torch.bfloat16).to(x.dtype)


# ---------------------------------------------------------------- the knobs

class Knobs:
    act_bf16 = False
    gdn = "hf"
    noise = 0.0
    xnoise = 0.0
    rng = None


K = Knobs()
_linear = F.linear
_hf_chunk = M.torch_chunk_gated_delta_rule
_eager = M.eager_attention_forward
_lib = None
_which = {"step": (0, 0), "chunk": (1, 0), "chunk64": (1, 1), "ref64": (2, 0)}


def emu_linear(x, w, b=None):
    return _linear(bf16(x) if K.act_bf16 else x, w, b)


def emu_gdn(query, key, value, g, beta, initial_state=None, output_final_state=False,
            use_qk_l2norm_in_kernel=True, **kw):
    """The GDN core: transformers' or an emulated kernel; the output optionally perturbed."""
    if K.gdn == "hf":
        o, S = _hf_chunk(query, key, value, g=g, beta=beta, initial_state=initial_state,
                         output_final_state=output_final_state, use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel, **kw)
    else:
        assert initial_state is None and use_qk_l2norm_in_kernel and query.shape[0] == 1
        _, T, H, DK = query.shape
        DV = value.shape[-1]
        arr = [np.ascontiguousarray(t[0].detach().float().numpy()) for t in (query, key, value, beta, g)]
        o_np = np.zeros((T, H, DV), np.float32)
        S_np = np.zeros((H, DK, DV), np.float32)
        fp = ctypes.POINTER(ctypes.c_float)
        which, variant = _which[K.gdn]
        rc = _lib.gdn_emu_run(which, variant, T, H, DK, DV, 64, *[a.ctypes.data_as(fp) for a in arr],
                              o_np.ctypes.data_as(fp), S_np.ctypes.data_as(fp))
        assert rc == 0
        o = torch.from_numpy(o_np)[None]
        S = torch.from_numpy(S_np)[None] if output_final_state else None
    if K.noise > 0:
        o = o * (1 + K.noise * torch.from_numpy(K.rng.standard_normal(o.shape).astype(np.float32)))
    return o, S


def emu_eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
    """eager attention with the GPU's bf16 operands: Q, K/V cache, and P in the PV product."""
    if not K.act_bf16:
        return _eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kw)
    key = M.repeat_kv(bf16(key), module.num_key_value_groups)
    value = M.repeat_kv(bf16(value), module.num_key_value_groups)
    s = torch.matmul(bf16(query), key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        s = s + attention_mask[:, :, :, : key.shape[-2]]
    m = s.amax(-1, keepdim=True)
    p = torch.exp(s - m)
    l = p.sum(-1, keepdim=True)
    o = torch.matmul(bf16(p), value) / l
    return o.transpose(1, 2).contiguous(), None


F.linear = emu_linear
M.torch_chunk_gated_delta_rule = emu_gdn
M.eager_attention_forward = emu_eager


# ---------------------------------------------------------------- model, golden, KL

def load_model(weights_bf16):
    with open(os.path.join(FIX, "config.json")) as f:
        tc = json.load(f)["text_config"]
    cfg = Qwen3_5MoeTextConfig(**{k: v for k, v in tc.items() if k not in ("model_type", "dtype")})
    cfg._attn_implementation = "eager"
    model = Qwen3_5MoeForCausalLM(cfg).float().eval()
    sd = {}
    for k, v in load_file(os.path.join(FIX, "model.safetensors")).items():
        if k.startswith("mtp.") or k.startswith("model.visual."):
            continue
        t = torch.from_numpy(v.copy())
        k = "model." + k[len("model.language_model."):] if k.startswith("model.language_model.") else k
        # matrices (2-D and the fused experts) to bf16; norms, conv, A_log, dt_bias stay fp32
        if weights_bf16 and (t.dim() == 2 or k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj")):
            t = bf16(t)
        sd[k] = t
    model.load_state_dict(sd, strict=True)
    for layer in model.model.layers:
        layer.register_forward_hook(layer_noise)
    return model


def layer_noise(module, inputs, output):
    """forward hook on each decoder layer: the residual stream perturbed by xnoise (relative)"""
    if K.xnoise > 0:
        return output * (1 + K.xnoise * torch.from_numpy(K.rng.standard_normal(output.shape).astype(np.float32)))
    return None


def kl_rows(ref, got):
    lr, lg = torch.log_softmax(ref.double(), -1), torch.log_softmax(got.double(), -1)
    return (lr.exp() * (lr - lg)).sum(-1)


def run(model, tokens, ref, gdn="hf", act=False, noise=0.0, xnoise=0.0, seed=0, rows=False):
    K.gdn, K.act_bf16, K.noise, K.xnoise = gdn, act, noise, xnoise
    K.rng = np.random.default_rng(seed)
    with torch.no_grad():
        lg = model(input_ids=tokens[None], use_cache=False).logits[0].float()
    kl = kl_rows(ref, lg)
    r = (kl.mean().item(), (ref.argmax(-1) == lg.argmax(-1)).sum().item())
    return (r, kl) if rows else r


def main():
    global _lib
    _lib = load_lib()
    torch.set_num_threads(1)
    gold = load_file(os.path.join(FIX, "golden.safetensors"))
    tokens = torch.from_numpy(gold["tokens"].astype(np.int64))
    ref = torch.from_numpy(gold["logits"])
    m32, m16 = load_model(False), load_model(True)
    T = tokens.shape[0]
    print(f"tiny fixture, {T} tokens, mean KL(HF fp32 || emulation) and top-1 agreement (GPU test 1's bound: 5e-3)")
    print(f"{'weights':8} {'GEMM/attn operands':19} {'GDN core':9} {'GDN noise':10} {'mean KL':>9}  top-1")

    def line(w, a, gdn, noise, r):
        print(f"{w:8} {a:19} {gdn:9} {noise:10} {r[0]:9.2e}  {r[1]}/{T}")

    for gdn in ("hf", "ref64", "step", "chunk", "chunk64"):
        line("fp32", "fp32", gdn, "-", run(m32, tokens, ref, gdn))
    for gdn in ("hf", "ref64", "step", "chunk", "chunk64"):
        line("bf16", "fp32", gdn, "-", run(m16, tokens, ref, gdn))
    for gdn in ("ref64", "step", "chunk", "chunk64"):
        line("bf16", "bf16", gdn, "-", run(m16, tokens, ref, gdn, act=True))
    sys.stdout.flush()
    seeds = int(os.environ.get("SEEDS", "24"))
    print(f"\nW bf16, A bf16: mean KL over {seeds} seeds of a rounding-level perturbation (min / median / max, "
          f"seeds over 5e-3)")
    dist = {}
    for what, gdn, kw in (("GDN out x(1 + 1e-7 N)", "ref64", {"noise": 1e-7}),
                          ("GDN out x(1 + 1e-6 N)", "ref64", {"noise": 1e-6}),
                          ("X x(1 + 6e-8 N), step", "step", {"xnoise": 6e-8}),
                          ("X x(1 + 6e-8 N), chunk", "chunk", {"xnoise": 6e-8}),
                          ("X x(1 + 6e-8 N), chunk64", "chunk64", {"xnoise": 6e-8})):
        ks = [run(m16, tokens, ref, gdn, act=True, seed=sd, **kw)[0] for sd in range(seeds)]
        dist[what] = ks
        print(f"  {what:26} {min(ks):.2e} / {float(np.median(ks)):.2e} / {max(ks):.2e}   "
              f"{sum(k > 5e-3 for k in ks)}/{seeds}")
        sys.stdout.flush()
    # where the mean comes from: the rows with the largest KL and the MoE routing decisions (top-2 of 8
    # experts) that differ from the fp32 model's, unperturbed and in the chunk run's worst seed
    routes = {}
    for model in (m32, m16):
        for li, layer in enumerate(model.model.layers):
            layer.mlp.gate.register_forward_hook(
                lambda mod, inp, out, li=li: routes.__setitem__(li, (torch.softmax(out[0].float(), -1), out[2])))
    run(m32, tokens, ref)
    r32 = dict(routes)
    ks = dist["X x(1 + 6e-8 N), chunk"]
    worst = int(np.argmax(ks))
    for title, kw in (("step, unperturbed", {"gdn": "step"}),
                      (f"chunk, seed {worst}", {"gdn": "chunk", "xnoise": 6e-8, "seed": worst})):
        (mean, _), kl = run(m16, tokens, ref, act=True, rows=True, **kw)
        top = torch.argsort(kl, descending=True)[:3].tolist()
        print(f"\nW+A bf16, {title}: mean KL {mean:.2e}; largest rows " +
              ", ".join(f"{r} ({kl[r].item():.3f} = {kl[r].item() / kl.sum().item():.0%} of the sum)" for r in top))
        for li in sorted(routes):
            (p0, i0), (_, i1) = r32[li], routes[li]
            s0, s1 = torch.sort(i0, -1).values, torch.sort(i1, -1).values
            for t in (s0 != s1).any(-1).nonzero().flatten().tolist():
                ps = torch.sort(p0[t], descending=True).values
                print(f"  layer {li} row {t:3d}: experts {s0[t].tolist()} -> {s1[t].tolist()} (fp32 router p, 2nd "
                      f"{ps[1]:.4f} vs 3rd {ps[2]:.4f}); row KL {kl[t].item():.3f}")

if __name__ == "__main__":
    main()
