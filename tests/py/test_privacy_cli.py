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
