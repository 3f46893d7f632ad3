"""End-to-end truth test: the shipped demonstration model (models/lilac-demo), run greedily through
`lilac run --chat` on held-out questions (never in its training set), must give the right answers.

This checks the whole path at once — chat template, tokenizer, prefill, decode, sampler, reasoning
split, detokenizer — against answers a program can verify, which random-weight fixtures cannot do.
Thresholds: at least 90 % on two- and three-digit addition and on the string tasks (count letters,
spell, reverse, sort); tool calls with exact arguments and the right final answer after the tool
response. The full per-task table (all tasks, thinking on and off) is made by train/evaluate.py and
kept in bench/results/demo-model.md.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "train"))
import corpus  # noqa: E402
import evaluate  # noqa: E402

MODEL = os.path.join(ROOT, "models", "lilac-demo")
PER_TASK = 20
ASSERTED = ("add2", "add3") + evaluate.STRING_TASKS + ("tool_calc", "tool_weather")


@pytest.fixture(scope="module")
def results():
    assert os.path.isfile(os.path.join(MODEL, "model.safetensors")), "models/lilac-demo is missing"
    items = [it for it in corpus.make_test_questions(evaluate.TEST_SEED, PER_TASK) if it["task"] in ASSERTED]
    assert len(items) == PER_TASK * len(ASSERTED)
    return evaluate.evaluate_items(MODEL, items, think=True)


def test_heldout_questions_are_not_in_training_data():
    import random
    rng = random.Random(1)  # the training data's seed (train/README.md)
    train_q = set()
    for _ in range(20000):
        ex = corpus.make_train_example(rng)
        train_q.update(m["content"] for m in ex["messages"] if m["role"] == "user")
    test_q = {it["question"] for it in corpus.make_test_questions(evaluate.TEST_SEED, PER_TASK)}
    assert len(test_q) > 10 * PER_TASK
    assert not (train_q & test_q)


@pytest.mark.parametrize("task", ASSERTED)
def test_accuracy(results, task):
    c, n, bad = results[task]
    assert n == PER_TASK
    assert c / n >= 0.9, f"{task}: {c}/{n} correct; failures: {bad[:5]}"


def test_multi_turn_chat_reuses_state_and_stays_correct():
    """Two questions in one `lilac chat` session: both answered, the second prefill resumes from
    cached state."""
    a = corpus.make_test_questions(evaluate.TEST_SEED + 1, 1)
    q1 = next(it for it in a if it["task"] == "add3")
    q2 = next(it for it in a if it["task"] == "reverse")
    p = subprocess.run([evaluate.lilac_bin(), "chat", "-m", MODEL, "--temp", "0"],
                       input=f"{q1['question']}\n{q2['question']}\n/exit\n", capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert evaluate.answer_ok(p.stdout, q1["answer"]), p.stdout
    assert evaluate.answer_ok(p.stdout, q2["answer"]), p.stdout
    cached = [int(x.split("cached ")[1].split(")")[0]) for x in p.stderr.splitlines() if "(cached " in x]
    assert len(cached) == 2 and cached[0] == 0 and cached[1] > 0, p.stderr
