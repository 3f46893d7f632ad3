"""`lilac template` against Jinja2 configured as transformers' apply_chat_template: the stored
semantics cases, and random conversations through the official Qwen templates."""
import json, os, random, subprocess, sys, tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))
jinja2 = pytest.importorskip("jinja2")
from jinja_ref import CASES, render  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
LILAC = os.environ.get("LILAC_BIN", os.path.join(ROOT, "build", "lilac"))
SHARED = os.environ.get("LILAC_SHARED") or next((p for p in (os.path.join(ROOT, "..", "shared"), "/work/shared")
                                                  if os.path.isdir(p)), None)


def lilac_render(template_src, request):
    with tempfile.TemporaryDirectory() as d:
        tp, rp = os.path.join(d, "t.jinja"), os.path.join(d, "r.json")
        open(tp, "w", encoding="utf-8").write(template_src)
        open(rp, "w", encoding="utf-8").write(json.dumps(request))
        r = subprocess.run([LILAC, "template", "--template", tp, "--request", rp], capture_output=True)
    if r.returncode:
        return "error", r.stderr.decode().split(": ", 1)[-1].rstrip("\n")
    return "ok", r.stdout.decode()


def test_stored_cases_match_jinja2():
    stored = json.load(open(os.path.join(ROOT, "tests", "data", "template_cases.json"), encoding="utf-8"))
    assert len(stored) == len(CASES)
    for c, (name, src, variables) in zip(stored, CASES):
        kind, text = render(src, variables)
        assert c["name"] == name
        assert c.get("rendered" if kind == "ok" else "error") == text, name


@pytest.mark.parametrize("name,src,variables", CASES, ids=[c[0] for c in CASES])
def test_cli_semantics(name, src, variables):
    want = render(src, variables)
    got = lilac_render(src, {"messages": [], "chat_template_kwargs": variables})
    assert got == want


WORDS = ["hello", "Grüße", "你好", "🌍", "  padded ", "\n", "<think>", "</think>", "x y", "tab\t", "", "'q'", '"dq"',
         "<tool_response>", "</tool_response>", "\\", "{json}"]


def rand_text(rng):
    return "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))


def rand_args(rng):
    vals = [rng.randint(-5, 99), rng.random() < 0.5, None, rand_text(rng), 1.5, [1, "a", None], {"k": [True, 2.25]}]
    return {f"p{i}": rng.choice(vals) for i in range(rng.randint(0, 3))}


def rand_conversation(rng):
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": rand_text(rng)})
    for _ in range(rng.randint(1, 5)):
        msgs.append({"role": "user", "content": rand_text(rng) if rng.random() < 0.8 else
                     [{"type": "text", "text": rand_text(rng)} for _ in range(rng.randint(1, 3))]})
        r = rng.random()
        if r < 0.4:
            m = {"role": "assistant", "content": rand_text(rng)}
            if rng.random() < 0.3:
                m["reasoning_content"] = rand_text(rng)
            elif rng.random() < 0.3:
                m["content"] = "<think>\n" + rand_text(rng) + "\n</think>\n\n" + rand_text(rng)
            msgs.append(m)
        elif r < 0.7:
            calls = [{"type": "function", "function": {"name": "f%d" % i, "arguments": rand_args(rng)}}
                     for i in range(rng.randint(1, 2))]
            msgs.append({"role": "assistant", "content": rand_text(rng), "tool_calls": calls})
            for _ in range(rng.randint(1, 2)):
                msgs.append({"role": "tool", "content": rand_text(rng)})
    if rng.random() < 0.1:  # provoke the templates' own errors now and then
        msgs.append({"role": "system", "content": "late"})
    tools = None
    if rng.random() < 0.4:
        tools = [{"type": "function", "function": {"name": "f0", "description": rand_text(rng),
                                                   "parameters": {"type": "object", "properties": {"p0": {"type": "number"}}}}}]
    kwargs = {}
    if rng.random() < 0.4:
        kwargs["enable_thinking"] = rng.random() < 0.5
    if rng.random() < 0.3:
        kwargs["preserve_thinking"] = rng.random() < 0.5
    return msgs, tools, rng.random() < 0.8, kwargs


@pytest.mark.skipif(SHARED is None, reason="shared/ not found")
@pytest.mark.parametrize("template", ["qwen3.6-35b-a3b.chat_template.jinja", "qwen3.5-35b-a3b.chat_template.jinja",
                                      "qwen3.chat_template.jinja"])
def test_random_conversations(template):
    src = open(os.path.join(SHARED, "reference", "templates", template), encoding="utf-8").read()
    rng = random.Random(hash(template) & 0xffff)
    for i in range(60):
        msgs, tools, agp, kwargs = rand_conversation(rng)
        want = render(src, dict(messages=msgs, tools=tools, add_generation_prompt=agp, documents=None, **kwargs))
        req = {"messages": msgs, "add_generation_prompt": agp, "chat_template_kwargs": kwargs}
        if tools is not None:
            req["tools"] = tools
        got = lilac_render(src, req)
        if want[0] == "error":
            assert got[0] == "error" and got[1] == want[1], (i, msgs, got, want)
        else:
            assert got == want, (i, json.dumps(req)[:2000])
