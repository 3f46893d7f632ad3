"""The demonstration model's corpus and tokenizer: the corpus renderer (which also gives the loss
mask) is byte-identical to the official Qwen3.6 template as transformers renders it, and lilac's
tokenizer encodes the rendered conversations into exactly the ids the model was trained on."""
import json
import os
import random
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "train"))
import corpus  # noqa: E402

LILAC = os.environ.get("LILAC_BIN", os.path.join(ROOT, "build", "lilac"))
MODEL = os.path.join(ROOT, "models", "lilac-demo")


def official_template():
    jinja2 = pytest.importorskip("jinja2")

    def tojson(x, indent=None, separators=None, sort_keys=False):  # transformers' tojson
        return json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open(os.path.join(MODEL, "chat_template.jinja"), encoding="utf-8") as f:
        return env.from_string(f.read())


def test_renderer_matches_official_template():
    tpl = official_template()
    rng = random.Random(3)
    kinds = set()
    for _ in range(1500):
        ex = corpus.make_train_example(rng)
        text, spans = corpus.render(ex)
        want = tpl.render(messages=ex["messages"], tools=ex["tools"], add_generation_prompt=False)
        assert text == want
        kinds.add((bool(ex["tools"]), ex["think"], sum(m["role"] == "user" for m in ex["messages"]) > 1))
        # trained spans are what the assistant writes: each ends at an <|im_end|> or inside a turn
        assert spans and all(0 <= a < b <= len(text) for a, b in spans)
        assert text[spans[-1][0]:spans[-1][1]] == "<|im_end|>"
        assert not any("<|im_start|>" in text[a:b] for a, b in spans)
    assert len(kinds) >= 6  # tools/no tools x thinking/not x single/multi-turn all exercised


def test_tokenizer_in_shipped_model_matches_training_ids():
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    assert tok.get_vocab_size() == 1024
    rng = random.Random(4)
    for _ in range(12):
        text, _ = corpus.render(corpus.make_train_example(rng))
        p = subprocess.run([LILAC, "tokenize", "-t", MODEL], input=text, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == tok.encode(text, add_special_tokens=False).ids


def test_special_tokens_are_single_ids():
    p = subprocess.run([LILAC, "tokenize", "-t", MODEL], input="<|im_start|><think></think><tool_call><|im_end|>",
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    ids = json.loads(p.stdout)
    assert len(ids) == 5 and all(i >= 1015 for i in ids)


def test_heldout_bucket_is_a_tenth_and_deterministic():
    qs = [f"What is {a} + {b}?" for a in range(100) for b in range(30)]
    frac = sum(map(corpus.is_heldout, qs)) / len(qs)
    assert 0.07 < frac < 0.13
    assert [corpus.is_heldout(q) for q in qs[:50]] == [corpus.is_heldout(q) for q in qs[:50]]
    a = corpus.make_test_questions(7, 5)
    b = corpus.make_test_questions(7, 5)
    assert a == b and all(corpus.is_heldout(it["question"]) for it in a)
