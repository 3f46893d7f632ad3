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


def check_sort_scratchpad(question, reasoning, answer):
    """Replays the sort scratchpad's procedure independently of corpus.sort_steps: the numbered list is
    the question's words in order, the count is its length, each "Left" line is the one above with
    exactly the slot of the previous pick blanked, each pick is the earliest letter left, and "So far"
    grows by that word; the answer is the last "So far". -> the number of words."""
    words = question.rsplit(": ", 1)[1].rstrip(".").split(", ")
    lines = reasoning.split("\n")
    assert lines[0] == "First letters:"
    n = len(words)
    assert lines[1:n + 1] == [f"{i + 1}. {w} ({w[0]})" for i, w in enumerate(words)]
    assert lines[n + 1] == f"That is {n} words."
    picks = lines[n + 2:]
    assert len(picks) == n
    left = {i + 1: w[0] for i, w in enumerate(words)}
    so_far = []
    for line in picks:
        head, rest = line.split(". Earliest: ")
        slots = [s.split(" ") for s in head[len("Left: "):].split(", ")]
        assert [int(k) for k, _ in slots] == list(range(1, n + 1))
        assert {int(k): c for k, c in slots if c != "-"} == left
        assert sum(c == "-" for _, c in slots) == len(so_far)
        pick, rest = rest.split(". So far: ")
        num, tail = pick.split(" ", 1)
        letter, word = tail.split(", ")
        assert letter == min(left.values()) == left[int(num)] and word == words[int(num) - 1]
        del left[int(num)]
        so_far.append(word)
        assert rest == ", ".join(so_far) + "."
    assert not left and so_far == sorted(words) and answer == ", ".join(so_far)
    return n


def test_sort_scratchpad_is_a_checkable_selection_sort():
    assert corpus.sort_steps(["melon", "duck", "noble", "juice", "vet"]).split("\n")[-2:] == [
        "Left: 1 -, 2 -, 3 n, 4 -, 5 v. Earliest: 3 n, noble. So far: duck, juice, melon, noble.",
        "Left: 1 -, 2 -, 3 -, 4 -, 5 v. Earliest: 5 v, vet. So far: duck, juice, melon, noble, vet."]
    rng = random.Random(3)
    sizes = {}
    for focus in (False, True):
        for _ in range(300):
            q, r, a, exp = corpus.task_sort(rng, focus)
            n = check_sort_scratchpad(q, r, a)
            assert a == exp
            sizes.setdefault(focus, []).append(n)
    assert set(sizes[False]) == {3, 4, 5} and set(sizes[True]) == {4, 5}
    # the checker itself catches the session-2 model's slips: a letter deleted instead of blanked, a
    # word dropped from the running list
    q = "Sort alphabetically: melon, duck, noble, juice, vet."
    r = corpus.sort_steps(["melon", "duck", "noble", "juice", "vet"])
    for bad in (r.replace("Left: 1 m, 2 -, 3 n, 4 -, 5 v", "Left: 1 m, 2 -, 3 n, 4 n, 5 v"),
                r.replace("So far: duck, juice, melon, noble, vet", "So far: duck, juice, noble, vet"),
                r.replace("That is 5 words", "That is 4 words")):
        assert bad != r
        with pytest.raises((AssertionError, ValueError)):
            check_sort_scratchpad(q, bad, "duck, juice, melon, noble, vet")
    # the training mix (corpus.FOCUS): most sorts the model sees have four or five words
    share = corpus.FOCUS["sort"] * 1 + (1 - corpus.FOCUS["sort"]) * 2 / 3
    assert share >= 0.8


def test_training_conversations_carry_the_sort_scratchpad():
    """Sorts in the training stream (with thinking) carry exactly the scratchpad that the checker above
    replays, and they are a larger share of the stream than in session 2 (3 of 28 weights)."""
    rng = random.Random(11)
    seen = 0
    for _ in range(3000):
        ex = corpus.make_train_example(rng)
        msgs = ex["messages"]
        for u, a in zip(msgs, msgs[1:]):
            if u["role"] == "user" and a["role"] == "assistant" and a["reasoning_content"] \
                    and u["content"].startswith(("Sort these words", "Sort alphabetically", "Put these words")):
                check_sort_scratchpad(u["content"], a["reasoning_content"], a["content"])
                seen += 1
    assert seen > 50
    assert corpus.WEIGHTS["sort"] / sum(corpus.WEIGHTS.values()) > 3 / 28
