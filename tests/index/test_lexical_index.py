"""The lexical spreading families are index families: built with the index, stored in its snapshot,
loaded (never rebuilt) by queries, exact after add/delete, reported by stats/inspect."""
from __future__ import annotations

import json
import logging
import sqlite3

import numpy as np
import pytest
import scipy.sparse as sp

N_BASE = 160  # = conftest.N_BASE (test modules here are not a package)


def _same_family(a, b):
    """Equal up to the order of the attribute columns."""
    assert set(a.vocab) == set(b.vocab)
    perm = np.array([b.vocab[t] for t in a.attributes], dtype=np.int64)
    A, B = a.incidence.tocsr(), b.incidence.tocsr()[:, perm] if perm.size else b.incidence
    assert A.shape == B.shape
    assert abs(A - B).max() == 0 if A.nnz else B.nnz == 0
    np.testing.assert_array_equal(a.df, b.df[perm] if perm.size else b.df)


def _new_text(ix):
    """The chunks of new text, from the chunk texts (a build's own computation)."""
    from contextrag.index.distinct import ChunkSentences
    return ChunkSentences.of_texts(ix.chunk_texts).new_text()


def _fresh_families(rag):
    """The families a build makes from the index's chunk texts, weights over its distinct text."""
    from contextrag.index.lexical.families import counted_over, lexical_families
    ix = rag.index
    fams = lexical_families(ix.chunk_titles, ix.chunk_texts, list(ix.lexical.families), stemmer=ix.config.stemmer)
    return counted_over(fams, _new_text(ix))


def test_built_stored_and_loaded(base):
    ix = base.index
    assert ix.lexical is not None and list(ix.lexical.families) == ["title", "term"]
    # equal to a build from the chunk texts (the stored term family reused the BM25 tokenisation)
    ref = _fresh_families(base)
    for name in ("title", "term"):
        _same_family(ref.families[name], ix.lexical.families[name])
        f = ix.lexical.families[name]
        new = _new_text(ix)
        assert ix.lexical.distinct == new.sum() < ix.n_chunks     # this corpus repeats some passages
        df = np.maximum(np.asarray(f.incidence[new].astype(bool).sum(axis=0)).ravel(), 1)
        w = np.log(new.sum() / df) / np.log(new.sum())
        np.testing.assert_allclose(f.weight, np.clip(w, 0, 1), rtol=1e-6)
        np.testing.assert_array_equal(f.df, np.asarray(f.incidence.astype(bool).sum(axis=0)).ravel())
        assert f.incidence.shape == (ix.n_chunks, len(f.vocab))


def test_first_query_builds_nothing(base_dir, embedder, monkeypatch):
    from contextrag import ContextRAG
    from contextrag.index.lexical import families as lexical
    rag = ContextRAG.load(base_dir, embedder=embedder)

    def boom(*a, **k):
        raise AssertionError("a lexical family was rebuilt at query time")
    for name in list(lexical.BUILDERS):
        monkeypatch.setitem(lexical.BUILDERS, name, boom)
    hits = rag.retrieve("Which film was directed by the director of Tokyo Story?", k=5)
    assert len(hits) == 5
    assert any(h.parts.get("spread", 0) > 0 for h in hits)     # the spreading ran, on the stored families


def test_snapshot_holds_families_without_pickle(base_dir):
    from safetensors.numpy import load_file
    from contextrag.index import store
    snap = store.snapshot_dir(base_dir)
    m = json.loads((snap / store.MANIFEST).read_text())
    assert m["lexical_families"] == ["title", "term"]
    a = load_file(str(snap / store.ARRAYS))
    for name in ("title", "term"):
        for part in ("indptr", "indices", "data", "df", "vocab"):
            assert f"lex.{name}.{part}" in a
    con = sqlite3.connect(snap / store.META)
    meta = json.loads(con.execute("SELECT value FROM kv WHERE key='lexical'").fetchone()[0])
    con.close()
    assert [f["name"] for f in meta["families"]] == ["title", "term"]


