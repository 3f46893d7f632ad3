"""test_quant_gguf.py — cross-checks lilac's block formats against independent implementations.

ggml formats: the `gguf` package's numpy (de)quantizers (gguf/quants.py). lilac's side runs
through the test tool `quant_tool` (tests/tools/quant_tool.c; $LILAC_QUANT_TOOL, else
build/tests/tools/quant_tool):
  * random valid blocks built in numpy -> gguf.dequantize and lilac's dequantize agree exactly;
  * lilac-quantized bytes -> gguf.dequantize agrees with lilac's dequantize, and the
    reconstruction error is what the format allows;
  * gguf.quantize (Q8_0, Q4_0, BF16) and lilac's quantizer produce identical bytes.

MLX affine (mx.quantize mode "affine") has no gguf reference; it is checked against a numpy
implementation of MLX's documented formula:
  https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.quantize.html
  https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.dequantize.html
  per group of 64: s = (max - min) / (2^bits - 1), beta = min, q = round((w - beta) / s),
  w = s * q + beta; codes packed little-endian into uint32 words (element 0 in the low bits).
"""
import os
import subprocess
import tempfile

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as QT  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.environ.get("LILAC_QUANT_TOOL") or os.path.join(ROOT, "build", "tests", "tools", "quant_tool")
if not os.path.isabs(TOOL):
    TOOL = os.path.join(ROOT, TOOL)

pytestmark = pytest.mark.skipif(not os.access(TOOL, os.X_OK), reason=f"quant_tool not built at {TOOL}")

# name -> (gguf type, elements per block, bytes per block)
TYPES = {
    "f32": (QT.F32, 1, 4),
    "f16": (QT.F16, 1, 2),
    "bf16": (QT.BF16, 1, 2),
    "q4_0": (QT.Q4_0, 32, 18),
    "q8_0": (QT.Q8_0, 32, 34),
    "q4_K": (QT.Q4_K, 256, 144),
    "q5_K": (QT.Q5_K, 256, 176),
    "q6_K": (QT.Q6_K, 256, 210),
}


def run_tool(cmd, typ, data: bytes) -> bytes:
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
        with open(src, "wb") as f:
            f.write(data)
        r = subprocess.run([TOOL, cmd, typ, src, dst], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        with open(dst, "rb") as f:
            return f.read()


def lilac_dequant(typ, raw: bytes) -> np.ndarray:
    return np.frombuffer(run_tool("dequant", typ, raw), dtype=np.float32)


def lilac_quant(typ, x: np.ndarray) -> bytes:
    return run_tool("quant", typ, np.ascontiguousarray(x, dtype=np.float32).tobytes())


def gguf_dequant(typ, raw: bytes, n: int) -> np.ndarray:
    qt, _, _ = TYPES[typ]
    arr = np.frombuffer(raw, dtype=np.uint8)
    if qt == QT.F32:
        return arr.view(np.float32).copy()
    if qt == QT.F16:
        return arr.view(np.float16).astype(np.float32)
    return gguf.dequantize(arr.reshape(1, -1), qt).reshape(-1).astype(np.float32)


def f16_bytes(vals) -> np.ndarray:
    return np.asarray(vals, dtype=np.float16).view(np.uint8).reshape(-1, 2)


def random_blocks(typ, nblocks, rng) -> bytes:
    """Random bytes with every scale field set to a finite, moderate value."""
    qt, qk, bb = TYPES[typ]
    if qk == 1:
        if typ == "f32":
            return rng.standard_normal(nblocks * 64).astype(np.float32).tobytes()
        if typ == "f16":
            return rng.standard_normal(nblocks * 64).astype(np.float16).tobytes()
        v = rng.standard_normal(nblocks * 64).astype(np.float32).view(np.uint32) >> 16
        return v.astype(np.uint16).tobytes()
    b = rng.integers(0, 256, size=(nblocks, bb), dtype=np.uint8)
    d = f16_bytes(rng.uniform(1e-3, 0.1, nblocks) * rng.choice([-1, 1], nblocks))
    dmin = f16_bytes(rng.uniform(1e-3, 0.1, nblocks))
    if typ in ("q4_0", "q8_0"):
        b[:, 0:2] = d
    elif typ in ("q4_K", "q5_K"):
        b[:, 0:2] = f16_bytes(np.abs(d.view(np.float16).astype(np.float32)))
        b[:, 2:4] = dmin
    elif typ == "q6_K":
        b[:, 208:210] = d
    return b.tobytes()


@pytest.mark.parametrize("typ", list(TYPES))
def test_dequant_random_blocks_match_gguf(typ):
    rng = np.random.default_rng(1)
    raw = random_blocks(typ, 12, rng)
    ours = lilac_dequant(typ, raw)
    ref = gguf_dequant(typ, raw, ours.size)
    assert ours.shape == ref.shape
    np.testing.assert_array_equal(ours, ref)


# relative RMSE bounds for N(0,1) data (lilac's quantizer, measured well below these)
RMSE_BOUND = {"f32": 0, "f16": 3e-4, "bf16": 2.5e-3, "q4_0": 0.1, "q8_0": 0.007, "q4_K": 0.08, "q5_K": 0.04,
              "q6_K": 0.02}


@pytest.mark.parametrize("typ", list(TYPES))
def test_lilac_quant_dequantized_by_gguf(typ):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(256 * 24).astype(np.float32)
    raw = lilac_quant(typ, x)
    _, qk, bb = TYPES[typ]
    assert len(raw) == x.size // qk * bb
    ref = gguf_dequant(typ, raw, x.size)
    np.testing.assert_array_equal(lilac_dequant(typ, raw), ref)
    rel = np.sqrt(np.mean((ref - x) ** 2) / np.mean(x**2))
    assert rel <= RMSE_BOUND[typ], rel


@pytest.mark.parametrize("typ", ["q8_0", "q4_0", "bf16"])
def test_quantize_bytes_match_gguf(typ):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 256)) * rng.uniform(0.01, 10, (4, 1))).astype(np.float32)
    x[1, :32] = 0.0  # an all-zero block
    x[2, 32:64] = 1.25  # a constant block
    ours = lilac_quant(typ, x.reshape(-1))
    theirs = gguf.quantize(x, TYPES[typ][0]).tobytes()
    assert ours == theirs


