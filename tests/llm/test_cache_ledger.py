"""Call cache (keys, hits/misses, persistence, threads, processes) and the per-stage cost ledger."""
import multiprocessing as mp
import threading

import pytest

from contextrag.llm import CallCache, CostLedger, cache_key, make_client
from contextrag.llm.scripted import ScriptedClient

MSG = [{"role": "user", "content": "What is the capital of France?"}]


def test_cache_key_is_stable_and_discriminating():
    k = cache_key("m", MSG, {"max_tokens": 8, "temperature": 0.0})
    # same content, different dict order -> same key; a fixed known value guards the encoding itself
    assert k == cache_key("m", [{"content": MSG[0]["content"], "role": "user"}],
                          {"temperature": 0.0, "max_tokens": 8})
    assert len(k) == 64 and int(k, 16) >= 0
    assert k != cache_key("m2", MSG, {"max_tokens": 8, "temperature": 0.0})
    assert k != cache_key("m", MSG, {"max_tokens": 9, "temperature": 0.0})
    assert k != cache_key("m", MSG, {"max_tokens": 8, "temperature": 0.5})
    assert k != cache_key("m", [{"role": "system", "content": MSG[0]["content"]}], {"max_tokens": 8, "temperature": 0.0})
    with pytest.raises(TypeError, match="messages"):
        cache_key("m", "hello", {})
    with pytest.raises(TypeError, match="model"):
        cache_key(None, MSG, {})


def test_cache_hit_miss_and_persistence(tmp_path):
    path = tmp_path / "c.sqlite"
    c = CallCache(path)
    p = {"max_tokens": 8, "temperature": 0.0}
    assert c.get("m", MSG, p) is None and c.misses == 1
    c.put("m", MSG, p, {"text": "Paris", "prompt_tokens": 9, "completion_tokens": 1})
    assert c.get("m", MSG, p)["text"] == "Paris" and c.hits == 1
    c.close()
    c2 = CallCache(path)                      # a new process/instance sees it
    assert c2.get("m", MSG, p) == {"text": "Paris", "prompt_tokens": 9, "completion_tokens": 1}
    assert len(c2) == 1
    with pytest.raises(TypeError, match="value"):
        c2.put("m", MSG, p, "Paris")
    with pytest.raises(ValueError, match="path"):
        CallCache(tmp_path)


def test_client_uses_cache_and_ledger_per_stage(tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    cl = ScriptedClient(lambda m: "four words in reply", cache=cache)
    a = cl.complete(MSG, stage="rewrite", max_tokens=16)
    b = cl.complete(MSG, stage="rewrite", max_tokens=16)          # cache hit
    c = cl.complete(MSG, stage="answer", max_tokens=17)           # other params: miss
    assert cl.calls == 2 and not a.cached and b.cached and not c.cached
    assert b.text == a.text and b.prompt_tokens == a.prompt_tokens
    d = cl.ledger.to_dict()
    assert d["rewrite"]["calls"] == 1 and d["rewrite"]["cached_calls"] == 1
    assert d["rewrite"]["completion_tokens"] == 4 and d["rewrite"]["prompt_tokens"] == 6
    assert d["answer"]["calls"] == 1
    assert d["total"]["calls"] == 2 and d["total"]["cached_calls"] == 1 and d["total"]["completion_tokens"] == 8
    # a second client with the same cache file (e.g. the next run) makes no call at all
    cl2 = ScriptedClient(lambda m: "different", cache=CallCache(tmp_path / "c.sqlite"))
    assert cl2.complete(MSG, stage="rewrite", max_tokens=16).text == "four words in reply" and cl2.calls == 0


def test_ledger_since_snapshot():
    cl = ScriptedClient(lambda m: "x y")
    cl.complete(MSG, stage="rerank")
    snap = cl.ledger.snapshot()
    cl.complete(MSG, stage="answer")
    cl.complete(MSG, stage="answer")
    d = cl.ledger.since(snap)
    assert d["answer"]["calls"] == 2 and d["rerank"]["calls"] == 0


@pytest.mark.parametrize("bad", [dict(stage="nope"), dict(max_tokens=0), dict(max_tokens=True), dict(temperature=-1)])
def test_complete_rejects_bad_arguments(bad):
    cl = ScriptedClient()
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        cl.complete(MSG, **bad)
    with pytest.raises(ValueError, match="messages"):
        cl.complete([{"role": "user"}])
    with pytest.raises(ValueError, match="messages"):
        cl.complete([])


def test_cache_threads(tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    p = {"max_tokens": 1, "temperature": 0.0}

    def work(t):
        for i in range(40):
            cache.put("m", [{"role": "user", "content": f"{t}-{i}"}], p, {"text": str(i)})
            assert cache.get("m", [{"role": "user", "content": f"{t}-{i}"}], p)["text"] == str(i)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert len(cache) == 240


def _proc_writer(path, tag, n):
    c = CallCache(path)
    p = {"max_tokens": 1, "temperature": 0.0}
    for i in range(n):
        c.put("m", [{"role": "user", "content": f"{tag}-{i}"}], p, {"text": f"{tag}{i}"})
        c.put("m", [{"role": "user", "content": "shared"}], p, {"text": tag})   # same key from both


def test_cache_concurrent_processes(tmp_path):
    path = str(tmp_path / "c.sqlite")
    CallCache(path)
    ctx = mp.get_context("spawn")
    ps = [ctx.Process(target=_proc_writer, args=(path, tag, 60)) for tag in ("a", "b", "c")]
    [p.start() for p in ps]
    [p.join(120) for p in ps]
    assert all(p.exitcode == 0 for p in ps)
    c = CallCache(path)
    assert len(c) == 3 * 60 + 1
    p = {"max_tokens": 1, "temperature": 0.0}
    assert c.get("m", [{"role": "user", "content": "b-59"}], p)["text"] == "b59"
    assert c.get("m", [{"role": "user", "content": "shared"}], p)["text"] in ("a", "b", "c")


def test_make_client_specs(tmp_path, monkeypatch):
    assert make_client("none") is None and make_client("off") is None
    sc = ScriptedClient()
    assert make_client(sc) is sc
    with pytest.raises(ValueError, match="spec"):
        make_client("gpt-4")
    with pytest.raises(TypeError, match="spec"):
        make_client(42)
    with pytest.raises(TypeError, match="cache"):
        make_client("http://127.0.0.1:9/v1#m", cache=3)
    c = make_client("http://127.0.0.1:9/v1#my-model", cache=tmp_path / "x.sqlite")
    assert c.model == "my-model" and c.base_url == "http://127.0.0.1:9/v1" and c.cache is not None
    monkeypatch.setenv("CONTEXTRAG_LLM", "none")
    assert make_client(None) is None
