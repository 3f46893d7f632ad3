"""End-to-end tests of `lilac serve`: a real server process on a free port, a scripted model that
speaks through the real Qwen3 tokenizer (tests/py/chatmodel.py), driven with the official `openai`
client and with raw HTTP for the bad cases.

Scripted answers (see chatmodel.py): thinking on -> reasoning "Let me think", content
"Hello world!"; thinking off -> "Hello world!"; thinking off with logit_bias on <tool_call> ->
get_weather(city="Paris"). A prompt ending in any other token continues with seeded random text.
"""
import json
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from lilactest import LILAC, Server, shared  # noqa: E402
from chatmodel import TOOL_CALL, make_chat_model  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
KEY = "sk-test-0123456789"
SECRET = "PROMPT-MARKER-7f3a9c"  # must never reach the server log
CTX = 1024
MAX_BODY = 65536
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]



@pytest.fixture(scope="session")
def model(tmp_path_factory):
    sh = shared()
    if not pathlib.Path(LILAC).exists():
        pytest.skip(f"{LILAC} not built")
    d = tmp_path_factory.mktemp("chatmodel")
    info = make_chat_model(sh / "fixtures", sh / "reference", d / "cm")
    info["dir"] = d / "cm"
    return info


@pytest.fixture(scope="session")
def server(model, tmp_path_factory):
    s = Server(model["dir"], tmp_path_factory.mktemp("log"), "--api-key", KEY, "--ctx", str(CTX), "--max-queue", "32",
               "--max-body", str(MAX_BODY), "--cors", "http://app.example", "--alias", "tiny-alias")
    yield s
    assert s.stop() == 0, "graceful shutdown exits 0"
    log = s.log_path.read_text(errors="replace")
    assert SECRET not in log, "prompt text leaked into the server log"
    assert " /v1/" in log and "prompt=" in log  # the access log is there, without the prompts


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def model_id(model):
    return model["dir"].name


def raw(server, method, path, body=None, headers=None, key=KEY, **kw):
    h = {"Authorization": f"Bearer {key}"} if key else {}
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    h.update(headers or {})
    return httpx.request(method, server.url + path, content=body, headers=h, timeout=120, **kw)


def metric(server, name):
    text = raw(server, "GET", "/metrics").text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise KeyError(name)


def user(text="hi"):
    return [{"role": "user", "content": f"{text} {SECRET}"}]


# ---------------------------------------------------------------- chat through the openai client

def test_chat_thinking(client, model):
    r = client.chat.completions.create(model=model_id(model), messages=user())
    m = r.choices[0].message
    assert m.content == "Hello world!"
    assert m.model_extra["reasoning_content"] == "Let me think"
    assert r.choices[0].finish_reason == "stop"
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == model_id(model)
    u = r.usage
    # 3 reasoning + </think> + \n\n + 3 answer + <|im_end|>
    assert u.completion_tokens == 9
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens and u.prompt_tokens > 5
    assert u.prompt_tokens_details.cached_tokens >= 0


def test_chat_thinking_off(client, model):
    r = client.chat.completions.create(model=model_id(model), messages=user(), extra_body=NO_THINK)
    m = r.choices[0].message
    assert m.content == "Hello world!"
    assert not (m.model_extra or {}).get("reasoning_content")
    assert r.usage.completion_tokens == 4
    # reasoning_effort "none" turns thinking off as well
    r = client.chat.completions.create(model=model_id(model), messages=user(), extra_body={"reasoning_effort": "none"})
    assert r.choices[0].message.content == "Hello world!" and r.usage.completion_tokens == 4


