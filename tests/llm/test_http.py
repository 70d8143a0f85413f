"""OpenAI-compatible HTTP client: retry/backoff logic on an in-process httpx MockTransport, and a real
OpenAI-compatible server on 127.0.0.1 (tests/llm/conftest.py) answering with the embedded model."""
import asyncio
import json
import socket
import time

import httpx
import pytest

from contextrag.llm import CallCache
from contextrag.llm.http import HTTPClient, LLMHTTPError

MSG = [{"role": "user", "content": "Say hi"}]


def _ok(text="hi there", p=5, c=2):
    return httpx.Response(200, json={"model": "m", "choices": [{"message": {"role": "assistant", "content": text}}],
                                     "usage": {"prompt_tokens": p, "completion_tokens": c}})


def _client(handler, **kw):
    kw.setdefault("backoff", 0.01)
    return HTTPClient("http://mock.local/v1", model="m", transport=httpx.MockTransport(handler), **kw)


def test_retries_on_429_and_5xx_then_succeeds():
    seen = []

    def handler(req):
        seen.append(json.loads(req.content))
        return [httpx.Response(429), httpx.Response(503), _ok()][len(seen) - 1]

    c = _client(handler)
    out = c.complete(MSG, stage="answer", max_tokens=7)
    assert out.text == "hi there" and out.prompt_tokens == 5 and out.completion_tokens == 2
    assert c.retries == 2 and len(seen) == 3
    assert seen[0] == {"model": "m", "messages": MSG, "max_tokens": 7, "temperature": 0.0}
    assert c.ledger.to_dict()["answer"]["calls"] == 1


def test_no_retry_on_client_error_and_gives_up_after_max_retries():
    n = []

    def bad_request(req):
        n.append(1)
        return httpx.Response(400, text="bad model")

    with pytest.raises(LLMHTTPError, match="400") as e:
        _client(bad_request).complete(MSG)
    assert e.value.status == 400 and len(n) == 1

    m = []

    def always_busy(req):
        m.append(1)
        return httpx.Response(502)

    with pytest.raises(LLMHTTPError, match="502"):
        _client(always_busy, max_retries=3).complete(MSG)
    assert len(m) == 4


def test_connection_errors_are_retried_with_growing_backoff(monkeypatch):
    n = []

    def flaky(req):
        n.append(time.perf_counter())
        if len(n) < 3:
            raise httpx.ConnectError("refused", request=req)
        return _ok()

    c = _client(flaky, backoff=0.05)
    assert c.complete(MSG).text == "hi there"
    gaps = [b - a for a, b in zip(n, n[1:])]
    assert gaps[0] >= 0.025 and gaps[1] >= 0.05          # equal jitter: [d/2, d] with d = 0.05, 0.1


def test_retry_after_header_is_honoured():
    t = []

    def handler(req):
        t.append(time.perf_counter())
        return httpx.Response(429, headers={"Retry-After": "0.3"}) if len(t) == 1 else _ok()

    _client(handler, backoff=0.0).complete(MSG)
    assert t[1] - t[0] >= 0.28


def test_malformed_response_raises():
    with pytest.raises(LLMHTTPError, match="malformed"):
        _client(lambda req: httpx.Response(200, json={"nope": 1})).complete(MSG)


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="base_url"):
        HTTPClient("127.0.0.1:8000", model="m")
    with pytest.raises(ValueError, match="max_retries"):
        HTTPClient("http://x/v1", model="m", max_retries=-1)
    with pytest.raises(ValueError, match="max_concurrency"):
        HTTPClient("http://x/v1", model="m", max_concurrency=0)
    assert HTTPClient("http://x:1", model="m").base_url == "http://x:1/v1"


def test_api_key_from_env(monkeypatch):
    monkeypatch.setenv("CONTEXTRAG_LLM_API_KEY", "sk-test")
    got = {}

    def handler(req):
        got["auth"] = req.headers.get("authorization")
        return _ok()

    _client(handler).complete(MSG)
    assert got["auth"] == "Bearer sk-test"


def test_async_is_concurrent_and_limited():
    state = {"now": 0, "max": 0}

    async def handler(req):
        state["now"] += 1
        state["max"] = max(state["max"], state["now"])
        await asyncio.sleep(0.2)
        state["now"] -= 1
        return _ok(json.loads(req.content)["messages"][0]["content"])

    c = HTTPClient("http://mock.local/v1", model="m", max_concurrency=3,
                   async_transport=httpx.MockTransport(handler))

    async def run():
        t = time.perf_counter()
        outs = await asyncio.gather(*(c.acomplete([{"role": "user", "content": f"q{i}"}]) for i in range(6)))
        return outs, time.perf_counter() - t

    outs, dt = asyncio.run(run())
    assert [o.text for o in outs] == [f"q{i}" for i in range(6)]
    assert state["max"] == 3                 # the semaphore held the fourth back
    assert 0.35 < dt < 1.1                   # two waves of 0.2 s, not six sequential calls (1.2 s)


# ---------------------------------------------------------------- a real server on 127.0.0.1
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_real_server_completion_usage_and_cache(openai_server, embedded, tmp_path):
    c = HTTPClient(openai_server, cache=CallCache(tmp_path / "c.sqlite"), timeout=120)
    assert c.model == "embedded"              # discovered from GET /models
    msgs = [{"role": "user", "content": "What is the capital of France? Answer with one word."}]
    a = c.complete(msgs, stage="answer", max_tokens=8)
    assert a.text.strip() and a.prompt_tokens > 5 and 0 < a.completion_tokens <= 8 and not a.cached
    direct = embedded._generate(msgs, max_tokens=8, temperature=0.0)     # greedy: the same reply in-process
    assert "paris" in a.text.lower() and a.text == direct.text and a.prompt_tokens == direct.prompt_tokens
    b = c.complete(msgs, stage="answer", max_tokens=8)
    assert b.cached and b.text == a.text
    led = c.ledger.to_dict()["answer"]
    assert led["calls"] == 1 and led["cached_calls"] == 1 and led["prompt_tokens"] == a.prompt_tokens


def test_real_server_async_path(openai_server):
    c = HTTPClient(openai_server, timeout=120)
    msgs = [{"role": "user", "content": "Name a colour. One word."}]
    out = asyncio.run(c.acomplete(msgs, stage="rewrite", max_tokens=4))
    assert out.text.strip() and out.completion_tokens > 0


def test_real_server_unknown_model_is_not_retried(openai_server):
    c = HTTPClient(openai_server, model="no-such-model", backoff=0.01)
    with pytest.raises(LLMHTTPError, match="404") as e:
        c.complete(MSG, max_tokens=2)
    assert e.value.status == 404 and c.retries == 0


def test_real_server_connection_refused_is_retried_then_raises():
    port = _free_port()                       # nothing listens here
    c = HTTPClient(f"http://127.0.0.1:{port}/v1", model="m", max_retries=2, backoff=0.01, timeout=5)
    with pytest.raises(LLMHTTPError, match="ConnectError"):
        c.complete(MSG)
    assert c.retries == 2
