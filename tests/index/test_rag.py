"""ContextRAG: bad inputs, add / delete without rebuild, stats, summaries through the LLM interface."""
import sqlite3

import numpy as np
import pytest

from contextrag import Config, ContextRAG
from contextrag.index import store
from contextrag.index.core import SUMMARY
from contextrag.llm.base import Completion, LLMClient

N_BASE = 160  # = conftest.N_BASE (test modules here are not a package)


def _top_chunk(ix, query_vec):
    sims = ix.chunk_embeddings @ query_vec
    return int(np.argmax(sims))


def test_build_rejects_bad_inputs(embedder, tmp_path):
    with pytest.raises(TypeError, match="docs"):
        ContextRAG.build(None, embedder=embedder)
    with pytest.raises(TypeError, match=r"docs\[1\]"):
        ContextRAG.build(["fine", 42], embedder=embedder)
    with pytest.raises(ValueError, match="docs"):
        ContextRAG.build([], embedder=embedder)
    with pytest.raises(TypeError, match="config"):
        ContextRAG.build(["x"], config={"rq_sizes": (2,)}, embedder=embedder)
    with pytest.raises(TypeError, match="path"):
        ContextRAG.build(["x"], path=3, embedder=embedder)
    with pytest.raises(TypeError, match="llm"):
        ContextRAG.build(["x"], llm="gpt", embedder=embedder)
    with pytest.raises(ValueError, match="member_ratio"):
        ContextRAG.build(["x"], config=Config(member_ratio=0.0), embedder=embedder)
    with pytest.raises(ValueError, match="family_weights"):
        ContextRAG.build(["some text here"], config=Config(family_weights={"nope": 1.0}), embedder=embedder)
    with pytest.raises(ValueError, match="family_weights"):
        ContextRAG.build(["some text here"], config=Config(family_weights={"rq": 2.0}), embedder=embedder)
    assert not any(tmp_path.iterdir())


def test_add_then_find_new_document(fresh, hotpot_paragraphs, embedder):
    ix = fresh.index
    n0, codes0, I0 = ix.n_chunks, ix.codes.copy(), ix.context.dense().copy()
    books0 = [C.copy() for C in ix.codebooks]
    E0 = ix.chunk_embeddings.copy()
    new = hotpot_paragraphs[N_BASE:N_BASE + 6]
    calls = embedder.calls
    out = fresh.add(new)
    assert ix.n_chunks == n0 and fresh.index is not ix   # updates replace the index: readers keep theirs
    ix = fresh.index
    # only the new chunks were embedded (the cache holds everything else already)
    assert embedder.calls - calls <= out["chunks"]
    assert out["chunks"] >= len(new) and ix.n_chunks == n0 + out["chunks"]
    # old rows and the codebooks are untouched: no re-clustering
    for a, b in zip(books0, ix.codebooks):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ix.codes[:n0], codes0)
    np.testing.assert_array_equal(ix.context.dense()[:n0], I0)
    np.testing.assert_array_equal(ix.chunk_embeddings[:n0], E0)
    # new chunks are assigned to their nearest centroid at level 0
    newE = ix.chunk_embeddings[n0:]
    d = ((newE[:, None, :] - ix.codebooks[0][None]) ** 2).sum(-1)
    np.testing.assert_array_equal(ix.codes[n0:, 0], d.argmin(1))
    # the incrementally updated intents equal a full recomputation by the kernel
    from contextrag import ops
    np.testing.assert_allclose(ix.graph.intent, ops.luk_up(ix.node_extents(), ix.context.dense()), atol=1e-5)
    # retrieval by cosine finds the new document for a question built from its own words
    for doc in new[:3]:
        q = embedder.inner.embed_queries([f"{doc['title']}: {doc['text'][:120]}"])[0]
        assert ix.chunk_doc_ids[_top_chunk(ix, q)] == doc["id"]
    # persisted: a reload sees it, and its nodes' members cover the new chunks
    again = ContextRAG.load(fresh.path, embedder=embedder).index
    assert again.n_chunks == ix.n_chunks and new[0]["id"] in again.docs
    assert again.graph.members.shape[1] == ix.n_chunks
    mem = again.graph.members.toarray()
    assert mem[:, n0:].any(axis=0).all(), "every new chunk belongs to some concept node"
    st = fresh.stats()
    assert st["drift"]["chunks_since_fit"] == out["chunks"]
    assert st["drift"]["residual_ratio"] is not None and st["drift"]["residual_ratio"] > 0
    with pytest.raises(ValueError, match="already in the index"):
        fresh.add([new[0]])