def test_chat_prefix_reuse(client, model):
    msgs = user("a conversation that is asked twice")
    r1 = client.chat.completions.create(model=model_id(model), messages=msgs, extra_body=NO_THINK)
    r2 = client.chat.completions.create(model=model_id(model), messages=msgs, extra_body=NO_THINK)
    # the snapshot taken at the end of the first prompt serves the second (all but its last token)
    assert r2.usage.prompt_tokens_details.cached_tokens == r2.usage.prompt_tokens - 1
    assert r2.choices[0].message.content == r1.choices[0].message.content
    # the next turn of the conversation: only the new suffix is prefilled
    msgs3 = msgs + [{"role": "assistant", "content": r1.choices[0].message.content},
                    {"role": "user", "content": "and again"}]
    r3 = client.chat.completions.create(model=model_id(model), messages=msgs3, extra_body=NO_THINK)
    # (all of the first prompt but its 7-token generation turn: <|im_start|>assistant and the empty think block)
    assert r3.usage.prompt_tokens_details.cached_tokens >= r1.usage.prompt_tokens - 7


def test_sessions_isolated_per_key(model, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# two users\nsk-alice\n\nsk-bob\n")
    s = Server(model["dir"], tmp_path, "--api-key-file", str(keys), "--ctx", str(CTX))
    try:
        def cached(key):
            c = openai.OpenAI(base_url=s.url + "/v1", api_key=key, max_retries=0)
            r = c.chat.completions.create(model=model_id(model), messages=user("private"), extra_body=NO_THINK)
            return r.usage.prompt_tokens_details.cached_tokens
        assert cached("sk-alice") == 0
        assert cached("sk-alice") > 0
        assert cached("sk-bob") == 0  # alice's snapshot is not bob's
        with pytest.raises(openai.AuthenticationError):
            cached("sk-carol")
    finally:
        assert s.stop() == 0


def test_chat_stream(client, model):
    stream = client.chat.completions.create(model=model_id(model), messages=user(), stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks if c.choices)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert reasoning == "Let me think"
    assert content == "Hello world!"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1 and finals[0].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 9
    assert all(c.usage is None for c in chunks[:-1])


def test_stream_raw_framing(server):
    r = raw(server, "POST", "/v1/chat/completions", {"messages": user(), "stream": True, **NO_THINK})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = r.text.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    for e in events[:-2]:
        assert e.startswith("data: ") and "\n" not in e
        json.loads(e[6:])
    assert "usage" not in r.text  # no include_usage: no usage key at all


def test_stop_and_length(client, model):
    r = client.chat.completions.create(model=model_id(model), messages=user(), stop=["world"], extra_body=NO_THINK)
    assert r.choices[0].message.content == "Hello "
    assert r.choices[0].finish_reason == "stop"
    r = client.chat.completions.create(model=model_id(model), messages=user(), stop="!", extra_body=NO_THINK)
    assert r.choices[0].message.content == "Hello world"
    r = client.chat.completions.create(model=model_id(model), messages=user(), max_tokens=2, extra_body=NO_THINK)
    assert r.choices[0].message.content == "Hello world"
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 2
    r = client.chat.completions.create(model=model_id(model), messages=user(), max_completion_tokens=1,
                                       max_tokens=50, extra_body=NO_THINK)
    assert r.choices[0].message.content == "Hello" and r.choices[0].finish_reason == "length"


def test_tools(client, model):
    bias = {str(TOOL_CALL): 100}
    r = client.chat.completions.create(model=model_id(model), messages=user("weather in Paris?"), tools=TOOLS,
                                       logit_bias=bias, extra_body=NO_THINK)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls"
    assert c.message.content is None
    (call,) = c.message.tool_calls
    assert call.type == "function" and call.id
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    # streamed: one delta with the whole call
    chunks = list(client.chat.completions.create(model=model_id(model), messages=user("weather?"), tools=TOOLS,
                                                 logit_bias=bias, stream=True, extra_body=NO_THINK))
    calls = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    assert len(calls) == 1 and calls[0].index == 0 and calls[0].function.name == "get_weather"
    assert json.loads(calls[0].function.arguments) == {"city": "Paris"}
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason] == ["tool_calls"]
    # tool_choice none: the model is not offered the tools, so no call is parsed
    r = client.chat.completions.create(model=model_id(model), messages=user(), tools=TOOLS, tool_choice="none",
                                       logit_bias=bias, extra_body=NO_THINK)
    assert r.choices[0].finish_reason == "stop" and not r.choices[0].message.tool_calls
    # a tool result turn renders and answers
    msgs = user("weather?") + [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call.id, "type": "function", "function": {
            "name": "get_weather", "arguments": call.function.arguments}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    r = client.chat.completions.create(model=model_id(model), messages=msgs, tools=TOOLS, extra_body=NO_THINK)
    assert r.choices[0].message.content == "Hello world!"


def test_logprobs(client, model):
    r = client.chat.completions.create(model=model_id(model), messages=user(), logprobs=True, top_logprobs=2,
                                       extra_body=NO_THINK)
    lp = r.choices[0].logprobs.content
    assert [t.token for t in lp[:3]] == ["Hello", " world", "!"]
    for t in lp[:3]:
        assert -0.05 < t.logprob <= 0
        assert bytes(t.bytes).decode() == t.token
        assert len(t.top_logprobs) == 2 and t.top_logprobs[0].token == t.token
        assert t.top_logprobs[1].logprob <= t.top_logprobs[0].logprob
    r = client.chat.completions.create(model=model_id(model), messages=user(), extra_body=NO_THINK)
    assert r.choices[0].logprobs is None


def test_seed_reproducible(client, model):
    def gen(seed, stream=False):
        kw = dict(model=model_id(model), prompt="Once upon a time", max_tokens=6, temperature=1.0, seed=seed)
        if stream:
            return "".join(c.choices[0].text for c in client.completions.create(stream=True, **kw) if c.choices)
        return client.completions.create(**kw).choices[0].text
    a, b, c = gen(42), gen(42), gen(43)
    assert a == b and a != c and len(a) > 0
    assert gen(42, stream=True) == a


def test_completions(client, server, model):
    r = client.completions.create(model=model_id(model), prompt="Once upon a time", max_tokens=5, temperature=0)
    assert r.object == "text_completion" and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5 and r.usage.prompt_tokens == 4
    ids = raw(server, "POST", "/tokenize", {"content": "Once upon a time"}).json()["tokens"]
    assert len(ids) == 4
    r2 = client.completions.create(model=model_id(model), prompt=ids, max_tokens=5, temperature=0)
    assert r2.choices[0].text == r.choices[0].text
    r3 = client.completions.create(model=model_id(model), prompt="Once upon a time", max_tokens=3, temperature=0,
                                   logprobs=2)
    lp = r3.choices[0].logprobs
    assert len(lp.tokens) == 3 and len(lp.token_logprobs) == 3 and len(lp.top_logprobs) == 3
    assert lp.text_offset[0] == 0 and "".join(lp.tokens) == r3.choices[0].text
    # the prompt ending in "\n\n" enters the scripted answer: text continues it
    r4 = client.completions.create(model=model_id(model), prompt="Q\n\n", max_tokens=10, temperature=0)
    assert r4.choices[0].text == "Hello world!" and r4.choices[0].finish_reason == "stop"


def test_models(client, model):
    ids = [m.id for m in client.models.list().data]
    assert ids == [model_id(model), "tiny-alias"]
    assert client.models.retrieve(model_id(model)).id == model_id(model)
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")
    r = client.chat.completions.create(model="tiny-alias", messages=user(), extra_body=NO_THINK)
    assert r.model == "tiny-alias"


def test_client_errors(client, model):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=user())
    assert e.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id(model), messages=user(), n=2)
    assert e.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id(model), messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}])
    assert "images are not supported" in e.value.message and e.value.body["param"] == "messages[0].content[1]"
    with pytest.raises(openai.BadRequestError) as e:  # prompt + max_tokens beyond --ctx
        client.chat.completions.create(model=model_id(model), messages=user(), max_tokens=CTX - 3)
    assert e.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=model_id(model), messages=user(), max_tokens=10 ** 9)
    assert e.value.body["param"] == "max_tokens"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=model_id(model), messages=user(), response_format={"type": "json_object"})
    bad = openai.OpenAI(base_url=client.base_url, api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=model_id(model), messages=user())
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


