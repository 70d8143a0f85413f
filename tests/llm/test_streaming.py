"""Streaming through the client interface: the embedded model (transformers' streamer) and the
OpenAI-compatible client (server-sent events) against the real server of conftest.py, plus the SSE
faults on an in-process httpx transport."""
import httpx
import pytest

from contextrag.llm import CallCache, Completion
from contextrag.llm.http import HTTPClient, LLMHTTPError
from contextrag.llm.local import LocalLLMClient

STORY = [{"role": "user", "content": "Write one sentence about the sea."}]


def _split(items):
    deltas = [x for x in items if isinstance(x, str)]
    finals = [x for x in items if isinstance(x, Completion)]
    assert len(finals) == 1 and isinstance(items[-1], Completion)
    return deltas, finals[0]


def test_embedded_model_streams_the_reply_it_completes(embedded, gguf_path, tmp_path):
    c = LocalLLMClient(gguf_path, n_ctx=1024, cache=CallCache(tmp_path / "c.sqlite"))
    c._tok, c._lm = embedded._tok, embedded._lm
    deltas, final = _split(list(c.stream(STORY, stage="answer", max_tokens=10)))
    assert len(deltas) > 2                                   # token deltas, not one block
    whole = embedded.complete(STORY, max_tokens=10)
    assert final.text == whole.text and "".join(deltas).strip() == whole.text
    assert final.completion_tokens == 10 and final.finish_reason == "length" and not final.cached
    again, cached = _split(list(c.stream(STORY, stage="answer", max_tokens=10)))   # from the cache
    assert cached.cached and again == [final.text] and cached.finish_reason == "length"
    assert c.ledger.to_dict()["answer"]["calls"] == 1
    stopped = c.stream(STORY, max_tokens=10)                  # closed early: the model is free again
    next(stopped)
    stopped.close()
    assert not c._lock.locked() and c.complete(STORY, max_tokens=3).text


def test_openai_client_streams_server_sent_events(openai_server, embedded):
    c = HTTPClient(openai_server)
    deltas, final = _split(list(c.stream(STORY, stage="answer", max_tokens=8)))
    assert len(deltas) > 2 and final.text == "".join(deltas)
    assert final.text.strip() == embedded.complete(STORY, max_tokens=8).text
    assert final.completion_tokens == 8 and final.prompt_tokens > 5 and final.finish_reason == "length"
    assert c.ledger.to_dict()["answer"]["completion_tokens"] == 8
    c.close()


def _sse(*events, done=True):
    body = "".join(f"data: {e}\n\n" for e in events) + ("data: [DONE]\n\n" if done else "")
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())


def _delta(text, finish=None):
    import json
    return json.dumps({"model": "m", "choices": [{"index": 0, "delta": {"content": text} if text else {},
                                                   "finish_reason": finish}]})


def _mock(handler):
    return HTTPClient("http://mock.local/v1", model="m", transport=httpx.MockTransport(handler), backoff=0.01)


def test_stream_retries_before_the_first_delta_and_reads_usage():
    seen = []

    def handler(req):
        seen.append(req)
        if len(seen) == 1:
            return httpx.Response(503)
        return _sse(_delta("Hello"), _delta(" there"), _delta(None, "stop"),
                    '{"model": "m", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}')

    c = _mock(handler)
    deltas, final = _split(list(c.stream([{"role": "user", "content": "hi"}], max_tokens=5)))
    assert deltas == ["Hello", " there"] and final.text == "Hello there" and c.retries == 1
    assert (final.prompt_tokens, final.completion_tokens, final.finish_reason) == (4, 2, "stop")
    import json
    body = json.loads(seen[-1].content)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_a_stream_cut_after_a_delta_is_one_clear_error():
    c = _mock(lambda req: _sse(_delta("Hello"), done=False))
    it = c.stream([{"role": "user", "content": "hi"}], max_tokens=5)
    assert next(it) == "Hello"
    with pytest.raises(LLMHTTPError, match="broken stream after 5 characters"):
        next(it)


def test_a_server_that_ignores_stream_gives_the_whole_reply():
    ok = {"model": "m", "choices": [{"message": {"content": "all at once"}, "finish_reason": "length"}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 3}}
    c = _mock(lambda req: httpx.Response(200, json=ok))
    deltas, final = _split(list(c.stream([{"role": "user", "content": "hi"}], max_tokens=3)))
    assert deltas == ["all at once"] and final.finish_reason == "length"
