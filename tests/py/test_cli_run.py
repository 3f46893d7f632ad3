"""`lilac run` on the golden fixtures: greedy decoding reproduces transformers' continuation,
seeded sampling is reproducible, and bad input gives clear errors."""
import os
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load_file

from lilactest import LILAC, ROOT, shared  # noqa: E402


def run(*args, check=True):
    p = subprocess.run([LILAC, "run", *args], capture_output=True, text=True, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"lilac run failed ({p.returncode}): {p.stderr}")
    return p


def ids_of(p):
    return [int(x) for x in p.stdout.strip().split(",") if x]


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_greedy_reproduces_golden(name):
    d = os.path.join(shared(), "fixtures", name)
    g = load_file(os.path.join(d, "golden.safetensors"))
    want = g["greedy.tokens"].tolist()
    prompt = ",".join(str(t) for t in g["tokens"].tolist())
    p = run("-m", d, "--prompt-ids", prompt, "--temp", "0", "-n", str(len(want)), "--output-ids")
    assert ids_of(p) == want
    assert "prompt 150 tok" in p.stderr or "prompt 300 tok" in p.stderr


def test_seeded_sampling_is_reproducible():
    d = os.path.join(shared(), "fixtures", "tiny")
    args = ["-m", d, "--prompt-ids", "1,2,3,4,5", "-n", "20", "--output-ids", "--temp", "1.0", "--top-k", "50"]
    a = ids_of(run(*args, "--seed", "7"))
    b = ids_of(run(*args, "--seed", "7"))
    c = ids_of(run(*args, "--seed", "8"))
    assert len(a) == 20 and a == b
    assert a != c


@pytest.mark.parametrize("flag,value,needle", [
    ("--temp", "abc", "--temp"),
    ("--top-p", "2", "--top-p"),
    ("--top-k", "-1", "--top-k"),
    ("--seed", "1x", "--seed"),
    ("--kv-cache", "q4", "--kv-cache"),
])
def test_invalid_flags(flag, value, needle):
    d = os.path.join(shared(), "fixtures", "tiny")
    p = run("-m", d, "--prompt-ids", "1,2", flag, value, check=False)
    assert p.returncode != 0
    assert needle in p.stderr


@pytest.mark.parametrize("value", ["auto", "bf16", "q8"])
def test_kv_cache_values(value):
    """Every --kv-cache value is accepted; on the cpu backend (its own fp32 cache) the output does not
    change, and only an explicit q8 is called out as not applying (auto is the default)."""
    d = os.path.join(shared(), "fixtures", "tiny")
    args = ["-m", d, "--backend", "cpu", "--prompt-ids", "1,2,3", "--temp", "0", "-n", "4", "--output-ids"]
    base = ids_of(run(*args))
    p = run(*args, "--kv-cache", value)
    assert ids_of(p) == base
    assert ("applies to the cuda backend" in p.stderr) == (value == "q8")


def test_prompt_longer_than_context():
    d = os.path.join(shared(), "fixtures", "tiny")
    p = run("-m", d, "--prompt-ids", ",".join(["5"] * 20), "--ctx", "16", "-n", "4", check=False)
    assert p.returncode != 0
    assert "context is 16 tokens" in p.stderr and "prompt has 20 tokens" in p.stderr


def test_bad_token_id_and_missing_model():
    d = os.path.join(shared(), "fixtures", "tiny")
    p = run("-m", d, "--prompt-ids", "1,99999", "-n", "2", check=False)
    assert p.returncode != 0 and "outside the vocabulary" in p.stderr
    p = run("-m", "/nonexistent/model", "--prompt-ids", "1", check=False)
    assert p.returncode != 0 and "/nonexistent/model" in p.stderr


@pytest.mark.parametrize("ids,needle", [
    ("", "--prompt-ids: empty"),
    ("1,,2", "bad token id at byte 2"),
    ("-1", "bad token id at byte 0"),
    (" 1", "bad token id at byte 0"),
    ("1,2x", "bad token id at byte 3"),
    ("2147483648", "bad token id at byte 0"),
])
def test_bad_prompt_ids(ids, needle):
    """--prompt-ids takes decimal ids and commas only, and names the byte where that stops."""
    d = os.path.join(shared(), "fixtures", "tiny")
    p = run("-m", d, "--prompt-ids", ids, "-n", "1", check=False)
    assert p.returncode != 0 and needle in p.stderr, p.stderr


def test_logits_bad_tokens(tmp_path):
    """`lilac logits --tokens` shares the parser: a bad list fails before the model loads."""
    d = os.path.join(shared(), "fixtures", "tiny")
    out = str(tmp_path / "l.safetensors")
    p = subprocess.run([LILAC, "logits", "-m", d, "--tokens", "3,+4", "-o", out], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "--tokens: bad token id at byte 2" in p.stderr, p.stderr
    assert not os.path.exists(out)
    p = subprocess.run([LILAC, "logits", "-m", d, "--tokens", "3,4,", "-o", out], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert load_file(out)["logits"].shape[0] == 2
