"""`lilac convert` output checked by an independent reader: the `gguf` PyPI package.

* it parses the files, finds architecture `qwen35moe`, llama.cpp's metadata keys and exactly the
  tensor names of llama.cpp's qwen35moe layout (gguf-py/gguf/constants.py MODEL_TENSORS[QWEN35MOE]);
* its numpy dequantization of our Q8_0 / Q4_K / Q6_K tensors equals lilac's dequantization
  (tests/tools/quant_tool) bit for bit;
* the F32 conversion of the tiny fixture holds the HF weights under llama.cpp's transforms
  (conversion/qwen.py): +1 on zero-centred norms, ssm_a = -exp(A_log), conv squeezed to [C, K],
  fused gate_up split into ffn_gate_exps / ffn_up_exps, V heads reordered to tiled order;
* the `lilac` CLI: progress/summary, --force, quantize, info --tensors, bad type.
"""
import os
import pathlib
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as QT  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

from lilactest import LILAC, ROOT, shared  # noqa: E402
if not os.path.isabs(LILAC):
    LILAC = str(ROOT / LILAC)
TOOL = os.environ.get("LILAC_QUANT_TOOL") or str(ROOT / "build" / "tests" / "tools" / "quant_tool")
if not os.path.isabs(TOOL):
    TOOL = str(ROOT / TOOL)