def test_add_and_delete_keep_families_exact(fresh, hotpot_paragraphs):
    fresh.add(hotpot_paragraphs[N_BASE:N_BASE + 6])
    ref = _fresh_families(fresh)
    for name in ("title", "term"):
        _same_family(ref.families[name], fresh.index.lexical.families[name])
    fresh.delete(["p3", "p7", hotpot_paragraphs[N_BASE + 1]["id"]])
    ref = _fresh_families(fresh)
    for name in ("title", "term"):
        _same_family(ref.families[name], fresh.index.lexical.families[name])
        assert fresh.index.lexical.families[name].incidence.shape[0] == fresh.index.n_chunks
    # and what is on disk is the same
    from contextrag import ContextRAG
    again = ContextRAG.load(fresh.path, embedder=fresh.index.embedder)
    for name in ("title", "term"):
        _same_family(fresh.index.lexical.families[name], again.index.lexical.families[name])


def test_old_snapshot_without_families_loads_and_builds_once(base_dir, embedder, tmp_path, caplog):
    """A snapshot written before the families were stored: loaded, families built once with a warning."""
    import shutil
    from contextrag import ContextRAG
    from contextrag.index import store
    dst = tmp_path / "old"
    shutil.copytree(base_dir, dst)
    rag = ContextRAG.load(dst, embedder=embedder)
    rag.index.lexical = None              # what an older library wrote: no lex.* arrays, no kv entry
    rag.save()
    snap = store.snapshot_dir(dst)
    con = sqlite3.connect(snap / store.META)
    assert con.execute("SELECT count(*) FROM kv WHERE key='lexical'").fetchone()[0] == 0
    con.close()
    with caplog.at_level(logging.WARNING, logger="contextrag"):
        old = ContextRAG.load(dst, embedder=embedder)
    assert "no stored lexical families" in caplog.text and f"format version {store.FORMAT_VERSION}" in caplog.text
    ref = _fresh_families(old)
    for name in ("title", "term"):
        _same_family(ref.families[name], old.index.lexical.families[name])


def test_stats_and_inspect_list_the_families(base, base_dir, capsys):
    st = base.stats()
    names = [f["name"] for f in st["lexical_families"]]
    assert names == ["title", "term"]
    for f in st["lexical_families"]:
        assert f["attributes"] > 0 and f["nnz"] > 0 and 0 < f["linking_attributes"] <= f["attributes"]
    assert st["bytes_in_memory"]["lexical"] > 0
    from contextrag.cli import main
    assert main(["inspect", str(base_dir), "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "lexical families (spreading): title:" in out and "term:" in out


def test_retrieve_many_equals_retrieve(base):
    qs = ["Who directed the film that starred the actor born in Nagoya?",
          "Which university did the author of the novel attend?",
          "What year was the band founded?"]
    many = base.retrieve_many(qs, k=7)
    assert len(many) == 3
    for q, hits in zip(qs, many):
        one = base.retrieve(q, k=7)
        assert [h.id for h in hits] == [h.id for h in one]
        np.testing.assert_allclose([h.score for h in hits], [h.score for h in one], rtol=1e-6)
    assert base.retrieve_many([], k=3) == []
    with pytest.raises(TypeError, match="questions must be a list"):
        base.retrieve_many("one question")


def test_load_prepares_the_query_stage(base_dir, embedder, monkeypatch):
    """ContextRAG.load builds the corpus view and the spreading state: the first query builds neither."""
    from contextrag import ContextRAG
    from contextrag.query import _view, spread
    rag = ContextRAG.load(base_dir, embedder=embedder)

    def boom(*a, **k):
        raise AssertionError("the first query built query-stage state")
    monkeypatch.setattr(_view, "_build_view", boom)
    monkeypatch.setattr(spread, "_build_state", boom)
    hits = rag.retrieve("Which film was directed by the director of Tokyo Story?", k=5)
    assert len(hits) == 5 and any(h.parts.get("spread", 0) > 0 for h in hits)
    lazy = ContextRAG.load(base_dir, embedder=embedder, prepare=False)
    with pytest.raises(AssertionError, match="built query-stage state"):
        lazy.retrieve("Which film was directed by the director of Tokyo Story?", k=5)
