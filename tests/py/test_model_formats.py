"""Interop checks for the model loader against independent writers.

A llama.cpp-style qwen35moe GGUF is written from the tiny fixture with the `gguf` PyPI package
(its own writer and Q8_0 quantizer, following the converter's conventions: +1 norms,
ssm_a = -exp(A_log), V heads in tiled order), then `lilac info` must load it. Also checks
`lilac info` on the HF fixtures and its error path.
"""
import os
import pathlib
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from safetensors.numpy import load_file  # noqa: E402

from lilactest import LILAC, ROOT, shared  # noqa: E402


def info(path):
    return subprocess.run([LILAC, "info", "-m", str(path)], capture_output=True, text=True, timeout=60)


def tiled(x, hk, r, d, axis=0):
    """grouped (v head h = kh*r + j) -> tiled (j*hk + kh) along `axis` in blocks of d."""
    x = np.moveaxis(x, axis, 0)
    rest = x.shape[1:]
    x = x.reshape(hk, r, d, *rest).transpose(1, 0, 2, *range(3, 3 + len(rest))).reshape(hk * r * d, *rest)
    return np.ascontiguousarray(np.moveaxis(x, 0, axis))


def write_gguf(path, quant_experts, fused=False):
    fx = shared() / "fixtures" / "tiny"
    t = load_file(str(fx / "model.safetensors"))
    H, L, HK, HV, DV, K, E, FF = 128, 4, 2, 4, 32, 4, 8, 64
    R, QK2 = HV // HK, 2 * 2 * 32
    w = gguf.GGUFWriter(str(path), "qwen35moe")
    for k, v in [("block_count", L), ("context_length", 262144), ("embedding_length", H),
                 ("attention.head_count", 4), ("attention.head_count_kv", 2), ("attention.key_length", 64),
                 ("attention.value_length", 64), ("rope.dimension_count", 16), ("expert_count", E),
                 ("expert_used_count", 2), ("expert_feed_forward_length", FF),
                 ("expert_shared_feed_forward_length", 64), ("ssm.conv_kernel", K), ("ssm.state_size", DV),
                 ("ssm.group_count", HK), ("ssm.time_step_rank", HV), ("ssm.inner_size", HV * DV),
                 ("full_attention_interval", 4)]:
        w.add_uint32(f"qwen35moe.{k}", v)
    w.add_float32("qwen35moe.rope.freq_base", 1e7)
    w.add_float32("qwen35moe.attention.layer_norm_rms_epsilon", 1e-6)
    p = "model.language_model."

    def add(name, arr, q=False):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if q:
            w.add_tensor(name, gguf.quants.quantize(arr, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, arr)

    add("token_embd.weight", t[p + "embed_tokens.weight"])
    add("output.weight", t["lm_head.weight"])
    add("output_norm.weight", t[p + "norm.weight"] + 1)
    for i in range(L):
        lp = f"{p}layers.{i}."
        b = f"blk.{i}."
        add(b + "attn_norm.weight", t[lp + "input_layernorm.weight"] + 1)
        add(b + "post_attention_norm.weight", t[lp + "post_attention_layernorm.weight"] + 1)
        if i == 3:
            add(b + "attn_q.weight", t[lp + "self_attn.q_proj.weight"])
            add(b + "attn_k.weight", t[lp + "self_attn.k_proj.weight"])
            add(b + "attn_v.weight", t[lp + "self_attn.v_proj.weight"])
            add(b + "attn_output.weight", t[lp + "self_attn.o_proj.weight"])
            add(b + "attn_q_norm.weight", t[lp + "self_attn.q_norm.weight"] + 1)
            add(b + "attn_k_norm.weight", t[lp + "self_attn.k_norm.weight"] + 1)
        else:
            a = lp + "linear_attn."
            qkv = t[a + "in_proj_qkv.weight"].copy()
            qkv[QK2:] = tiled(qkv[QK2:], HK, R, DV)
            add(b + "attn_qkv.weight", qkv)
            add(b + "attn_gate.weight", tiled(t[a + "in_proj_z.weight"], HK, R, DV))
            add(b + "ssm_beta.weight", tiled(t[a + "in_proj_b.weight"], HK, R, 1))
            add(b + "ssm_alpha.weight", tiled(t[a + "in_proj_a.weight"], HK, R, 1))
            conv = t[a + "conv1d.weight"][:, 0, :].copy()
            conv[QK2:] = tiled(conv[QK2:], HK, R, DV)
            add(b + "ssm_conv1d.weight", conv)
            add(b + "ssm_dt.bias", tiled(t[a + "dt_bias"], HK, R, 1))
            add(b + "ssm_a", tiled(-np.exp(t[a + "A_log"]), HK, R, 1))
            add(b + "ssm_norm.weight", t[a + "norm.weight"])
            add(b + "ssm_out.weight", tiled(t[a + "out_proj.weight"], HK, R, DV, axis=1))
        m = lp + "mlp."
        add(b + "ffn_gate_inp.weight", t[m + "gate.weight"])
        gu = t[m + "experts.gate_up_proj"]
        if fused:  # ne {n_embd, 2*n_ff, n_expert}, gate rows first
            add(b + "ffn_gate_up_exps.weight", gu, quant_experts)
        else:
            add(b + "ffn_gate_exps.weight", gu[:, :FF], quant_experts)
            add(b + "ffn_up_exps.weight", gu[:, FF:], quant_experts)
        add(b + "ffn_down_exps.weight", t[m + "experts.down_proj"], quant_experts)
        add(b + "ffn_gate_inp_shexp.weight", t[m + "shared_expert_gate.weight"][0])
        add(b + "ffn_gate_shexp.weight", t[m + "shared_expert.gate_proj.weight"])
        add(b + "ffn_up_shexp.weight", t[m + "shared_expert.up_proj.weight"])
        add(b + "ffn_down_shexp.weight", t[m + "shared_expert.down_proj.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_info_hf_fixtures():
    fx = shared() / "fixtures"
    r = info(fx / "tiny")
    assert r.returncode == 0, r.stderr
    assert "LLLF" in r.stdout and "format:        safetensors" in r.stdout
    r = info(fx / "small")
    assert r.returncode == 0, r.stderr
    assert "LFL" in r.stdout and "bf16" in r.stdout


def test_info_error():
    r = info("/nonexistent/model")
    assert r.returncode == 1
    assert "/nonexistent/model" in r.stderr


@pytest.mark.parametrize("quant,fused", [(False, False), (True, False), (True, True)])
def test_gguf_from_python_writer(tmp_path, quant, fused):
    path = tmp_path / "tiny.gguf"
    write_gguf(path, quant, fused)
    r = info(path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "format:        gguf" in out
    assert "LLLF" in out
    assert "tiled" in out
    if quant:
        # 4 layers x 3 stacks x 8 experts x 64 rows (x128: 4 blocks) or 128 rows (x64: 2 blocks), 34 B/block
        q8 = 4 * 8 * (2 * 64 * 4 * 34 + 128 * 2 * 34)
        line = [ln for ln in out.splitlines() if ln.strip().startswith("q8_0")]
        assert line and f" {q8} bytes" in line[0], out
