"""add/delete update the stored words, BM25 and the lexical families from the changed documents'
tokens only, and leave the same state a build from the new corpus's text has (index/lexical/
incremental.py, index/bm25_index.py); a small add runs without torch (index/small_batch.py)."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest

N_BASE = 160  # = conftest.N_BASE (test modules here are not a package)


def _check_like_a_build(ix, questions):
    """The index's words, families, own-title columns, lexical nodes and BM25 equal what a build
    computes from the current chunks' text (column order included)."""
    import bm25s
    from contextrag.index.build import lexical_family_names, title_own_columns
    from contextrag.index.core import bm25_tokenize, bm25_tokenize_ids, index_stemmer
    from contextrag.index.lexical import words as lw
    from contextrag.index.distinct import ChunkSentences
    from contextrag.index.lexical.families import counted_over, lexical_families
    from contextrag.index.lexical.nodes import select_lexical_nodes
    stem = index_stemmer(ix.config)
    sent = ChunkSentences.of_texts(ix.chunk_texts)
    np.testing.assert_array_equal(ix.chunk_sentences.indptr, sent.indptr)
    np.testing.assert_array_equal(ix.chunk_sentences.hashes, sent.hashes)
    ref = counted_over(lexical_families(ix.chunk_titles, ix.chunk_texts, lexical_family_names(ix.config),
                                        stemmer=stem), sent.new_text())
    assert ix.lexical.distinct == ref.distinct
    assert list(ix.lexical.families) == list(ref.families)
    for name, g in ref.families.items():
        f = ix.lexical.families[name]
        assert f.attributes == g.attributes, name          # the same columns in the same order
        np.testing.assert_array_equal(f.df, g.df)
        np.testing.assert_array_equal(f.weight, g.weight)
        A, B = f.incidence.tocsr(), g.incidence.tocsr()
        A.sort_indices()
        B.sort_indices()
        for part in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(A, part), getattr(B, part), err_msg=f"{name}.{part}")
        assert f.max_n == g.max_n and f.stemmer == g.stemmer
    np.testing.assert_array_equal(ix.words.title_own, title_own_columns(ix))
    W = lw.from_chunks(ix.chunk_titles, ix.chunk_texts)
    for i in range(ix.n_chunks):
        a = ix.words.seq_ids[ix.words.seq_indptr[i]:ix.words.seq_indptr[i + 1]]
        b = W.seq_ids[W.seq_indptr[i]:W.seq_indptr[i + 1]]
        assert [ix.words.vocab[j] for j in a] == [W.vocab[j] for j in b]
    np.testing.assert_array_equal(ix.words.title_len, W.title_len)
    cfg = ix.config
    nodes = select_lexical_nodes(ref, ix.chunk_doc_ids, cfg.lexical_joins, cfg.lexical_meets, cfg.min_support)
    lexical_items = [i for i in ix.item_ids if i.startswith(("join:", "meet:")) and not i.split(":", 1)[1].isdigit()]
    assert sorted(f"{n.kind}:{n.label}" for n in nodes) == sorted(lexical_items)
    fresh = bm25s.BM25()
    fresh.index(bm25_tokenize_ids(ix.search_texts(), stem), show_progress=False)
    for q in questions:
        toks = bm25_tokenize([q], stem)[0]
        np.testing.assert_array_equal(ix.bm25.get_scores(toks), fresh.get_scores(toks), err_msg=q)


@pytest.fixture(scope="module")
def questions():
    from shared_data import hotpot_file
    return [q["question"] for q in json.loads(hotpot_file().read_text())[:25]]


