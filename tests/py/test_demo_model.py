"""End-to-end truth test: the shipped demonstration model (models/lilac-demo) behind `lilac serve`, asked
held-out questions (never in its training set) with the official `openai` client, greedy, must give
the right answers.

This checks the whole path at once — HTTP and OpenAI JSON, chat template, tokenizer, prefill, decode,
sampler, reasoning split, tool-call parser, detokenizer, session snapshots — against answers a program
can verify, which random-weight fixtures cannot do. The questions and the checks are train/evaluate.py's,
the same code that writes bench/results/demo-model.md.

Thresholds: the issue's target (>= 90 % on two- and three-digit addition, the string tasks and both tool
tasks, the tool calls parsed into `tool_calls` with exact arguments), and for every task a floor a little
below what the shipped model measured (bench/results/demo-model.md), so a regression anywhere in the
path fails here. After a retrain, raise FLOORS to the new figures minus the margin.
"""
import os
import random
import subprocess
import sys

import pytest

openai = pytest.importorskip("openai")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "train"))
import corpus  # noqa: E402
import evaluate  # noqa: E402

MODEL = os.path.join(ROOT, "models", "lilac-demo")
PER_TASK = 20
TARGET = ("add2", "add3") + evaluate.STRING_TASKS + ("tool_calc", "tool_weather")
# Where the shipped model misses the 90 % target in this sample (bench/results/demo-model.md): nowhere since
# the session-3 retrain; an empty tuple.
KNOWN_GAPS = ()
# Floors, thinking on, 20 questions per task: the shipped model (retrained in session 3) measured through
# this very path on the CPU: add2 20, sub 18, mul 20, compare 19, count 20, spell 20, reverse 20, sort 20,
# date 15, units 16, table 18, planet 20, add3 20, tool_calc 20, tool_weather 20; a floor is that minus two
# answers (three for the weaker tasks, whose wrong answers flip more easily between CPUs with other SIMD
# paths).
FLOORS = {"add2": 18, "sub": 16, "mul": 18, "compare": 17, "count": 18, "spell": 18, "reverse": 18,
          "sort": 18, "date": 12, "units": 13, "table": 16, "planet": 18, "add3": 18, "tool_calc": 18,
          "tool_weather": 18}
# per GGUF conversion, 10 questions per target task, thinking on: measured q8_0 / q4_k_m add2 10/10, add3
# 10/10, count 10/10, spell 10/10, reverse 10/10, sort 10/10, tool_calc 10/10, tool_weather 10/10; floors one
# answer under the lower
FORMAT_PER_TASK = 10
FORMAT_FLOORS = {"add2": 9, "add3": 9, "count": 9, "spell": 9, "reverse": 9, "sort": 9, "tool_calc": 9,
                 "tool_weather": 9}


@pytest.fixture(scope="module")
def client():
    assert os.path.isfile(os.path.join(MODEL, "model.safetensors")), "models/lilac-demo is missing"
    srv = evaluate.LilacServer(MODEL, "cpu")
    try:
        yield evaluate.make_client(srv.url, "openai")
    finally:
        rc = srv.stop()
        log = srv.log_text()
        srv.log.close()
    assert rc == 0, "lilac serve did not shut down cleanly: " + log[-2000:]  # a sanitizer report fails here


@pytest.fixture(scope="module")
def results(client):
    items = corpus.make_test_questions(evaluate.TEST_SEED, PER_TASK)
    assert {it["task"] for it in items} == set(FLOORS)
    recs = evaluate.run_format(client, items, (True,), [])
    return {t: [r for r in recs if r["task"] == t] for t in FLOORS}


def test_heldout_questions_are_not_in_training_data():
    rng = random.Random(1)  # the training data's seed (train/README.md)
    train_q = set()
    for _ in range(20000):
        ex = corpus.make_train_example(rng)
        train_q.update(m["content"] for m in ex["messages"] if m["role"] == "user")
    test_q = {it["question"] for it in corpus.make_test_questions(evaluate.TEST_SEED, PER_TASK)}
    test_q |= {it["question"] for conv in evaluate.multi_turn_conversations(8) for it in conv}
    assert len(test_q) > 10 * PER_TASK
    assert not (train_q & test_q)