def lilac(*args, check=True):
    r = subprocess.run([LILAC, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    d = tmp_path_factory.mktemp("conv")
    out = {}
    for ty in ("q8_0", "q4_k_m", "q6_k", "f32"):
        src = shared() / "fixtures" / ("tiny" if ty == "f32" else "small")
        out[ty] = d / f"{src.name}-{ty}.gguf"
        r = lilac("convert", src, "-o", out[ty], "--type", ty, "--threads", "2")
        assert "GB/s of source" in r.stderr
    return out


def field(rd, key):
    f = rd.fields[key]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode()
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        return [f.parts[i].tolist()[0] if f.types[-1] != gguf.GGUFValueType.STRING else bytes(f.parts[i]).decode() for i in f.data]
    return f.parts[f.data[0]].tolist()[0]


def expected_names(layer_types, shared_expert=True):
    names = {"token_embd.weight", "output_norm.weight", "output.weight"}
    for i, lt in enumerate(layer_types):
        b = f"blk.{i}."
        names |= {b + "attn_norm.weight", b + "post_attention_norm.weight", b + "ffn_gate_inp.weight",
                  b + "ffn_gate_exps.weight", b + "ffn_up_exps.weight", b + "ffn_down_exps.weight"}
        if shared_expert:
            names |= {b + n for n in ("ffn_gate_inp_shexp.weight", "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                                       "ffn_down_shexp.weight")}
        if lt == "F":
            names |= {b + n for n in ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                       "attn_q_norm.weight", "attn_k_norm.weight")}
        else:
            names |= {b + n for n in ("attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight", "ssm_alpha.weight",
                                       "ssm_conv1d.weight", "ssm_dt.bias", "ssm_a", "ssm_norm.weight", "ssm_out.weight")}
    return names


def test_structure_and_keys(converted):
    rd = gguf.GGUFReader(str(converted["q4_k_m"]))
    assert field(rd, "general.architecture") == "qwen35moe"
    assert field(rd, "general.file_type") == 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    expect = {"block_count": 3, "embedding_length": 256, "attention.head_count": 8, "attention.head_count_kv": 2,
              "attention.key_length": 128, "attention.value_length": 128, "rope.dimension_count": 32,
              "expert_count": 4, "expert_used_count": 2, "expert_feed_forward_length": 256,
              "expert_shared_feed_forward_length": 256, "ssm.conv_kernel": 4, "ssm.state_size": 64,
              "ssm.group_count": 4, "ssm.time_step_rank": 8, "ssm.inner_size": 512, "full_attention_interval": 2,
              "context_length": 262144}
    for k, v in expect.items():
        assert field(rd, f"qwen35moe.{k}") == v, k
    assert field(rd, "qwen35moe.rope.dimension_sections") == [6, 5, 5, 0]
    assert abs(field(rd, "qwen35moe.rope.freq_base") - 1e7) < 1
    assert abs(field(rd, "qwen35moe.attention.layer_norm_rms_epsilon") - 1e-6) < 1e-9
    names = {t.name for t in rd.tensors}
    assert names == expected_names("LFL")
    # the gguf package knows these names for the architecture (constants.py MODEL_TENSORS)
    arch = next(a for a, n in gguf.MODEL_ARCH_NAMES.items() if n == "qwen35moe")
    known = {gguf.TENSOR_NAMES[t] for t in gguf.MODEL_TENSORS[arch]}
    for n in names:
        base = n.rsplit(".weight", 1)[0].rsplit(".bias", 1)[0]
        parts = base.split(".")
        generic = ".".join(["blk", "{bid}"] + parts[2:]) if parts[0] == "blk" else base
        assert generic in known, n
    types = {t.name: t.tensor_type for t in rd.tensors}
    # the Q4_K_M mix on 3 layers: use_more_bits(i, 3) holds for i = 2 only
    assert types["blk.2.attn_qkv.weight"] == QT.Q6_K and types["blk.0.attn_qkv.weight"] == QT.Q4_K
    assert types["blk.1.attn_v.weight"] == QT.Q4_K
    assert types["blk.2.ffn_down_exps.weight"] == QT.Q6_K and types["blk.0.ffn_down_exps.weight"] == QT.Q4_K
    assert types["output.weight"] == QT.Q6_K and types["token_embd.weight"] == QT.Q4_K
    assert types["blk.0.ffn_gate_inp.weight"] == QT.F32 and types["blk.0.ssm_conv1d.weight"] == QT.F32
    t = next(t for t in rd.tensors if t.name == "blk.0.ffn_gate_exps.weight")
    assert list(t.shape) == [256, 256, 4]  # ggml ne: {n_embd, n_ff, n_expert}


def lilac_dequant(typ, raw):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in"), os.path.join(d, "out")
        with open(src, "wb") as f:
            f.write(raw)
        r = subprocess.run([TOOL, "dequant", typ, src, dst], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return np.fromfile(dst, dtype=np.float32)


@pytest.mark.skipif(not os.access(TOOL, os.X_OK), reason="quant_tool not built")
def test_dequant_bit_exact(converted):
    seen = set()
    for ty in ("q8_0", "q4_k_m"):
        rd = gguf.GGUFReader(str(converted[ty]))
        for t in rd.tensors:
            if t.tensor_type not in (QT.Q8_0, QT.Q4_K, QT.Q6_K):
                continue
            seen.add(t.tensor_type)
            raw = np.asarray(t.data).view(np.uint8).reshape(-1)
            ref = gguf.dequantize(raw.reshape(1, -1), t.tensor_type).reshape(-1).astype(np.float32)
            ours = lilac_dequant({QT.Q8_0: "q8_0", QT.Q4_K: "q4_K", QT.Q6_K: "q6_K"}[t.tensor_type], raw.tobytes())
            assert ours.shape == ref.shape, t.name
            assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32)), t.name
    assert seen == {QT.Q8_0, QT.Q4_K, QT.Q6_K}


def tiled(x, hk, r, d, axis=0):
    x = np.moveaxis(x, axis, 0)
    rest = x.shape[1:]
    x = x.reshape(hk, r, d, *rest).transpose(1, 0, 2, *range(3, 3 + len(rest))).reshape(hk * r * d, *rest)
    return np.ascontiguousarray(np.moveaxis(x, 0, axis))


def test_f32_contents_follow_llama_cpp(converted):
    hf = load_file(str(shared() / "fixtures" / "tiny" / "model.safetensors"))
    rd = gguf.GGUFReader(str(converted["f32"]))
    g = {t.name: np.asarray(t.data).reshape([int(x) for x in reversed(t.shape)]) for t in rd.tensors}
    p = "model.language_model.layers."
    HK, R, DK, DV, FF = 2, 2, 32, 32, 64
    np.testing.assert_array_equal(g["blk.0.attn_norm.weight"], (hf[p + "0.input_layernorm.weight"] + 1).astype(np.float32))
    np.testing.assert_array_equal(g["blk.0.ssm_norm.weight"], hf[p + "0.linear_attn.norm.weight"])
    # expf vs numpy's exp: within one ulp
    np.testing.assert_allclose(g["blk.0.ssm_a"], tiled(-np.exp(hf[p + "0.linear_attn.A_log"]), HK, R, 1), rtol=3e-7, atol=0)
    np.testing.assert_array_equal(g["blk.0.ssm_dt.bias"], tiled(hf[p + "0.linear_attn.dt_bias"], HK, R, 1))
    qkv = hf[p + "0.linear_attn.in_proj_qkv.weight"]
    want = np.concatenate([qkv[:2 * HK * DK], tiled(qkv[2 * HK * DK:], HK, R, DV)])
    np.testing.assert_array_equal(g["blk.0.attn_qkv.weight"], want)
    conv = hf[p + "0.linear_attn.conv1d.weight"][:, 0, :]
    np.testing.assert_array_equal(g["blk.0.ssm_conv1d.weight"], np.concatenate([conv[:2 * HK * DK], tiled(conv[2 * HK * DK:], HK, R, DV)]))
    np.testing.assert_array_equal(g["blk.0.ssm_out.weight"], tiled(hf[p + "0.linear_attn.out_proj.weight"], HK, R, DV, axis=1))
    np.testing.assert_array_equal(g["blk.0.ssm_alpha.weight"], tiled(hf[p + "0.linear_attn.in_proj_a.weight"], HK, R, 1))
    gu = hf[p + "0.mlp.experts.gate_up_proj"]
    np.testing.assert_array_equal(g["blk.0.ffn_gate_exps.weight"], gu[:, :FF])
    np.testing.assert_array_equal(g["blk.0.ffn_up_exps.weight"], gu[:, FF:])
    np.testing.assert_array_equal(g["blk.3.attn_q.weight"], hf[p + "3.self_attn.q_proj.weight"])
    np.testing.assert_array_equal(g["blk.3.ffn_gate_inp_shexp.weight"], hf[p + "3.mlp.shared_expert_gate.weight"][0])
    np.testing.assert_array_equal(g["output.weight"], hf["lm_head.weight"])


def test_cli_quantize_info_and_errors(converted, tmp_path):
    out = tmp_path / "re.gguf"
    lilac("quantize", converted["q8_0"], "-o", out, "--type", "q6_k")
    r = lilac("quantize", converted["q8_0"], "-o", out, "--type", "q6_k", check=False)
    assert r.returncode == 1 and "--force" in r.stderr
    lilac("quantize", converted["q8_0"], "-o", out, "--type", "q6_k", "--force")
    r = lilac("info", "-m", out, "--tensors")
    assert "blk.0.ffn_down_exps.weight" in r.stdout and "q6_K" in r.stdout
    r = lilac("quantize", shared() / "fixtures" / "small", "-o", tmp_path / "x.gguf", "--type", "q8_0", check=False)
    assert r.returncode == 1 and "not a GGUF" in r.stderr
    r = lilac("convert", shared() / "fixtures" / "small", "-o", tmp_path / "x.gguf", "--type", "q3_k", check=False)
    assert r.returncode == 2 and "unknown --type" in r.stderr
    assert not (tmp_path / "x.gguf").exists()


def test_cli_sigint_leaves_nothing(tmp_path):
    """Ctrl-C during a conversion: exit status 1, a clear message, no output and no temporary file."""
    import json
    import signal
    import time
    cfg = {"model_type": "qwen3_5_moe", "tie_word_embeddings": False, "text_config": {
        "model_type": "qwen3_5_moe_text", "vocab_size": 4096, "hidden_size": 512, "num_hidden_layers": 2,
        "layer_types": ["linear_attention", "full_attention"], "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 128, "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 64,
        "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4, "num_experts": 128, "num_experts_per_tok": 2,
        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False, "rope_parameters": {"rope_theta": 1e7, "partial_rotary_factor": 0.25}}}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    src, out = tmp_path / "m", tmp_path / "out.gguf"
    lilac("synth", "--config", tmp_path / "cfg.json", "-o", src, "-q")
    p = subprocess.Popen([LILAC, "convert", str(src), "-o", str(out), "--type", "q6_k", "--threads", "1"],
                         stderr=subprocess.PIPE, text=True)
    # ~0.4 GB of BF16: about a second of Q6_K on one core with the SIMD quantizer, so the signal
    # sent as soon as the output file appears lands mid-conversion
    deadline = time.time() + 60
    while not any(f.name.startswith("out.gguf.part.") for f in tmp_path.iterdir()) and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=120)[1]
    if p.returncode == 0:
        pytest.skip("the conversion finished before the signal")
    assert p.returncode == 1 and "interrupted" in err, err
    assert not out.exists()
    assert not [f for f in tmp_path.iterdir() if ".part." in f.name]


def test_synth_cli_formats(tmp_path):
    """`lilac synth` writes the documented files; both formats load in `lilac info`."""
    d = tmp_path / "st"
    lilac("synth", "--preset", "tiny", "--seed", "3", "-o", d, "-q")
    for f in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
              "generation_config.json"):
        assert (d / f).is_file(), f
    g = tmp_path / "m.gguf"
    lilac("synth", "--preset", "tiny", "--seed", "3", "--format", "gguf", "--type", "q8_0", "-o", g, "-q")
    r = lilac("info", "-m", g, "--tensors")
    assert "q8_0" in r.stdout and "format:        gguf" in r.stdout
    rd = gguf.GGUFReader(str(g))
    assert field(rd, "tokenizer.ggml.model") == "gpt2" and "tokenizer.chat_template" in rd.fields
    r = lilac("synth", "--preset", "huge", "-o", tmp_path / "x", check=False)
    assert r.returncode == 1 and "unknown preset" in r.stderr
    r = lilac("synth", "--preset", "tiny", "--format", "onnx", "-o", tmp_path / "x", check=False)
    assert r.returncode == 2