def test_add_and_delete_equal_a_build_of_the_text(fresh, hotpot_paragraphs, questions):
    ix = fresh.index
    assert ix.words is not None and ix.words.n_chunks == ix.n_chunks
    fresh.add(hotpot_paragraphs[N_BASE:N_BASE + 6])
    _check_like_a_build(fresh.index, questions)
    # p0 introduced many term columns (they move to their next first occurrence); the deleted
    # paragraphs' titles leave the title family
    fresh.delete(["p0", "p7", hotpot_paragraphs[N_BASE + 1]["id"]])
    _check_like_a_build(fresh.index, questions)
    fresh.add(hotpot_paragraphs[N_BASE + 6:N_BASE + 9])
    _check_like_a_build(fresh.index, questions)
    from contextrag import ContextRAG
    again = ContextRAG.load(fresh.path, embedder=fresh.index.embedder)
    _check_like_a_build(again.index, questions)
    for q in questions[:5]:
        a, b = fresh.retrieve(q, k=8), again.retrieve(q, k=8)
        assert [h.id for h in a] == [h.id for h in b]


def test_add_equals_the_add_that_retokenises(base_dir, embedder, hotpot_paragraphs, questions, tmp_path, monkeypatch):
    """The incremental add answers queries exactly as an add that recomputes the words, BM25 and the
    families from every chunk's text."""
    import shutil
    from contextrag import ContextRAG
    from contextrag.index import build
    new = hotpot_paragraphs[N_BASE:N_BASE + 5]
    shutil.copytree(base_dir, tmp_path / "a")
    shutil.copytree(base_dir, tmp_path / "b")
    inc = ContextRAG.load(tmp_path / "a", embedder=embedder)
    inc.add(new)
    full = ContextRAG.load(tmp_path / "b", embedder=embedder)
    with monkeypatch.context() as m:
        m.setattr(build, "_families_after_add", lambda *a, **k: None)    # families from the text
        orig = build.build_bm25

        def from_text(ix):
            ix.words = None                                              # words from the text
            return orig(ix)
        m.setattr(build, "build_bm25", from_text)
        full.add(new)
    assert inc.index.item_ids == full.index.item_ids
    for q in questions:
        a, b = inc.retrieve(q, k=10), full.retrieve(q, k=10)
        assert [(h.id, h.score) for h in a] == [(h.id, h.score) for h in b], q


def test_add_tokenises_only_the_new_text(fresh, hotpot_paragraphs, monkeypatch):
    """A mock tokeniser records every text it is given; the old chunks' text is never among them,
    and nothing tokenises the corpus (the build's BM25 and family tokenisers fail if called)."""
    from contextrag.index import core
    from contextrag.index.lexical import families, tokens, words
    old = set(words.search_texts(fresh.index.chunk_titles, fresh.index.chunk_texts))
    seen = []
    real = words.tokenize_words

    def recording(texts):
        texts = list(texts)
        seen.extend(texts)
        return real(texts)

    def boom(*a, **k):
        raise AssertionError("the corpus was tokenised again")
    monkeypatch.setattr(words, "tokenize_words", recording)
    monkeypatch.setattr("contextrag.index.lexical.incremental.tokenize_words", recording)
    for mod, name in ((core, "bm25_tokenize_ids"), (families, "lexical_families"), (families, "map_reduce_families"),
                      (tokens, "bm25_tokenize"), (tokens, "word_tokens"), (tokens, "map_block")):
        monkeypatch.setattr(mod, name, boom)
    new = hotpot_paragraphs[N_BASE:N_BASE + 4]
    fresh.add(new)
    ix = fresh.index
    k = ix.n_chunks - len(old)
    assert k >= len(new) and sorted(seen) == sorted(words.search_texts(ix.chunk_titles[-k:], ix.chunk_texts[-k:]))
    seen.clear()
    fresh.delete([new[0]["id"], "p3"])
    assert seen == []                                 # a delete tokenises nothing


