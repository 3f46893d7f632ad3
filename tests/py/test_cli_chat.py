"""`lilac chat` with a random model that speaks through the real Qwen3 tokenizer and the official
Qwen3.6 chat template: the second turn prefills only the new tokens (cached-token counter), a
saved session resumes in a new process, and a corrupt session file is a clear error."""
import gzip
import os
import re
import shutil
import subprocess

import pytest

from lilactest import LILAC, ROOT, shared  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("chat")
    tj = d / "tokenizer.json"
    with gzip.open(os.path.join(shared(), "reference/tokenizers/qwen3/tokenizer.json.gz")) as f, open(tj, "wb") as o:
        shutil.copyfileobj(f, o)
    out = d / "m"
    tmpl = os.path.join(shared(), "reference/templates/qwen3.6-35b-a3b.chat_template.jinja")
    subprocess.run([LILAC, "synth", "--preset", "tiny", "--tokenizer", str(tj), "--chat-template", tmpl,
                    "-o", str(out)], check=True, capture_output=True, timeout=300)
    return str(out)


def chat(model, script, *extra):
    p = subprocess.run([LILAC, "chat", "-m", model, "--temp", "0", "-n", "6", *extra], input=script,
                       capture_output=True, text=True, timeout=300)
    return p


def stats(stderr):
    return [(int(a), int(b)) for a, b in re.findall(r"\[prompt (\d+) tok \(cached (\d+)\)", stderr)]


def test_second_turn_prefills_only_new_tokens(model, tmp_path):
    p = chat(model, "Hello there\nWhat is two plus two?\n/exit\n", "--no-think")
    assert p.returncode == 0, p.stderr
    s = stats(p.stderr)
    assert len(s) == 2
    (n1, c1), (n2, c2) = s
    assert c1 == 0
    # the state before turn 1's "<|im_start|>assistant" is reused: all of turn 1's user message
    assert 0 < c2 < n1 < n2
    assert c2 >= n1 - 8


def test_session_save_and_load(model, tmp_path):
    sess = str(tmp_path / "s.snap")
    p = chat(model, f"Hello there\n/save {sess}\n/exit\n")
    assert p.returncode == 0 and os.path.exists(sess) and os.path.exists(sess + ".json"), p.stderr
    p = chat(model, f"/load {sess}\nAnd then?\n/exit\n")
    assert "[loaded" in p.stdout, p.stderr
    (n, c), = stats(p.stderr)
    assert c > 0 and n > c
    # corrupt the snapshot: a clear error, and the session goes on without it
    data = bytearray(open(sess, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(sess, "wb").write(bytes(data))
    p = chat(model, f"/load {sess}\n/exit\n")
    assert "[loaded" not in p.stdout
    assert sess in p.stderr and ("checksum" in p.stderr or "corrupt" in p.stderr), p.stderr


def test_run_chat_mode_streams_text(model):
    p = subprocess.run([LILAC, "run", "-m", model, "--chat", "-p", "Hi", "--no-think", "-n", "5", "--temp", "0"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "[prompt" in p.stderr