@pytest.mark.parametrize("task", [t if t not in KNOWN_GAPS else
                                  pytest.param(t, marks=pytest.mark.xfail(reason="known gap of the shipped model",
                                                                          strict=False)) for t in TARGET])
def test_accuracy_target(results, task):
    recs = results[task]
    c = sum(r["ok"] for r in recs)
    assert len(recs) == PER_TASK
    assert c / PER_TASK >= 0.9, f"{task}: {c}/{PER_TASK}; failures: {[r for r in recs if not r['ok']][:3]}"


@pytest.mark.parametrize("task", sorted(FLOORS))
def test_accuracy_floor(results, task):
    recs = results[task]
    c = sum(r["ok"] for r in recs)
    assert c >= FLOORS[task], f"{task}: {c}/{PER_TASK} < {FLOORS[task]}; failures: {[r for r in recs if not r['ok']][:3]}"


def test_tool_calls_come_back_parsed(results):
    """Every calculator question is answered with exactly one parsed tool call (not text), with the
    expression as a JSON string argument; finish details are checked in evaluate.ask_tool."""
    for r in results["tool_calc"]:
        assert len(r["tool_calls"]) == 1 and r["tool_calls"][0]["name"] == "calculator", r
        assert "<tool_call>" not in r["content"], r


def test_multi_turn_reuses_session_state(client):
    """Follow-ups in one conversation (whole history resent, as a client does) reuse the snapshot taken
    where the previous turn began: usage.prompt_tokens_details.cached_tokens covers the earlier turns,
    and the answers stay right."""
    convs = evaluate.multi_turn_conversations(4)
    right = 0
    for conv in convs:
        recs = evaluate.ask_conversation(client, conv, True)
        right += sum(r["ok"] for r in recs)
        for prev, cur in zip(recs, recs[1:]):
            # the previous request's prompt is reused up to where its generation prompt began (a few
            # tokens: `<|im_start|>assistant\n<think>\n`), never the new user message
            assert cur["cached_tokens"] >= prev["prompt_tokens"] - 10, recs
            assert cur["cached_tokens"] < cur["prompt_tokens"], recs
    assert right >= 11, f"{right}/12 multi-turn answers right"


@pytest.mark.parametrize("fmt", ["q8_0", "q4_k_m"])
def test_gguf_conversions_keep_accuracy(fmt, tmp_path):
    items = [it for it in corpus.make_test_questions(evaluate.TEST_SEED, FORMAT_PER_TASK) if it["task"] in TARGET]
    path = evaluate.prepare_format(MODEL, fmt, str(tmp_path))
    with evaluate.LilacServer(path, "cpu") as srv:
        recs = evaluate.run_format(evaluate.make_client(srv.url, "openai"), items, (True,), [])
    for task, floor in FORMAT_FLOORS.items():
        c = sum(r["ok"] for r in recs if r["task"] == task)
        assert c >= floor, f"{fmt} {task}: {c}/{FORMAT_PER_TASK} < {floor}"


def test_urllib_client_gives_the_same_replies(client):
    """The fallback client (for machines without the openai package) sends the same request: the same
    greedy replies, tool call included."""
    items = [it for it in corpus.make_test_questions(evaluate.TEST_SEED, 2) if it["task"] in ("add3", "tool_calc")]
    other = evaluate.UrllibClient(client.base_url)
    for it in items:
        a, b = evaluate.ask_item(client, it, True), evaluate.ask_item(other, it, True)
        assert evaluate.answer_text(dict(a)) == evaluate.answer_text(dict(b)), (a, b)
        assert a["ok"] == b["ok"]


def test_default_model_without_m():
    """`lilac run` with no -m uses the shipped model (found beside the binary)."""
    env = {k: v for k, v in os.environ.items() if k != "LILAC_MODEL"}
    p = subprocess.run([evaluate.lilac_bin(), "run", "--chat", "-p", "What is 21 + 21?", "--quiet"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert evaluate.answer_ok(p.stdout, "42"), p.stdout