def test_snapshot_without_words_is_migrated_once(base_dir, embedder, hotpot_paragraphs, questions, tmp_path, caplog):
    import shutil
    from contextrag import ContextRAG
    from contextrag.index import store
    from contextrag.index.lexical import words as lw
    dst = tmp_path / "old"
    shutil.copytree(base_dir, dst)
    rag = ContextRAG.load(dst, embedder=embedder)
    rag.index.words = None                      # what an older library wrote: no tokens.safetensors
    rag.save()
    assert not (store.snapshot_dir(dst) / lw.FILE).exists()
    old = ContextRAG.load(dst, embedder=embedder)
    assert old.index.words is None
    assert len(old.retrieve(questions[0], k=3)) == 3          # queries need no words
    with caplog.at_level(logging.WARNING, logger="contextrag"):
        old.add(hotpot_paragraphs[N_BASE:N_BASE + 3])
    assert caplog.text.count("no stored words") == 1
    _check_like_a_build(old.index, questions)
    assert (store.snapshot_dir(dst) / lw.FILE).exists()
    caplog.clear()
    again = ContextRAG.load(dst, embedder=embedder)
    with caplog.at_level(logging.WARNING, logger="contextrag"):
        again.add(hotpot_paragraphs[N_BASE + 3:N_BASE + 5])
    assert "no stored words" not in caplog.text
    _check_like_a_build(again.index, questions)


def test_small_batch_memberships_equal_the_ops_path(base):
    from contextrag import Config, ops
    from contextrag.index import small_batch
    from contextrag.index.context import _fcm_level
    ix = base.index
    books = ix.codebooks
    rng = np.random.default_rng(0)
    X = ix.chunk_embeddings[rng.choice(ix.n_chunks, 37, replace=False)].copy()
    X[0] = books[0][1]                                        # a point on a centre: a one-hot row
    for cfg in (Config(), Config(fcm_top_k=3, fcm_normalize="max", fcm_m=1.7)):
        codes, blocks, resid = small_batch.rq_memberships(X, books, cfg.fcm_m, cfg.fcm_top_k, cfg.fcm_normalize)
        R = X.copy()
        for lvl, C in enumerate(books):
            np.testing.assert_allclose(blocks[lvl], _fcm_level(R, C, cfg), atol=2e-6)
            lab = np.asarray(ops.kmeans_assign(R, C)[0])
            np.testing.assert_array_equal(codes[:, lvl], lab)
            R -= C[lab]
        np.testing.assert_allclose(resid, (R * R).sum(axis=1), rtol=1e-5, atol=1e-6)
    assert blocks[0][0].max() == 1.0
    A = rng.random((13, 7)).astype(np.float32)
    A[A < 0.4] = 0
    incidence = rng.random((7, 29)).astype(np.float32)
    incidence[incidence < 0.5] = 0
    np.testing.assert_array_equal(small_batch.luk_up(A, incidence, block=50), np.asarray(ops.luk_up(A, incidence)))


