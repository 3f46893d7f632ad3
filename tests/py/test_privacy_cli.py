"""test_privacy_cli.py — `lilac scan`, `lilac mask` and `lilac unmask` end to end, and the
evaluation-set generator (bench/privacy_gen.py): deterministic output and gold spans whose
code-point offsets select exactly the inserted values.

$LILAC_BIN is the built binary (tests/run.sh sets it), else build/lilac.
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("LILAC_BIN") or os.path.join(ROOT, "build", "lilac")
if not os.path.isabs(BIN):
    BIN = os.path.join(ROOT, BIN)
GEN = os.path.join(ROOT, "bench", "privacy_gen.py")

TEXT = ("Grüße! Ich bin erreichbar unter anna.schmidt@web.de oder +49 30 12345678.\n"
        "IBAN DE89 3704 0044 0532 0130 00, key ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789.\n"
        "Again: anna.schmidt@web.de. Version 1.2.3 costs $10.99.\n")


def run(args, data):
    if not os.path.exists(BIN):
        pytest.skip("lilac binary not built")
    return subprocess.run([BIN] + args, input=data, capture_output=True, timeout=60)


def test_scan_json_codepoint_offsets():
    r = run(["scan", "--json", "-"], TEXT.encode())
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"spans", "sensitivity"}
    got = [(TEXT[s["start"]:s["end"]], s["label"], s["source"]) for s in out["spans"]]
    assert ("anna.schmidt@web.de", "private_email", "rule") in got
    assert ("+49 30 12345678", "private_phone", "rule") in got
    assert ("DE89 3704 0044 0532 0130 00", "account_number", "rule") in got
    assert ("ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "secret", "rule") in got
    assert sum(1 for g in got if g[1] == "private_email") == 2
    assert not any("1.2.3" in g[0] or "10.99" in g[0] for g in got)
    for s in out["spans"]:
        assert set(s) == {"start", "end", "label", "score", "source"}
        assert 0 < s["score"] <= 1
    assert out["sensitivity"] == 1


def test_scan_text_and_clean():
    r = run(["scan"], b"Nothing here but version 2.0.1 and https://docs.python.org/3/.\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().strip() == "sensitivity\t0.000"


def test_scan_invalid_utf8_and_errors():
    r = run(["scan", "--json"], b"\xff\xfe mail me: anna.schmidt@web.de \xc3")
    assert r.returncode == 0, r.stderr
    spans = json.loads(r.stdout)["spans"]
    assert [(s["start"], s["end"]) for s in spans] == [(12, 31)]  # the two invalid bytes count one code point each
    r = run(["scan", "/nonexistent/file.txt"], b"")
    assert r.returncode == 1 and b"lilac scan:" in r.stderr
    r = run(["scan", "--bogus"], b"")
    assert r.returncode == 2
    r = run(["scan", "--pii-model", "/nonexistent-dir"], b"x")
    assert r.returncode == 1 and b"lilac scan:" in r.stderr


def test_mask_unmask_roundtrip():
    with tempfile.TemporaryDirectory() as d:
        mp = os.path.join(d, "map.json")
        r = run(["mask", "--map", mp], TEXT.encode())
        assert r.returncode == 0, r.stderr
        masked = r.stdout.decode()
        assert "anna.schmidt@web.de" not in masked and "ghp_" not in masked
        assert masked.count("[PRIVATE_EMAIL_1]") == 2  # same value, same placeholder
        assert "[SECRET_1]" in masked and "[ACCOUNT_NUMBER_1]" in masked and "[PRIVATE_PHONE_1]" in masked
        mapping = json.load(open(mp))
        assert mapping["[PRIVATE_EMAIL_1]"] == "anna.schmidt@web.de"
        r = run(["unmask", "--map", mp], masked.encode())
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode() == TEXT
        # --only masks just the listed categories
        r = run(["mask", "--only", "secret"], TEXT.encode())
        assert b"anna.schmidt@web.de" in r.stdout and b"[SECRET_1]" in r.stdout
        r = run(["mask", "--only", "nonsense"], TEXT.encode())
        assert r.returncode == 2
        # a map that is not lilac's is refused
        bad = os.path.join(d, "bad.json")
        open(bad, "w").write('{"hello": "x"}')
        r = run(["unmask", "--map", bad], b"x")
        assert r.returncode == 1


def test_generator_deterministic_and_offsets():
    a = subprocess.run([sys.executable, GEN, "--seed", "3"], capture_output=True, timeout=120, check=True).stdout
    b = subprocess.run([sys.executable, GEN, "--seed", "3"], capture_output=True, timeout=120, check=True).stdout
    assert a == b
    docs = [json.loads(l) for l in a.decode().splitlines()]
    langs = {d["lang"] for d in docs}
    assert len(langs) >= 10
    kinds = {d["kind"] for d in docs}
    assert kinds == {"pii", "clean", "long"}
    labels = set()
    for d in docs:
        if d["kind"] == "clean":
            assert d["spans"] == []
        prev = 0
        for s in d["spans"]:
            v = d["text"][s["start"]:s["end"]]
            assert v and v == v.strip()
            assert s["start"] >= prev  # sorted, non-overlapping
            prev = s["end"]
            labels.add(s["label"])
        if d["kind"] == "long":
            assert len(d["text"]) >= 10000
            vals = [d["text"][s["start"]:s["end"]] for s in d["spans"]]
            assert len(vals) > len(set(vals))  # identifiers recur
    assert labels == {"private_person", "private_email", "private_phone", "private_address", "private_url",
                      "private_date", "account_number", "secret", "other_pii"}


def shared_dir():
    for d in (os.environ.get("LILAC_SHARED"), os.path.join(ROOT, "..", "shared"), "/work/shared"):
        if d and os.path.isdir(d):
            return d
    return None


def byte_level_vocab():
    """GPT-2 byte-to-unicode: printable bytes stand for themselves, the rest map to U+0100 + k."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, k = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + k)
            k += 1
    return out


