"""Retrieval under load, small shape (the full run is bench/bench_reliability.py): concurrent client
threads over one index, alone and while a writer adds documents: no errors, no lost writes."""
from __future__ import annotations

import json

import pytest

from contextrag import ContextRAG
from contextrag.eval.load import run_load
from hash_embedder import HashEmbedder
from shared_data import hotpot_file


@pytest.fixture(scope="module")
def questions():
    return [q["question"] for q in json.loads(hotpot_file().read_text())[:25]]


def test_concurrent_clients_without_writes(tiny, questions):
    rag = ContextRAG.load(tiny, embedder=HashEmbedder())
    res = run_load(rag, questions, 8, k=5)
    assert res["errors"] == 0, res["error_samples"]
    assert res["queries"] == 8 * len(questions)
    lat = res["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"]


def test_concurrent_clients_while_a_writer_adds(tiny, questions, paragraphs):
    rag = ContextRAG.load(tiny, embedder=HashEmbedder())
    docs = [dict(p, id=f"load/{i}") for i, p in enumerate(paragraphs[40:50])]
    res = run_load(rag, questions, 8, k=5, writer_docs=docs, writer_batch=2)
    assert res["errors"] == 0, res["error_samples"]
    w = res["writer"]
    assert w["failures"] == [] and w["adds"] == 5 and w["lost_writes"] == 0
    assert {d["id"] for d in docs} <= set(ContextRAG.load(tiny, embedder=HashEmbedder()).index.docs)


def test_run_load_validates_arguments(tiny, questions):
    rag = ContextRAG.load(tiny, embedder=HashEmbedder())
    with pytest.raises(ValueError, match="clients"):
        run_load(rag, questions, 0)
    with pytest.raises(ValueError, match="questions"):
        run_load(rag, [], 2)


def test_threads_arriving_together_build_the_query_state_once(tiny, questions, monkeypatch):
    """A freshly loaded or swapped-in index: many threads asking at once wait for one build of the
    query view and of the lexical state instead of each building them on the same cores."""
    import threading

    from contextrag.query import _view, spread
    calls = {"view": 0, "lexical": 0}
    real_view, real_state = _view._build_view, spread._build_state

    def count(name, real):
        def wrapped(*a, **kw):
            calls[name] += 1
            return real(*a, **kw)
        return wrapped
    monkeypatch.setattr(_view, "_build_view", count("view", real_view))
    monkeypatch.setattr(spread, "_build_state", count("lexical", real_state))
    rag = ContextRAG.load(tiny, embedder=HashEmbedder(), prepare=False)   # the first queries build it
    assert rag.index.config.spread_families, "the test needs an index with lexical families"
    go = threading.Barrier(8)
    errors = []

    def ask(q):
        go.wait()
        try:
            rag.retrieve(q, k=5)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=ask, args=(q,)) for q in questions[:8]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert calls == {"view": 1, "lexical": 1}


def test_a_write_prepares_the_new_index_before_queries_see_it(tiny, questions, paragraphs, monkeypatch):
    from contextrag.query import _view, spread
    rag = ContextRAG.load(tiny, embedder=HashEmbedder())
    rag.retrieve(questions[0], k=5)
    rag.add([dict(paragraphs[60], id="warm/0")])
    calls = []
    monkeypatch.setattr(_view, "_build_view", lambda *a: calls.append("view"))
    monkeypatch.setattr(spread, "_build_state", lambda *a: calls.append("lexical"))
    assert rag.retrieve(questions[1], k=5)
    assert calls == []


def test_prepare_builds_the_inverted_file_where_queries_score_candidates(tiny, tiny_dir, questions, paragraphs,
                                                                        monkeypatch):
    import dataclasses

    from contextrag.query import candidates
    built = []
    real = candidates.InvertedFile.__init__
    monkeypatch.setattr(candidates.InvertedFile, "__init__", lambda self, *a: built.append(1) or real(self, *a))
    assert ContextRAG.load(tiny_dir, embedder=HashEmbedder()).retrieve(questions[2], k=5)
    assert built == []                           # an index that scores every item builds none
    rag = ContextRAG.load(tiny, embedder=HashEmbedder(), prepare=False)
    rag.index.config = dataclasses.replace(rag.index.config, scoring="candidates")
    rag.prepare()
    assert built == [1]
    assert rag.retrieve(questions[0], k=5)
    assert built == [1]                          # prepared: the first query builds no inverted file
    rag.add([dict(paragraphs[60], id="warm/ivf")])
    assert built == [1, 1]                       # the write's new index: built before the swap
    assert rag.retrieve(questions[1], k=5) and built == [1, 1]


def test_the_bench_ablation_leaves_the_inverted_file_and_model_to_the_first_query(tiny, questions, monkeypatch):
    """bench_scale.py load --lazy-first-query: prepare() as before it readied them."""
    import dataclasses
    import importlib.util
    import sys

    import contextrag.rag as rag_module
    from contextrag.embed.embedder import Embedder
    from contextrag.query import candidates
    from shared_data import REPO
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(rag_module, "_prepare_queries", rag_module._prepare_queries)
    monkeypatch.setattr(Embedder, "load_if_cached", Embedder.load_if_cached)
    spec = importlib.util.spec_from_file_location("bench_scale_lazy", REPO / "bench" / "bench_scale.py")
    bs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bs)
    bs.lazy_first_query()
    built = []
    real = candidates.InvertedFile.__init__
    monkeypatch.setattr(candidates.InvertedFile, "__init__", lambda self, *a: built.append(1) or real(self, *a))
    rag = ContextRAG.load(tiny, embedder=HashEmbedder(), prepare=False)
    rag.index.config = dataclasses.replace(rag.index.config, scoring="candidates")
    rag.prepare()
    assert built == []
    assert rag.retrieve(questions[0], k=5) and built == [1]
    assert Embedder("all-MiniLM-L6-v2", backend="static").load_if_cached() is False


def test_the_command_line_writes_prepare_nothing_for_queries(tiny, monkeypatch, capsys):
    """`contextrag delete` (as `add` and `sync`) loads the index unprepared and writes a new one without
    building any query state: no view, no spreading state, for either index."""
    import argparse

    from contextrag.commands import delete
    from contextrag.query import _view, spread

    def boom(*a, **k):
        raise AssertionError("a write-only command built query state")
    monkeypatch.setattr(_view, "_build_view", boom)
    monkeypatch.setattr(spread, "_build_state", boom)
    gone = next(iter(ContextRAG.load(tiny, embedder=HashEmbedder(), prepare=False).index.docs))
    assert delete.run(argparse.Namespace(index=str(tiny), ids=[gone], missing_ok=False, json=True)) == 0
    assert json.loads(capsys.readouterr().out)["deleted"] == [gone]
    assert gone not in ContextRAG.load(tiny, embedder=HashEmbedder(), prepare=False).index.docs