def test_delete_removes_document_everywhere(fresh, embedder):
    ix = fresh.index
    victim = ix.chunk_doc_ids[5]
    texts = [t for t, d in zip(ix.chunk_texts, ix.chunk_doc_ids) if d == victim]
    marker = texts[0][:80]
    n0 = ix.n_chunks
    fresh.delete([victim])
    assert victim in ix.docs                              # the old index object is untouched
    ix = fresh.index
    for cur in (ix, ContextRAG.load(fresh.path, embedder=embedder).index):
        assert victim not in cur.docs and victim not in cur.chunk_doc_ids
        assert cur.n_chunks == n0 - len(texts)
        assert not any(marker in t for t in cur.item_texts)
        assert cur.item_members.shape[1] == cur.n_chunks == cur.graph.members.shape[1]
        assert cur.context.dense().shape[0] == cur.n_chunks == len(cur.codes)
        assert cur.embeddings.shape[0] == cur.n_items
        # BM25 over the remaining items: the deleted text is no longer the best match of itself
        s = cur.bm25_scores(marker)
        assert len(s) == cur.n_items
    # nothing of it on disk either
    snap = store.snapshot_dir(fresh.path)
    con = sqlite3.connect(snap / "meta.sqlite")
    hits = con.execute("SELECT count(*) FROM items WHERE text LIKE ?", (f"%{marker}%",)).fetchone()[0]
    con.close()
    from contextrag.index import columns
    m = store.read_manifest(snap)
    cols, enc = store.map_arrays(snap / columns.FILE), m["columns"]["encoding"]
    doc_col = columns.decode(cols["doc.ids"], enc["doc.ids"], m["counts"]["docs"])
    chunk_docs = columns.decode(cols["chunk.doc_ids"], enc["chunk.doc_ids"], m["counts"]["chunks"])
    assert hits == 0 and victim not in doc_col and victim not in chunk_docs
    assert marker.encode() not in (snap / columns.FILE).read_bytes()
    from contextrag import ops
    np.testing.assert_allclose(ix.graph.intent, ops.luk_up(ix.node_extents(), ix.context.dense()), atol=1e-5)
    with pytest.raises(ValueError, match="doc_ids"):
        fresh.delete(["no-such-doc"])
    with pytest.raises(TypeError, match="doc_ids"):
        fresh.delete(None)


def test_delete_then_add_back(fresh, hotpot_paragraphs):
    doc = hotpot_paragraphs[2]
    fresh.delete([doc["id"]])
    fresh.add([doc])
    assert doc["id"] in fresh.index.docs


class ScriptedLLM(LLMClient):
    """Deterministic stand-in for a model: the summary logic, not the model, is under test."""
    model = "scripted"

    def _generate(self, messages, *, max_tokens, temperature):
        text = messages[-1]["content"]
        first = text.split("[1] ", 1)[1].split(":", 1)[0]
        return Completion(f"Summary about {first}.", prompt_tokens=len(text.split()), completion_tokens=4)


def test_summaries_cost_and_members(hotpot_paragraphs, embedder, tmp_path):
    llm = ScriptedLLM()
    cfg = Config(rq_sizes=(8, 3), n_join=4, n_meet=4, n_summaries=5)
    rag = ContextRAG.build(hotpot_paragraphs[:60], path=tmp_path / "s", config=cfg, llm=llm, embedder=embedder)
    ix = rag.index
    s = np.flatnonzero(ix.item_kinds == SUMMARY)
    assert len(s) == 5
    cost = ix.ledger.to_dict()["summaries"]
    assert cost["calls"] == 5 and cost["prompt_tokens"] > 0 and cost["completion_tokens"] == 20
    for i in s:
        v = ix.item_node[i]
        assert ix.graph.kind[v] == 0 and ix.item_members[i].nnz == ix.graph.members[v].nnz
        assert ix.item_texts[i].startswith("Summary about")
        assert set(ix.item_sources[i].indices) <= set(ix.graph.members[v].indices)
    st = rag.stats()
    assert st["graph_llm_tokens"] == 0 and st["llm_cost"]["summaries"]["calls"] == 5
    again = ContextRAG.load(tmp_path / "s", embedder=embedder)
    assert again.index.ledger.to_dict()["summaries"]["calls"] == 5
    # deleting a document a summary was written from drops that summary
    i = s[0]
    victim = ix.chunk_doc_ids[ix.item_sources[i].indices[0]]
    rag.delete([victim])
    assert (rag.index.item_kinds == SUMMARY).sum() < 5