def test_content_parts_and_roles(client, model):
    msgs = [{"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}]
    r = client.chat.completions.create(model=model_id(model), messages=msgs, extra_body=NO_THINK)
    assert r.choices[0].message.content == "Hello world!"


# ---------------------------------------------------------------- raw HTTP: bad input

@pytest.mark.parametrize("body,param", [
    (b'{"messages": [', None),
    (b'{"messages": [{"role": "user", "content": "hi"}]} trailing', None),
    (b'[1, 2]', None),
    (b'', None),
    (b'{}', "messages"),
    (b'{"messages": []}', "messages"),
    (b'{"messages": "hi"}', "messages"),
    (b'{"messages": [{"role": "user"}]}', "messages[0].content"),
    (b'{"messages": [{"role": "robot", "content": "x"}]}', "messages[0].role"),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', "temperature"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e15}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": "10"}', "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stream": 1}', "stream"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stop": [1]}', "stop[0]"),
    (b'{"messages": [{"role": "user", "content": "x"}], "tools": {}}', "tools"),
    (b'{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3}', "top_logprobs"),
    (b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', None),      # invalid UTF-8
    (b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}', None),     # NUL escape
    (b'{"messages": [{"role": "user", "content": "a\x00b"}]}', None),        # raw NUL
    (b'[' * 100 + b']' * 100, None),                                           # nesting
    # found by the engine, still a 400
    (b'{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"999999": 5}}', None),
    (b'{"prompt": [1, 2, 999999]}', None),
])
def test_bad_requests(server, body, param):
    path = "/v1/completions" if body.startswith(b'{"prompt"') else "/v1/chat/completions"
    r = raw(server, "POST", path, body, {"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["message"]
    assert err["param"] == param
    if param:
        assert param in err["message"]


def test_unknown_fields_ignored(server):
    r = raw(server, "POST", "/v1/chat/completions", {"messages": user(), "frobnicate": {"x": [1]}, "user": "u",
                                                     "metadata": {"a": "b"}, "store": False, "temperature": None,
                                                     "parallel_tool_calls": True, "service_tier": "auto", **NO_THINK})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Hello world!"


def test_routes_and_methods(server):
    r = raw(server, "GET", "/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["message"]
    r = raw(server, "GET", "/v1/chat/completions")
    assert r.status_code == 405 and "POST" in r.headers["allow"]
    r = raw(server, "DELETE", "/v1/models")
    assert r.status_code == 405 and "GET" in r.headers["allow"]
    r = raw(server, "GET", "/health", key=None)          # no key needed
    assert r.status_code == 200 and r.json() == {"status": "ok"}
    r = raw(server, "GET", "/", key=None)                # the chat page
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "v1/chat/completions" in r.text and "reasoning_content" in r.text and "</html>" in r.text
    r = raw(server, "POST", "/chat/completions", {"messages": user(), **NO_THINK})   # /v1-less alias
    assert r.status_code == 200


def test_web_page_script(server, tmp_path):
    """The page's script parses (node --check), and its SSE reader, run by node's fetch against
    this server, reassembles a streamed answer."""
    import re
    import shutil
    node = shutil.which("node")
    if not node:
        pytest.skip("node not installed")
    page = raw(server, "GET", "/", key=None).text
    script = re.search(r"<script>(.*)</script>", page, re.S).group(1)
    (tmp_path / "page.js").write_text(script)
    r = subprocess.run([node, "--check", str(tmp_path / "page.js")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    fn = re.search(r"async function readSSE\(.*?\n}\n", script, re.S).group(0)
    body = json.dumps({"messages": user(), "stream": True, "stream_options": {"include_usage": True}})
    (tmp_path / "sse.mjs").write_text(fn + f"""
const res = await fetch({json.dumps(server.url + "/v1/chat/completions")}, {{method: "POST",
  headers: {{"Content-Type": "application/json", "Authorization": "Bearer {KEY}"}}, body: {json.dumps(body)}}});
let content = "", reasoning = "", usage = null;
await readSSE(res, (c) => {{
  if (c.usage) usage = c.usage;
  const d = c.choices && c.choices[0] && c.choices[0].delta;
  if (d && d.content) content += d.content;
  if (d && d.reasoning_content) reasoning += d.reasoning_content;
}});
console.log(JSON.stringify({{content, reasoning, tokens: usage && usage.completion_tokens}}));
""")
    r = subprocess.run([node, str(tmp_path / "sse.mjs")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"content": "Hello world!", "reasoning": "Let me think", "tokens": 9}


def test_auth(server):
    body = {"messages": user(), **NO_THINK}
    r = raw(server, "POST", "/v1/chat/completions", body, key=None)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert r.headers.get("www-authenticate") == "Bearer"
    assert raw(server, "POST", "/v1/chat/completions", body, key=KEY + "x").status_code == 401
    assert raw(server, "POST", "/v1/chat/completions", body, key=KEY[:-1]).status_code == 401
    assert raw(server, "GET", "/metrics", key=None).status_code == 401
    assert raw(server, "POST", "/tokenize", {"content": "x"}, key=None).status_code == 401
    r = raw(server, "POST", "/v1/chat/completions", body, key=None, headers={"Authorization": f"Basic {KEY}"})
    assert r.status_code == 401


def test_cors(server):
    r = raw(server, "OPTIONS", "/v1/chat/completions", key=None,
            headers={"Origin": "http://app.example", "Access-Control-Request-Method": "POST"})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == "http://app.example"
    assert "Authorization" in r.headers["access-control-allow-headers"]
    r = raw(server, "GET", "/v1/models", headers={"Origin": "http://app.example"})
    assert r.headers["access-control-allow-origin"] == "http://app.example"


def test_body_limit(server):
    big = json.dumps({"messages": [{"role": "user", "content": "x" * (MAX_BODY + 10)}]}).encode()
    r = raw(server, "POST", "/v1/chat/completions", big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"

    def chunks():  # no Content-Length: chunked upload, found too big while reading
        for i in range(0, len(big), 8192):
            yield big[i:i + 8192]
    r = raw(server, "POST", "/v1/chat/completions", chunks())
    assert r.status_code == 413
    assert raw(server, "GET", "/health").status_code == 200


def test_tokenize_detokenize(server):
    r = raw(server, "POST", "/tokenize", {"content": "Hello world!", "with_pieces": True})
    toks = r.json()["tokens"]
    assert [t["piece"] for t in toks] == ["Hello", " world", "!"]
    r = raw(server, "POST", "/detokenize", {"tokens": [t["id"] for t in toks]})
    assert r.json() == {"content": "Hello world!"}
    r = raw(server, "POST", "/tokenize", {"content": "<|im_start|>", "parse_special": True})
    assert r.json()["tokens"] == [151644]
    r = raw(server, "POST", "/tokenize", {"content": "é", "with_pieces": True})  # one byte per token? pieces as bytes
    assert "".join(t["piece"] if isinstance(t["piece"], str) else bytes(t["piece"]).decode("latin1")
                   for t in r.json()["tokens"])
    assert raw(server, "POST", "/detokenize", {"tokens": ["x"]}).json()["error"]["param"] == "tokens[0]"
    assert raw(server, "POST", "/detokenize", {"tokens": [10 ** 9]}).status_code == 400


def test_metrics(server, client, model):
    before = metric(server, "lilac_chat_requests_total")
    client.chat.completions.create(model=model_id(model), messages=user(), extra_body=NO_THINK)
    assert metric(server, "lilac_chat_requests_total") == before + 1
    text = raw(server, "GET", "/metrics").text
    for name in ("lilac_http_requests_total", "lilac_queue_length", "lilac_prompt_tokens_total",
                 "lilac_completion_tokens_total", "lilac_cached_tokens_total", "lilac_prefill_tokens_per_second",
                 "lilac_decode_tokens_per_second", "lilac_snapshot_hits_total"):
        assert f"\n{name} " in text
    assert metric(server, "lilac_completion_tokens_total") > 0


# ---------------------------------------------------------------- concurrency, cancellation, limits

def long_stream(server, max_tokens=900):
    """Starts a long streamed completion on a raw socket; returns the socket after the first chunk."""
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": max_tokens, "stream": True, "seed": 1}).encode()
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Authorization: Bearer " + KEY.encode() + b"\r\nContent-Length: " + str(len(body)).encode() +
              b"\r\n\r\n" + body)
    s.settimeout(60)
    got = b""
    while b"data: " not in got:
        d = s.recv(4096)
        assert d, f"stream ended early: {got!r}"
        got += d
        if b"\r\n\r\n" in got:
            assert got.startswith(b"HTTP/1.1 200"), got
    return s


def test_disconnect_cancels_only_that_request(server, client, model):
    cancelled = metric(server, "lilac_requests_cancelled_total")
    tokens0 = metric(server, "lilac_completion_tokens_total")
    a = long_stream(server)
    # a second client queued behind it
    result = {}

    def other():
        t0 = time.time()
        r = client.chat.completions.create(model=model_id(model), messages=user(), extra_body=NO_THINK)
        result["content"], result["sec"] = r.choices[0].message.content, time.time() - t0
    t = threading.Thread(target=other)
    t.start()
    time.sleep(0.5)
    a.close()  # the first client goes away mid-stream
    t.join(60)
    assert result.get("content") == "Hello world!"
    assert result["sec"] < 30, "the queued request waited for the whole cancelled generation"
    assert metric(server, "lilac_requests_cancelled_total") == cancelled + 1
    assert metric(server, "lilac_completion_tokens_total") - tokens0 < 1000
    assert raw(server, "GET", "/health").status_code == 200


def test_queue_full_429(model, tmp_path):
    s = Server(model["dir"], tmp_path, "--max-queue", "1", "--ctx", str(CTX))
    try:
        a = long_stream(s)  # running
        body = json.dumps({"prompt": "Once upon a time", "max_tokens": 5}).encode()
        b = socket.create_connection(("127.0.0.1", s.port))  # waiting (the queue's one place)
        b.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
                  b"\r\n\r\n" + body)
        time.sleep(0.5)
        r = httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}, timeout=30)
        assert r.status_code == 429
        assert int(r.headers["retry-after"]) >= 1
        assert r.json()["error"]["type"] == "rate_limit_error"
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            c.completions.create(model=model["dir"].name, prompt="x", max_tokens=1)
        a.close()  # the running one goes: the waiting one runs and answers
        b.settimeout(60)
        got = b""
        while b'"finish_reason"' not in got:
            d = b.recv(4096)
            assert d
            got += d
        assert got.startswith(b"HTTP/1.1 200")
        b.close()
        assert httpx.post(s.url + "/v1/completions", json={"prompt": "x", "max_tokens": 1}).status_code == 200
    finally:
        assert s.stop() == 0


def test_timeout_in_band_error(model, tmp_path):
    s = Server(model["dir"], tmp_path, "--timeout", "2", "--ctx", str(CTX))
    try:
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0)
        stream = c.completions.create(model=model["dir"].name, prompt="Once upon a time", max_tokens=1000, stream=True)
        texts = []
        with pytest.raises(openai.APIError) as e:
            for chunk in stream:
                texts.append(chunk.choices[0].text)
        assert "timeout" in str(e.value.message) and texts  # the stream had started
        assert httpx.get(s.url + "/health").status_code == 200
    finally:
        assert s.stop() == 0


def test_slow_loris_does_not_block(server, client, model):
    s = socket.create_connection(("127.0.0.1", server.port))
    header = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    done = threading.Event()

    def drip():
        for i in range(len(header)):
            if done.is_set():
                break
            try:
                s.send(header[i:i + 1])
            except OSError:
                break
            time.sleep(0.1)
    t = threading.Thread(target=drip)
    t.start()
    try:
        t0 = time.time()
        r = client.chat.completions.create(model=model_id(model), messages=user(), extra_body=NO_THINK)
        assert r.choices[0].message.content == "Hello world!" and time.time() - t0 < 20
    finally:
        done.set()
        t.join()
        s.close()


def test_shutdown_finishes_running_stream(model, tmp_path):
    s = Server(model["dir"], tmp_path, "--ctx", str(CTX))
    a = long_stream(s, max_tokens=40)
    s.proc.send_signal(signal.SIGTERM)
    a.settimeout(60)
    got = b""
    while True:
        d = a.recv(4096)
        if not d:
            break
        got += d
    a.close()
    assert b"data: [DONE]" in got  # the stream was finished (or cancelled) properly, not cut
    assert s.proc.wait(60) == 0
    s.stop()
    assert "shutting down" in s.log_path.read_text()


def test_schemathesis(model, tmp_path):
    """Property-based requests generated from docs/openapi.yaml: no 5xx, and every response
    conforms to the documented status codes, content types and schemas."""
    import shutil
    st = shutil.which("schemathesis")
    if not st:
        pytest.skip("schemathesis not installed")
    s = Server(model["dir"], tmp_path, "--ctx", "48", "--api-key", KEY)  # small context: short generations
    try:
        r = subprocess.run([st, "run", str(ROOT / "docs" / "openapi.yaml"), "--url", s.url,
                            "-H", f"Authorization: Bearer {KEY}", "--checks",
                            "not_a_server_error,response_schema_conformance,status_code_conformance,"
                            "content_type_conformance", "-n", "8", "--seed", "1", "-w", "1",
                            "--request-timeout", "60", "--generation-database", "none"],
                           capture_output=True, text=True, timeout=600, cwd=tmp_path)  # its cache stays there
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    finally:
        assert s.stop() == 0


def test_load(server, model):
    """32 concurrent streaming clients, 200 requests: each gets a well-formed stream with its own
    seeded text (or a 429), and the server's memory returns to its idle level."""
    n_req, n_conc, seeds = int(os.environ.get("LILAC_LOAD_REQUESTS", "200")), 32, 8

    def body(seed):
        return {"prompt": "Once upon a time", "max_tokens": 2, "temperature": 1.0, "seed": seed, "stream": True}

    def run(seed):
        r = raw(server, "POST", "/v1/completions", body(seed))
        if r.status_code == 429:
            return None
        assert r.status_code == 200, r.text
        events = r.text.split("\n\n")
        assert events[-2:] == ["data: [DONE]", ""], r.text
        ids = set()
        text = ""
        for e in events[:-2]:
            obj = json.loads(e[len("data: "):])
            ids.add(obj["id"])
            text += obj["choices"][0]["text"]
        assert len(ids) == 1
        return text
    expected = {s: run(s) for s in range(seeds)}   # reference: one at a time
    idle = server.rss_kb()
    results, errors = [], []
    lock = threading.Lock()
    counter = iter(range(n_req))

    def worker():
        for i in counter:
            try:
                out = run(i % seeds)
                with lock:
                    results.append((i % seeds, out))
            except Exception as ex:  # noqa: BLE001 -- reported below
                with lock:
                    errors.append(repr(ex))
    threads = [threading.Thread(target=worker) for _ in range(n_conc)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert not errors, errors[:3]
    assert len(results) == n_req
    served = [(s, out) for s, out in results if out is not None]
    assert len(served) >= n_req // 2
    for s, out in served:
        assert out == expected[s], "a stream carried another request's text"
    time.sleep(0.5)
    assert metric(server, "lilac_queue_length") == 0
    assert server.rss_kb() < idle + 64 * 1024, "memory did not return to its idle level"