def test_small_add_imports_no_torch(base_dir, hotpot_paragraphs, tmp_path):
    """A load and an add of a few documents never import torch (only the embedder might)."""
    import shutil
    shutil.copytree(base_dir, tmp_path / "idx")
    (tmp_path / "docs.json").write_text(json.dumps(hotpot_paragraphs[N_BASE:N_BASE + 3]))
    code = textwrap.dedent(f"""
        import json, sys, zlib
        import numpy as np
        from contextrag import ContextRAG

        class HashEmbedder:                 # 384-d vectors from the text's hash: no model, no torch
            dim = 384
            def embed_passages(self, texts):
                out = [np.random.default_rng(zlib.crc32(t.encode())).standard_normal(384) for t in texts]
                X = np.asarray(out, np.float32).reshape(-1, 384)
                return X / np.linalg.norm(X, axis=1, keepdims=True)
            embed_queries = embed_passages

        rag = ContextRAG.load({str(tmp_path / "idx")!r}, embedder=HashEmbedder())
        rag.add(json.load(open({str(tmp_path / "docs.json")!r})))
        assert rag.index.n_chunks > {N_BASE}
        print("torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "False"


def _families_of(titles, texts, names=("title", "term")):
    from contextrag.index.lexical.families import lexical_families
    return lexical_families(titles, texts, list(names))


def _same(f, g):
    assert f.attributes == g.attributes
    np.testing.assert_array_equal(f.df, g.df)
    A, B = f.incidence.tocsr(), g.incidence.tocsr()
    A.sort_indices()
    B.sort_indices()
    for part in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(A, part), getattr(B, part), err_msg=part)
    assert f.max_n == g.max_n


EDGE_OLD = [("Alder", "Alder trees grow near Birch Hill and the Old Mill."),
            ("", "No title here; Alder again, and the who."),
            ("Birch Hill", "Birch Hill is a hill. It mentions Cedar Lake twice: Cedar Lake."),
            ("Alder", "A second Alder document with the same title."),
            ("The", "A stopword title."),
            ("X", "")]
EDGE_NEW = [("Cedar Lake", "Cedar Lake lies below Birch Hill; the Alder grows there."),
            ("The Who", "The Who played near Cedar Lake and the Old Mill in 1969."),
            ("Old Mill", "Old Mill."),
            ("Birch Hill", "A new document with an old title, Alder and Cedar Lake."),
            ("", "")]


@pytest.mark.parametrize("native", [True, False])
def test_incremental_families_on_edge_cases(native, monkeypatch):
    """Empty titles and texts, shared and stopword titles, a new title mentioned by old chunks, a
    title that leaves with its last chunk: equal to the families built from the text."""
    from contextrag.index.lexical import incremental as inc
    from contextrag.index.lexical import tokens as lm
    from contextrag.index.lexical import words as lw
    if not native:
        monkeypatch.setattr(lm, "native_extension", lambda: None)
    t0, x0 = [t for t, _ in EDGE_OLD], [x for _, x in EDGE_OLD]
    t1, x1 = [t for t, _ in EDGE_NEW], [x for _, x in EDGE_NEW]
    fams = _families_of(t0, x0)
    W = lw.from_chunks(t0, x0)
    W.title_own = np.fromiter((fams.families["title"].vocab.get(lm.normalise_title(t), -1) for t in t0), np.int32)
    W2, ids, off = inc.append_chunks(W, t1, x1)
    n0 = len(t0)
    title, own = inc.title_after_add(fams.families["title"], W2, n0, t1)
    term = inc.term_after_add(fams.families["term"], W2, n0, ids, off)
    ref = _families_of(t0 + t1, x0 + x1)
    _same(title, ref.families["title"])
    _same(term, ref.families["term"])
    assert [title.attributes[c] if c >= 0 else None for c in own] == \
        [lm.normalise_title(t) if lm.normalise_title(t) in ref.families["title"].vocab else None for t in t0 + t1]
    assert len(W.vocab) < len(W2.vocab) and W.index is not W2.index     # the old words stay as they were
    for drop in ([0], [0, 3], [2, 6], [1, 4, 5, 10], list(range(n0))):
        keep = np.setdiff1d(np.arange(W2.n_chunks), drop)
        W3 = inc.keep_chunks(W2, keep)
        W2.title_own = own
        t3, o3 = inc.title_after_delete(title, own, keep, W2.n_chunks)
        m3 = inc.term_after_delete(term, W2, keep)
        tt, xx = [(t0 + t1)[i] for i in keep], [(x0 + x1)[i] for i in keep]
        ref = _families_of(tt, xx)
        _same(t3, ref.families["title"])
        _same(m3, ref.families["term"])
        assert W3.n_chunks == keep.size and o3.shape == (keep.size,)
        seq = [[W3.vocab[j] for j in W3.seq_ids[W3.seq_indptr[i]:W3.seq_indptr[i + 1]]] for i in range(keep.size)]
        assert seq == [lm.WORD.findall(s.lower()) for s in lw.search_texts(tt, xx)]


def test_add_delete_then_query_equals_a_fresh_build(questions):
    """With no RQ join/meet items (n_join = n_meet = 0) and the fuzzy term off, every query term is a
    function of the text and the embeddings alone: after add and delete the index answers exactly as
    a fresh build of the same documents (the RQ codebooks, which an add keeps, play no part)."""
    import importlib.util
    from pathlib import Path
    from contextrag import Config, ContextRAG
    from shared_data import hotpot_file
    spec = importlib.util.spec_from_file_location("hash_embedder", Path(__file__).parents[1] / "reliability"
                                                  / "hash_embedder.py")
    he = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(he)
    seen: dict = {}
    for q in json.loads(hotpot_file().read_text()):
        for t, s in q["context"]:
            seen.setdefault(t, "".join(s))
        if len(seen) >= 120:
            break
    docs = [{"id": f"p{i}", "title": t, "text": x} for i, (t, x) in enumerate(list(seen.items())[:120])]
    cfg = Config(rq_sizes=(8, 4), n_join=0, n_meet=0, n_summaries=0, seed=0, chunk_tokenizer="regex")
    E = he.HashEmbedder()
    inc = ContextRAG.build(docs[:110], config=cfg, embedder=E)
    inc.add(docs[110:118])
    inc.delete(["p0", "p5", "p112"])
    fresh = ContextRAG.build([d for d in docs[:118] if d["id"] not in ("p0", "p5", "p112")], config=cfg, embedder=E)
    assert inc.index.item_ids == fresh.index.item_ids
    for q in questions:
        a, b = inc.retrieve(q, k=10, w_fuzzy=0.0), fresh.retrieve(q, k=10, w_fuzzy=0.0)
        assert [h.id for h in a] == [h.id for h in b], q
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], rtol=1e-6, err_msg=q)


@pytest.mark.parametrize("shape", [(1, 5, (3,)), (37, 23, (9, 4, 2)), (130, 384, (96, 24, 12))])
def test_small_batch_against_the_reference(isa, shape):
    """RQ codes, memberships and residuals of the torch-free path against the float64 reference, on
    odd shapes, with each instruction set of the native epilogues; a point on a centre, a duplicate."""
    from contextrag import ref
    from contextrag.index import small_batch
    n, d, ks = shape
    rng = np.random.default_rng(n + d)
    X = rng.standard_normal((n, d)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    books = [rng.standard_normal((k, d)).astype(np.float32) * (0.5 ** lvl) for lvl, k in enumerate(ks)]
    X[0] = books[0][-1]
    if n > 2:
        X[2] = X[1]
    for m, top_k in ((2.0, None), (1.5, 2)):
        codes, blocks, resid = small_batch.rq_memberships(X, books, m, top_k, "none")
        R = X.astype(np.float64)
        for lvl, C in enumerate(books):
            np.testing.assert_allclose(blocks[lvl], ref.fcm_memberships(R, C, m, top_k), atol=3e-5)
            lab = ref.kmeans_assign(R, C)[0]
            np.testing.assert_array_equal(codes[:, lvl], lab)
            R = R - C[lab]
        np.testing.assert_allclose(resid, (R * R).sum(axis=1), rtol=1e-4, atol=1e-5)
    assert blocks[0][0, -1] == 1.0 and blocks[0][0].sum() == 1.0
    A = rng.random((n, 7)).astype(np.float32)
    I = (rng.random((7, len(ks) + 3)) * (rng.random((7, len(ks) + 3)) > 0.5)).astype(np.float32)
    np.testing.assert_allclose(small_batch.luk_up(A, I, block=3), ref.luk_up(A, I), atol=1e-6)


def test_snapshot_with_bm25s_scores_loads_and_updates(fresh, hotpot_paragraphs, questions):
    """A snapshot written before BM25 stored counts holds bm25s's score matrix: it loads and scores
    as before, and its first update replaces it by counts (from the stored words) that equal a build."""
    import bm25s
    from contextrag import ContextRAG
    from contextrag.index import store
    from contextrag.index.bm25_index import CountBM25, bm25_from_counts, chunk_counts, item_counts, word_terms
    from contextrag.index.core import SUMMARY, bm25_tokenize, index_stemmer
    ix = fresh.index
    assert isinstance(ix.bm25, CountBM25)
    stem = index_stemmer(ix.config)
    extra = {int(i): ix.item_texts[i] for i in np.flatnonzero(ix.item_kinds == SUMMARY)}
    counts, names = item_counts(chunk_counts(ix.words, stem), ix.item_kinds, ix.item_sources, extra,
                                word_terms(ix.words, stem)[1], stem)
    now = ix.bm25
    ix.bm25 = bm25_from_counts(counts, names)          # what an older version stored
    store.save(ix, fresh.path)
    old = ContextRAG.load(fresh.path, embedder=ix.embedder)
    assert isinstance(old.index.bm25, bm25s.BM25)
    assert (store.snapshot_dir(fresh.path) / "bm25" / "params.index.json").is_file()
    for q in questions[:8]:
        toks = bm25_tokenize([q], stem)[0]
        np.testing.assert_array_equal(old.index.bm25.get_scores(toks), now.get_scores(toks), err_msg=q)
    old.add(hotpot_paragraphs[N_BASE:N_BASE + 2])
    assert isinstance(old.index.bm25, CountBM25)
    _check_like_a_build(old.index, questions)
    again = ContextRAG.load(fresh.path, embedder=ix.embedder)
    assert isinstance(again.index.bm25, CountBM25)
    _check_like_a_build(again.index, questions)


def _assert_graph_like_a_recompute(ix):
    """Node members, intents, window counts, edges and attribute centroids equal their recomputation
    over every chunk."""
    import copy

    from contextrag.index.graph import compute_intents, node_members, set_edges
    g = ix.graph
    ref = copy.deepcopy(g)
    ref.members = node_members(g.kind, g.parents, g.attr, ix.context.members())
    assert (sp_abs_diff(g.members, ref.members)) == 0
    np.testing.assert_array_equal(g.intent, compute_intents(g, ix.context.dense()))
    set_edges(ref, ix.chunk_doc_ids, ix.chunk_positions, ix.config)
    assert g.cooc is not None and (g.cooc != ref.cooc).nnz == 0
    for f in ("edge_src", "edge_dst", "edge_kind", "edge_weight"):
        np.testing.assert_array_equal(getattr(g, f), getattr(ref, f), err_msg=f)
    assert (g.edge_kind == 2).any()                  # the test index has co-occurrence edges
    np.testing.assert_array_equal(ix.node_extents(), g.extents(ix.context.dense()))
    from contextrag.index.build import attr_centroids
    kept = None if getattr(ix, "_attr_sums", None) is None else np.array(ix._attr_sums)
    np.testing.assert_array_equal(ix.attr_centroids, attr_centroids(ix, ix.chunk_embeddings))
    if kept is not None:                             # the sums an add extended equal the product's
        np.testing.assert_array_equal(kept, ix._attr_sums)


def sp_abs_diff(A, B) -> int:
    return int((A.astype(np.int8) != B.astype(np.int8)).nnz)


def test_graph_updates_equal_a_recompute(fresh, hotpot_paragraphs):
    """add keeps the old rows' node members and extents and adds the new documents' window counts;
    delete recomputes only the intents of nodes whose extent is positive on a deleted chunk and
    subtracts the deleted documents' window counts: both equal recomputing everything, and the
    counts survive a save and load."""
    from contextrag import ContextRAG
    fresh.index.node_extents()                       # a loaded index's extents are extended, not rebuilt
    fresh.add(hotpot_paragraphs[N_BASE:N_BASE + 5])
    _assert_graph_like_a_recompute(fresh.index)
    out = fresh.delete(["p3", "p40", "p41", hotpot_paragraphs[N_BASE + 2]["id"]])
    _assert_graph_like_a_recompute(fresh.index)
    assert out["chunks"] >= 4
    # delete the one chunk that gives some node's intent its value: that intent must rise
    ix = fresh.index
    I = ix.context.dense()
    E = ix.graph.extents(I)
    pick = None
    for v in range(ix.graph.n_nodes):
        T = 1.0 + I - E[v][:, None]
        lo = T.min(axis=0)
        for m in np.flatnonzero(lo < 1.0):
            if (T[:, m] == lo[m]).sum() == 1:
                pick = (v, m, int(T[:, m].argmin()))
                break
        if pick:
            break
    assert pick is not None
    v, m, row = pick
    before = float(ix.graph.intent[v, m])
    fresh.delete([ix.chunk_doc_ids[row]])
    _assert_graph_like_a_recompute(fresh.index)
    assert fresh.index.graph.intent[v, m] > before
    assert 0 < fresh.index.info["updates"][-1]["affected_nodes"] < fresh.index.graph.n_nodes
    again = ContextRAG.load(fresh.path, embedder=fresh.index.embedder)
    assert (again.index.graph.cooc != fresh.index.graph.cooc).nnz == 0
    assert again.index._attr_sums is not None
    again.add(hotpot_paragraphs[N_BASE + 5:N_BASE + 7])
    _assert_graph_like_a_recompute(again.index)


def test_graph_of_a_snapshot_without_window_counts_updates(fresh, hotpot_paragraphs):
    """An index saved before the window counts were kept: its first update counts every window once."""
    from contextrag import ContextRAG
    from contextrag.index import store
    fresh.index.graph.cooc = None
    store.save(fresh.index, fresh.path)
    old = ContextRAG.load(fresh.path, embedder=fresh.index.embedder)
    assert old.index.graph.cooc is None
    old.delete(["p9"])
    _assert_graph_like_a_recompute(old.index)


def test_all_seed_graph_extents_after_add_and_delete(hotpot_paragraphs, embedder):
    """Every node the seed of its own attribute (the default graph at scale): after an add and a
    delete the extents (the delete takes them from the kept context, by the native transpose) equal
    their recomputation and are the transpose of the context's matrix."""
    import warnings
    from contextrag import Config, ContextRAG
    from contextrag.index import prepared
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # codebook sizes clamped to the small corpus
        rag = ContextRAG.build(hotpot_paragraphs[:N_BASE], config=Config(n_summaries=0, rq_sizes=(8, 4, 2)),
                               embedder=embedder)
    ix = rag.index
    assert prepared.context_items_major(ix) is not None
    ix.node_extents()
    rag.add(hotpot_paragraphs[N_BASE:N_BASE + 4])
    own = prepared.context_items_major(rag.index)
    assert own is not None and np.shares_memory(rag.index.node_extents(), own)     # the context's view
    np.testing.assert_array_equal(rag.index.node_extents(), rag.index.graph.extents(rag.index.context.dense()))
    rag.delete(["p3", "p40", hotpot_paragraphs[N_BASE + 1]["id"]])
    ix = rag.index
    own = prepared.context_items_major(ix)
    assert own is not None and ix._extents is not None     # set by the delete, not derived on demand
    assert np.shares_memory(ix._extents, own)
    np.testing.assert_array_equal(ix._extents, own.T)
    np.testing.assert_array_equal(ix.node_extents(), ix.graph.extents(ix.context.dense()))
    _assert_graph_like_a_recompute(ix)


def test_updates_leave_the_previous_index_object_as_it_was(fresh, hotpot_paragraphs, questions):
    """An update works on a copy that shares the arrays it only replaces (context blocks, BM25 postings,
    the stored words and their vocabulary): the index object queries were reading is unchanged after
    an add and a delete."""
    from contextrag.index.core import bm25_tokenize
    old = fresh.index

    def state(ix):
        toks = bm25_tokenize([questions[0]])[0]
        return {"dense": ix.context.dense().copy(), "members": ix.context.members().toarray(),
                "intent": ix.graph.intent.copy(), "attr": ix.graph.attr.copy(),
                "gmembers": ix.graph.members.toarray(), "emb": np.array(ix.embeddings),
                "centroids": np.array(ix.attr_centroids), "bm25": ix.bm25.get_scores(toks),
                "rows": {k: np.array(v) for b in ix.context.blocks for k, v in b.rows.items()},
                "words": {k: np.array(getattr(ix.words, k)) for k in ("seq_indptr", "seq_ids", "bag_indptr",
                                                                     "bag_words", "bag_counts", "title_own")},
                "vocab": list(ix.words.vocab)}
    before = state(old)
    fresh.add(hotpot_paragraphs[N_BASE:N_BASE + 3])
    fresh.delete(["p2", hotpot_paragraphs[N_BASE]["id"]])
    assert fresh.index is not old
    after = state(old)
    for k, v in before.items():
        if k in ("rows", "words"):
            for r in v:
                np.testing.assert_array_equal(after[k][r], v[r], err_msg=r)
        else:
            np.testing.assert_array_equal(after[k], v, err_msg=k)


@pytest.mark.parametrize("cpus", [1, 2, 3, 8])
def test_member_sums_split_over_threads_equal_one_product(monkeypatch, cpus):
    """The centroids' sums computed in row blocks on several threads are the single sparse product's
    bits, with empty attributes, more threads than attributes, and a float64 input."""
    import os

    import scipy.sparse as sp
    from contextrag.index.build import member_sums
    rng = np.random.default_rng(cpus)
    n, d, k = 70_001, 37, 5
    lab = rng.integers(0, k + 2, n)                  # attributes k, k+1 dropped below: rows 5, 6 empty
    lab[lab >= k] = 0
    mem = sp.csr_matrix((np.ones(n, np.float32), (lab, np.arange(n))), shape=(k + 2, n))
    monkeypatch.setattr(os, "cpu_count", lambda: cpus)
    for E in (rng.standard_normal((n, d), dtype=np.float32), rng.standard_normal((n, d))):
        want = np.asarray(mem @ E, dtype=np.float32)
        got = member_sums(mem, E)
        assert got.dtype == np.float32 and got.shape == (k + 2, d)
        np.testing.assert_array_equal(got, want)
    assert not member_sums(mem, E)[k:].any()


def test_lanes_run_every_task_on_two_threads_and_raise_after_all_stopped():
    import threading
    import time

    from contextrag.index.lanes import lanes
    names, seen = [], []

    def task(k, pause=0.0):
        def run():
            time.sleep(pause)
            names.append(threading.current_thread().name)
            seen.append(k)
            return k
        return run
    assert lanes(task(0, 0.2), task(1, 0.05), task(2)) == [0, 1, 2]
    assert seen.index(2) > seen.index(1)                  # the third starts when a thread is free
    assert len(set(names)) == 2 and all(n.startswith("contextrag-update") for n in names)

    def boom():
        raise KeyError("first")
    seen.clear()
    with pytest.raises(KeyError, match="first"):
        lanes(task(0, 0.2), boom, task(2))
    assert sorted(seen) == [0, 2]                       # the others had finished before the error surfaced


def test_two_lanes_runs_both_and_raises_after_both_stopped():
    import threading
    import time

    from contextrag.index.lanes import two_lanes
    seen = []
    assert two_lanes(lambda: threading.current_thread().name, lambda: threading.current_thread().name)[1] \
        .startswith("contextrag-update")

    def slow():
        time.sleep(0.2)
        seen.append("there")
        return 2

    def boom():
        raise KeyError("here")
    with pytest.raises(KeyError, match="here"):
        two_lanes(boom, slow)
    assert seen == ["there"]                       # the other lane had finished before the error surfaced

    def boom2():
        raise ValueError("there")
    with pytest.raises(ValueError, match="there"):
        two_lanes(lambda: 1, boom2)