def test_scan_with_pii_model_dir():
    """`--pii-model DIR` end to end on pii-tiny (random weights) with a byte-level BPE tokenizer
    whose ids fit the fixture's 512-token vocabulary: model spans come out in code points."""
    sh = shared_dir()
    if not sh or not os.path.exists(os.path.join(sh, "fixtures", "pii-tiny", "model.safetensors")):
        pytest.skip("pii-tiny fixture not found")
    b2u = byte_level_vocab()
    vocab = {b2u[b]: b for b in range(256)}
    merges = ["a n", "n a", "an na", "w e", "we b", "\u0120 m", "\u0120m a"]
    for m in merges:
        vocab["".join(m.split(" "))] = len(vocab)
    tj = {"version": "1.0", "added_tokens": [], "normalizer": None,
          "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
          "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
    with tempfile.TemporaryDirectory() as d:
        for f in ("config.json", "model.safetensors"):
            os.symlink(os.path.join(sh, "fixtures", "pii-tiny", f), os.path.join(d, f))
        json.dump(tj, open(os.path.join(d, "tokenizer.json"), "w"))
        text = "Hi anna, 😀 mail anna@web.de now été\n"
        r = run(["scan", "--json", "--pii-model", d, "--threads", "2"], text.encode())
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        srcs = {s["source"] for s in out["spans"]}
        assert "model" in srcs  # random weights tag almost every token
        assert 0 <= out["sensitivity"] <= 1
        prev = 0
        for s in out["spans"]:
            assert prev <= s["start"] < s["end"] <= len(text)
            prev = s["end"]
            v = text[s["start"]:s["end"]]
            assert v == v.strip()
        # the rule's e-mail survives the union (e-mail outranks the model's lower categories)
        assert any(text[s["start"]:s["end"]] == "anna@web.de" and s["label"] == "private_email" for s in out["spans"])
        # a directory without its tokenizer is a clear error
        os.remove(os.path.join(d, "tokenizer.json"))
        r = run(["scan", "--pii-model", d], text.encode())
        assert r.returncode == 1 and b"tokenizer" in r.stderr
