"""Retrieval under load, small shape (the full run is bench/bench_reliability.py): concurrent client
threads over one index, alone and while a writer adds documents: no errors, no lost writes."""
from __future__ import annotations

import json

import pytest

from contextrag import ContextRAG
from contextrag.eval.load import run_load
from hash_embedder import HashEmbedder
from shared_data import data_dir


@pytest.fixture(scope="module")
def questions():
    d = data_dir()
    if d is None:
        pytest.skip("HotpotQA data not found")
    return [q["question"] for q in json.loads((d / "hotpotqa_500.json").read_text())[:25]]


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
