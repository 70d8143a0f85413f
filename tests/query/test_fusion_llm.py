"""RRF math, rewrites run concurrently and cached, rerank robust to malformed replies, answers with
their cost — with a scripted client where timing or malformed output must be controlled, on the
small real index."""
import asyncio
import time

import pytest

from contextrag import query
from contextrag.llm import CallCache
from contextrag.llm.scripted import ScriptedClient
from contextrag.query import rerank as rr
from contextrag.query import rewrite as rw
from contextrag.query.rrf import rrf


# ---------------------------------------------------------------- RRF
def test_rrf_math():
    out = dict(rrf([["a", "b", "c"], ["b", "a"], ["c"]], k=60))
    assert out["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert out["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert out["c"] == pytest.approx(1 / 63 + 1 / 61)
    order = [x for x, _ in rrf([["a", "b", "c"], ["b", "a"], ["c"]], k=60)]
    assert order == ["a", "b", "c"]          # a, b tie (both best rank 1; a seen first); c: 1/63 < 1/62


def test_rrf_order_ties_weights_and_errors():
    # a and b tie on score; a reached rank 1 first -> a first (best rank, then first appearance)
    assert [x for x, _ in rrf([["a", "b"], ["b", "a"]])] == ["a", "b"]
    assert [x for x, _ in rrf([["x", "y"], ["y"]], k=0)] == ["y", "x"]      # 1/1 + ... k=0 allowed
    s = dict(rrf([["x"], ["y"]], k=1, weights=[2.0, 1.0]))
    assert s == {"x": pytest.approx(1.0), "y": pytest.approx(0.5)}
    assert dict(rrf([["x", "x", "y"]], k=1)) == {"x": pytest.approx(0.5), "y": pytest.approx(1 / 4)}
    assert rrf([]) == []
    with pytest.raises(ValueError, match="k"):
        rrf([["a"]], k=-1)
    with pytest.raises(ValueError, match="weights"):
        rrf([["a"]], weights=[1, 2])


# ---------------------------------------------------------------- rewrites
def _script(messages):
    u = messages[-1]["content"]
    if "different words" in u:
        return "Rewritten question: which year was that university founded?"
    if "sub-question" in u:
        return "1. Where was Sergei Tokarev a professor?\nThen ..."
    if "entities" in u:
        return "Sergei Aleksandrovich Tokarev, university"
    if "Passages:" in u and "numbers" in u:
        return "2, 1"
    return "1755"


def test_rewrites_parse_and_dedupe():
    c = ScriptedClient(_script)
    out = rw.rewrites(c, "In what year was the university founded?")
    assert out == ["which year was that university founded?", "Where was Sergei Tokarev a professor?",
                   "Sergei Aleksandrovich Tokarev, university"]
    assert rw.rewrites(c, "q?", n=0) == [] and rw.rewrites(c, "q?", n=1) == [out[0]]
    assert rw.clean("", "q") is None and rw.clean("  \n ** \n", "q") is None
    assert rw.clean('"Who wrote it?"', "q") == "Who wrote it?"
    with pytest.raises(ValueError, match="n"):
        rw.rewrites(c, "q", n=-1)


@pytest.mark.parametrize("mode", ["threads", "async"])
def test_rewrites_run_concurrently(mode):
    delay = 0.4
    c = ScriptedClient(_script, delay=delay)
    t = time.perf_counter()
    out = rw.rewrites(c, "q one?") if mode == "threads" else asyncio.run(rw.arewrites(c, "q one?"))
    conc = time.perf_counter() - t
    assert len(out) == 3 and c.max_in_flight == 3
    seq_c = ScriptedClient(_script, delay=delay)
    t = time.perf_counter()
    for kind in rw.KINDS:                                # what the paper did: one after another
        seq_c.complete(rw.messages_for(kind, "q one?"), stage="rewrite", max_tokens=rw.MAX_TOKENS)
    seq = time.perf_counter() - t
    assert seq >= 3 * delay and conc < 0.6 * seq, (conc, seq)


def test_rewrites_are_cached(tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    c = ScriptedClient(_script, cache=cache)
    a = rw.rewrites(c, "q two?")
    b = rw.rewrites(c, "q two?")
    assert a == b and c.calls == 3
    assert c.ledger.to_dict()["rewrite"]["cached_calls"] == 3


# ---------------------------------------------------------------- rerank
@pytest.mark.parametrize("reply,order,ok", [
    ("3, 1", [2, 0, 1, 3], True),
    ("[2] then [2] then 9 and 4", [1, 3, 0, 2], True),      # duplicates and out-of-range ignored
    ("I cannot rank these.", [0, 1, 2, 3], False),
    ("", [0, 1, 2, 3], False),
    ("0, 17, -3", [0, 1, 2, 3], False),
])
def test_rerank_parse(reply, order, ok):
    r = rr.parse(reply, 4, 4)
    assert r.order == order and r.reranked is ok


def test_rerank_falls_back_on_errors():
    def boom(messages):
        raise RuntimeError("server down")

    r = rr.rerank(ScriptedClient(boom), "q", ["a", "b", "c"], top=2)
    assert r.order == [0, 1] and not r.reranked and "server down" in r.raw
    r = asyncio.run(rr.arerank(ScriptedClient(boom), "q", ["a", "b", "c"], top=2))
    assert r.order == [0, 1] and not r.reranked
    with pytest.raises(ValueError, match="top"):
        rr.parse("1", 3, 0)


# ---------------------------------------------------------------- search / answer on the real index
def test_search_fuses_rewrites_by_rrf(index, hotpot):
    q = hotpot[0][0]["question"]
    c = ScriptedClient(_script)
    hits, info = query.search(index, q, llm=c, k=25, rerank=False)
    assert len(info["rewrites"]) == 3
    lists = [[h.id for h in query.retrieve(index, x, k=index.config.candidates)] for x in [q] + info["rewrites"]]
    want = [i for i, _ in rrf(lists, k=index.config.rrf_k)][:25]
    assert [h.id for h in hits] == want
    assert all("rrf" in h.parts for h in hits)


def test_search_rerank_and_malformed_fallback(index, hotpot):
    q = hotpot[0][1]["question"]
    fused, _ = query.search(index, q, llm=ScriptedClient(_script), k=25, rerank=False)
    good, info = query.search(index, q, llm=ScriptedClient(_script), k=12)
    assert info["reranked"] and [h.id for h in good[:2]] == [fused[1].id, fused[0].id]
    assert [h.id for h in good[2:]] == [h.id for h in fused[2:12]] and len(good) == 12

    def garbage(m):
        return "###" if "Passages:" in m[-1]["content"] else _script(m)

    bad, info = query.search(index, q, llm=ScriptedClient(garbage), k=12)
    assert not info["reranked"] and [h.id for h in bad] == [h.id for h in fused[:12]]


def test_answer_cost_and_cache(index, hotpot, tmp_path):
    q = hotpot[0][0]["question"]
    c = ScriptedClient(_script, cache=CallCache(tmp_path / "c.sqlite"))
    a = query.answer(index, q, llm=c, k=6)
    assert a.text == "1755" and len(a.hits) == 6 and a.reranked
    assert a.cost["rewrite"]["calls"] == 3 and a.cost["rerank"]["calls"] == 1 and a.cost["answer"]["calls"] == 1
    assert a.cost["total"]["calls"] == 5 and a.cost["total"]["prompt_tokens"] > 0
    b = query.answer(index, q, llm=c, k=6)                   # same question again: all cached
    assert b.text == a.text and [h.id for h in b.hits] == [h.id for h in a.hits]
    assert b.cost["total"]["calls"] == 0 and b.cost["total"]["cached_calls"] == 5 and c.calls == 5
    n = query.answer(index, q, llm=c, k=6, rewrite=False, rerank=False)
    assert "rewrite" not in n.cost and "rerank" not in n.cost
    d = asyncio.run(query.aanswer(index, q, llm=c, k=6))
    assert d.text == a.text and [h.id for h in d.hits] == [h.id for h in a.hits]
    with pytest.raises(TypeError, match="llm"):
        query.answer(index, q, llm=42)
    with pytest.raises(ValueError, match="llm"):
        query.answer(index, q, llm="none", style="short")        # only the extractive style needs no LLM


def test_doc_filter_applies_to_every_rewrite(index, hotpot):
    qs, docs = hotpot
    allowed = [d["id"] for d in docs[:10]]
    hits, _ = query.search(index, qs[3]["question"], llm=ScriptedClient(_script), k=12, doc_ids=allowed)
    assert hits and all(set(h.doc_ids) <= set(allowed) for h in hits)


def test_answer_clean():
    from contextrag.query.answer import clean
    assert clean("Question: How?\nAnswer: by the max") == "by the max"
    assert clean('"1755"\nbecause ...') == "1755"
    assert clean("Question: x\nPassages:\n[1] foo\nIt is 3.") == "It is 3."
    assert clean("Answer:") == "" and clean("") == "" and clean(None) == ""
