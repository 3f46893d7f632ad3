"""`lilac tokenize` / `detokenize` against HuggingFace tokenizers on random and adversarial text,
with the real Qwen3 tokenizer and the Qwen3.5 split regex substituted in its JSON."""
import gzip, json, os, random, subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
LILAC = os.environ.get("LILAC_BIN", os.path.join(ROOT, "build", "lilac"))
SHARED = os.environ.get("LILAC_SHARED") or next((p for p in (os.path.join(ROOT, "..", "shared"), "/work/shared")
                                                  if os.path.isdir(p)), None)
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@pytest.fixture(scope="module", params=["qwen3", "qwen35re"])
def tok(request, tmp_path_factory):
    if SHARED is None:
        pytest.skip("shared/ not found")
    spec = json.loads(gzip.open(os.path.join(SHARED, "reference/tokenizers/qwen3/tokenizer.json.gz")).read())
    if request.param == "qwen35re":
        for p in spec["pre_tokenizer"]["pretokenizers"]:
            if p["type"] == "Split":
                p["pattern"] = {"Regex": QWEN35_REGEX}
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return str(path), tokenizers.Tokenizer.from_str(json.dumps(spec))


RANGES = [(0x20, 0x7E)] * 6 + [(0x9, 0xD), (0x300, 0x36F), (0xC0, 0x17F), (0x1100, 0x1112), (0x1161, 0x1175),
                               (0xAC00, 0xD7A3), (0x4E00, 0x9FFF), (0x3040, 0x30FF), (0x600, 0x6FF), (0x900, 0x97F),
                               (0xE00, 0xE7F), (0x1F300, 0x1F6FF), (0x200B, 0x200D), (0x2000, 0x200A), (0x3000, 0x3000),
                               (0xA0, 0xA0), (0x85, 0x85), (0x2028, 0x2029), (0x30, 0x39), (0x660, 0x669), (0x1, 0x1F),
                               (0xFEFF, 0xFEFF), (0x10000, 0x1005D), (0x13000, 0x1342E), (0x1D400, 0x1D6A5),
                               (0x20000, 0x2A6DF), (0xF0000, 0xF00FF), (0x370, 0x3FF),
                               (0x1E00, 0x1EFF)]
# Known differences, from the regex engines' Unicode tables (PCRE2 10.42 has Unicode 14; tokenizers'
# Oniguruma is newer): U+180E is \s for PCRE2 only, and characters assigned after Unicode 14 (such as
# U+1D2C0-U+1D2D3, Kaktovik numerals, \p{N}; U+13460-U+143FF, Egyptian hieroglyphs, \p{L}) are
# unassigned for PCRE2. The random text keeps to blocks assigned by Unicode 14; U+180E and the
# Kaktovik numerals are pinned in test_known_unicode_differences.
FRAGMENTS = ["'s", "'LL", "<|im_start|>", "<think>", "</tool_call>", "<|im_end", "\r\n", "   ", "\n\n\n", "123456",
             "café", "e\u0301", "ﬁ", "Ⅻ", "x**2", "https://a.b/c?d=e"]


def rand_text(rng):
    out = []
    for _ in range(rng.randint(0, 30)):
        if rng.random() < 0.2:
            out.append(rng.choice(FRAGMENTS))
        else:
            lo, hi = rng.choice(RANGES)
            cp = rng.randint(lo, hi)
            out.append(chr(cp) if not 0xD800 <= cp <= 0xDFFF else "?")
    return "".join(out)


def lilac_encode(path, texts):
    inp = "".join(json.dumps(t) + "\n" for t in texts).encode()
    r = subprocess.run([LILAC, "tokenize", "-t", path, "--jsonl"], input=inp, capture_output=True, check=True)
    return [json.loads(l) for l in r.stdout.decode().splitlines()]


def test_random_text_matches_hf(tok):
    path, hf = tok
    rng = random.Random(7)
    texts = [t for t in (rand_text(rng) for _ in range(1500)) if t]
    got = lilac_encode(path, texts)
    assert len(got) == len(texts)
    for t, g in zip(texts, got):
        assert g == hf.encode(t, add_special_tokens=False).ids, repr(t)


def test_cli_tokens_and_detokenize(tok):
    path, hf = tok
    text = "Hello <|im_start|>wörld 你好\n"
    r = subprocess.run([LILAC, "tokenize", "-t", path, "--tokens"], input=text.encode(), capture_output=True, check=True)
    assert json.loads(r.stdout) == hf.encode(text, add_special_tokens=False).tokens
    ids = hf.encode(text, add_special_tokens=False).ids
    r = subprocess.run([LILAC, "detokenize", "-t", path], input=json.dumps(ids).encode(), capture_output=True, check=True)
    assert r.stdout.decode() == hf.decode(ids, skip_special_tokens=False)
    r = subprocess.run([LILAC, "detokenize", "-t", path, "--skip-special"], input=json.dumps(ids).encode(),
                       capture_output=True, check=True)
    assert r.stdout.decode() == hf.decode(ids, skip_special_tokens=True)
    # broken UTF-8 in the ids decodes like HF (U+FFFD per maximal invalid subpart)
    broken = hf.encode("\u4f60", add_special_tokens=False).ids
    byte_ids = [hf.token_to_id(t) for t in ("ä", "½")]  # the byte-level symbols of E4 BD
    ids = byte_ids + hf.encode("ok", add_special_tokens=False).ids + broken
    r = subprocess.run([LILAC, "detokenize", "-t", path], input=json.dumps(ids).encode(), capture_output=True, check=True)
    assert r.stdout.decode() == hf.decode(ids)
    r = subprocess.run([LILAC, "detokenize", "-t", path], input=b"[1, 99999999]", capture_output=True)
    assert r.returncode == 1 and b"99999999" in r.stderr


def test_known_unicode_differences(tok):
    """Documents the only code points (of U+0080-U+2FFFF) where the split differs from HF."""
    path, hf = tok
    odd = [0x180E] + list(range(0x1D2C0, 0x1D2D4))
    texts = ["a  %sb" % chr(c) for c in odd] + ["a  %sb" % chr(c) for c in (0x180D, 0x1D2BF, 0x1D2D4, 0x2000)]
    got = lilac_encode(path, texts)
    for c, t, g in zip(odd + [0x180D, 0x1D2BF, 0x1D2D4, 0x2000], texts, got):
        assert (g == hf.encode(t, add_special_tokens=False).ids) == (c not in odd), hex(c)