def test_no_llm_builds_without_summaries_and_says_so(base):
    assert (base.index.item_kinds == SUMMARY).sum() == 0
    assert "disabled" in base.index.info["summaries"] or "no LLM" in base.index.info["summaries"]


def test_stats_and_rebuild(fresh, hotpot_paragraphs):
    st = fresh.stats()
    for key in ("docs", "chunks", "items", "occupancy", "nodes", "edges", "timings", "llm_cost", "drift",
                "bytes_on_disk", "graph_llm_tokens"):
        assert key in st
    assert len(st["occupancy"]) == 3 and st["bytes_on_disk"] > 0
    assert {"chunk", "context", "graph", "embed"} <= set(st["timings"])
    fresh.add(hotpot_paragraphs[N_BASE + 6:N_BASE + 9])
    assert fresh.stats()["drift"]["chunks_since_fit"] > 0
    fresh.rebuild()
    st = fresh.stats()
    assert st["drift"]["chunks_since_fit"] == 0 and fresh.index.chunk_fitted.all()
    assert st["chunks"] == fresh.index.n_chunks


def test_retrieve_delegates_to_query_module(base, monkeypatch):
    import contextrag.query as q
    seen = {}

    def fake(index, question, k, doc_ids, **kw):
        seen.update(index=index, question=question, k=k, doc_ids=doc_ids, kw=kw)
        return ["hit"]
    monkeypatch.setattr(q, "retrieve", fake, raising=False)
    assert base.retrieve("who?", k=3, doc_ids=["p1"], w_fuzzy=0.0) == ["hit"]
    assert seen["index"] is base.index and seen["k"] == 3 and seen["kw"] == {"w_fuzzy": 0.0}


class FailingLLM(LLMClient):
    model = "broken"

    def _generate(self, messages, *, max_tokens, temperature):
        raise ConnectionError("server went away")


def test_failing_llm_keeps_the_build(hotpot_paragraphs, embedder, tmp_path):
    cfg = Config(rq_sizes=(6, 2), n_join=2, n_meet=2, n_summaries=3)
    with pytest.warns(RuntimeWarning, match="summary calls failed"):
        rag = ContextRAG.build(hotpot_paragraphs[:40], path=tmp_path / "f", config=cfg, llm=FailingLLM(),
                               embedder=embedder)
    assert (rag.index.item_kinds == SUMMARY).sum() == 0
    assert "3 calls failed" in rag.stats()["summaries"]


def test_foreign_path_rejected_before_any_work(embedder, tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    calls = embedder.calls
    with pytest.raises(ValueError, match="not a contextrag index"):
        ContextRAG.build(["a fresh text never embedded before: quux frobnicate"], path=tmp_path,
                         embedder=embedder)
    assert embedder.calls == calls and [p.name for p in tmp_path.iterdir()] == ["mine.txt"]


def test_plain_string_ids_do_not_collide_after_delete(embedder, tmp_path):
    cfg = Config(rq_sizes=(2,), n_join=1, n_meet=0, n_summaries=0, min_support=1)
    texts = [f"Paragraph {w} about the history of {w} in the northern provinces." for w in
             ("Alder", "Birch", "Cedar", "Dogwood")]
    rag = ContextRAG.build(texts, config=cfg, embedder=embedder)
    assert list(rag.index.docs) == ["doc0", "doc1", "doc2", "doc3"]
    rag.delete(["doc1"])
    rag.add(["Paragraph Elm about the history of Elm in the northern provinces."])
    assert len(rag.index.docs) == 4 and len(set(rag.index.docs)) == 4


def test_bytes_on_disk_leave_out_snapshots_being_removed(tmp_path, monkeypatch):
    """A replaced snapshot (``.old-*``) is being deleted by a background thread: it is not counted,
    and a folder that vanishes during the walk does not fail ``stats()``."""
    import os
    from contextrag.index import stats
    (tmp_path / "snap-1").mkdir()
    (tmp_path / "snap-1" / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "CURRENT").write_text("snap-1")
    (tmp_path / ".old-1234abcd").mkdir()
    (tmp_path / ".old-1234abcd" / "big.bin").write_bytes(b"y" * 1000)
    assert stats._dir_bytes(tmp_path) == 10 + len("snap-1")
    real_walk = os.walk

    def racing_walk(top, *a, **k):       # snap-1 disappears between listing and stat
        for root, dirs, files in real_walk(top, *a, **k):
            if root.endswith("snap-1"):
                (tmp_path / "snap-1" / "a.bin").unlink()
            yield root, dirs, files
    monkeypatch.setattr(stats.os, "walk", racing_walk)
    assert stats._dir_bytes(tmp_path) == len("snap-1")