def test_q8_0_gguf_quantized_dequantized_by_lilac():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 512)).astype(np.float32)
    raw = gguf.quantize(x, QT.Q8_0).tobytes()
    np.testing.assert_array_equal(lilac_dequant("q8_0", raw), gguf_dequant("q8_0", raw, x.size))


# ---------------------------------------------------------------- MLX affine

def mlx_dequant_np(raw: bytes, bits: int) -> np.ndarray:
    """Dequantizes lilac's MLX blocks {bf16 scale, bf16 bias, codes} with MLX's formula,
    unpacking the codes as MLX does: little-endian uint32 words, element 0 in the low bits."""
    per = 64 * bits // 8
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 4 + per)
    hdr = blocks[:, :4].copy().view(np.uint16).astype(np.uint32) << 16
    scale, bias = hdr[:, 0].view(np.float32), hdr[:, 1].view(np.float32)
    words = blocks[:, 4:].copy().view("<u4")  # (nblocks, 64*bits/32)
    per_word = 32 // bits
    shifts = (np.arange(per_word, dtype=np.uint32) * bits)[None, None, :]
    q = ((words[:, :, None] >> shifts) & ((1 << bits) - 1)).reshape(-1, 64).astype(np.float32)
    return (scale[:, None] * q + bias[:, None]).reshape(-1)


def mlx_quant_np(x: np.ndarray, bits: int):
    """MLX's documented affine quantizer (fp32), for comparison of codes and error."""
    g = x.reshape(-1, 64)
    lo, hi = g.min(axis=1, keepdims=True), g.max(axis=1, keepdims=True)
    s = (hi - lo) / (2**bits - 1)
    q = np.clip(np.round((g - lo) / np.where(s == 0, 1, s)), 0, 2**bits - 1)
    return q, s, lo


@pytest.mark.parametrize("bits", [4, 8])
def test_mlx_affine_matches_documented_formula(bits):
    typ = f"mlx{bits}"
    rng = np.random.default_rng(5 + bits)
    x = (rng.standard_normal(64 * 40) * 0.1 + 0.02).astype(np.float32)
    raw = lilac_quant(typ, x)
    assert len(raw) == 40 * (4 + 64 * bits // 8)
    ours = lilac_dequant(typ, raw)
    np.testing.assert_allclose(ours, mlx_dequant_np(raw, bits), rtol=1e-6, atol=1e-7)
    # lilac's codes are MLX's round((w - min)/s) up to the bf16 rounding of scale and bias
    q_ref, s, lo = mlx_quant_np(x, bits)
    per = 64 * bits // 8
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 4 + per)
    words = blocks[:, 4:].copy().view("<u4")
    shifts = (np.arange(32 // bits, dtype=np.uint32) * bits)[None, None, :]
    q_ours = ((words[:, :, None] >> shifts) & ((1 << bits) - 1)).reshape(-1, 64)
    assert np.max(np.abs(q_ours.astype(np.int32) - q_ref.astype(np.int32))) <= (1 if bits == 4 else 2)
    err_ours = np.sqrt(np.mean((ours - x) ** 2))
    err_ref = np.sqrt(np.mean(((s * q_ref + lo).reshape(-1) - x) ** 2))
    assert err_ours <= 1.05 * err_ref + 1e-6


@pytest.mark.parametrize("bits", [4, 8])
def test_mlx_hand_packed_words(bits):
    """Blocks packed by numpy the MLX way (uint32 words, LSB first) dequantize identically."""
    rng = np.random.default_rng(7)
    nb = 8
    q = rng.integers(0, 2**bits, size=(nb, 64), dtype=np.uint32)
    per_word = 32 // bits
    words = np.zeros((nb, 64 // per_word), dtype=np.uint32)
    for k in range(per_word):
        words |= q[:, k::per_word] << np.uint32(k * bits)
    scale = (rng.uniform(0.01, 0.1, nb).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    bias = (rng.uniform(-1, 1, nb).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    raw = b"".join(
        scale[i].tobytes() + bias[i].tobytes() + words[i].astype("<u4").tobytes() for i in range(nb)
    )
    sf = (scale.astype(np.uint32) << 16).view(np.float32)
    bf = (bias.astype(np.uint32) << 16).view(np.float32)
    want = (sf[:, None] * q.astype(np.float32) + bf[:, None]).reshape(-1)
    np.testing.assert_array_equal(lilac_dequant(f"mlx{bits}", raw), want)


def test_tool_rejects_partial_block():
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "in.bin")
        with open(src, "wb") as f:
            f.write(b"\0" * 143)
        r = subprocess.run([TOOL, "dequant", "q4_K", src, os.path.join(d, "o")], capture_output=True, text=True)
        assert r.returncode == 2 and "whole number" in r.stderr
