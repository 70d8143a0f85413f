"""Candidate scoring (query/candidates.py): the cosine and routing terms on the RQ cells nearest the
query, the BM25 postings and the named entities' pages, against exhaustive scoring on a small index."""
from __future__ import annotations

import numpy as np
import pytest

from contextrag import Config, query
from contextrag.query import candidates as cand
from contextrag.query import view_of
from contextrag.query.fuzzy import Router


def _ids(hits):
    return [h.id for h in hits]


@pytest.fixture
def tiny_budget(monkeypatch):
    """A budget of m items per source, so that candidates are a small part of the test index."""
    def set_(m):
        monkeypatch.setattr(cand, "budget", lambda n, k: m)
    return set_


def test_auto_scores_every_item_below_the_threshold(index, hotpot):
    qs, _ = hotpot
    view = view_of(index)
    assert view.n < cand.CANDIDATE_MIN_ITEMS
    assert not cand.use_candidates(view, index.config)
    assert cand.use_candidates(view, Config(scoring="candidates"))
    for q in qs:
        auto = query.retrieve(index, q["question"], k=10)
        ex = query.retrieve(index, q["question"], k=10, scoring="exhaustive")
        assert [(h.id, h.score, h.parts) for h in auto] == [(h.id, h.score, h.parts) for h in ex]


@pytest.mark.parametrize("native", [True, False])
def test_candidates_covering_the_index_give_the_exhaustive_hits(index, hotpot, native, monkeypatch):
    """The same hits, scores and parts bit for bit, with the extension's row kernels (cosine, routing,
    BM25) or with NumPy alone."""
    from contextrag.ops import _backend
    if native and _backend.cpu_native("dot_rows") is None:
        pytest.skip("contextrag._C is not built")
    if not native:
        monkeypatch.setattr(_backend, "cpu_native", lambda name: None)
    qs, _ = hotpot
    view = view_of(index)
    assert cand.budget(view.n, 12) >= view.n        # k · ⌈√n⌉ items: every item of this small index
    for q in qs:
        got = query.retrieve(index, q["question"], k=12, scoring="candidates")
        ex = query.retrieve(index, q["question"], k=12, scoring="exhaustive")
        assert [(h.id, h.score, h.parts) for h in got] == [(h.id, h.score, h.parts) for h in ex]


def test_few_candidates_keep_exact_parts(index, hotpot, tiny_budget):
    qs, _ = hotpot
    tiny_budget(6)
    for q in qs:
        got = query.retrieve(index, q["question"], k=10, scoring="candidates")
        ex = {h.id: h for h in query.retrieve(index, q["question"], k=index.n_items, scoring="exhaustive")}
        assert len(got) == 10
        for h in got:        # a returned item's own terms are computed exactly
            for part in ("bm25", "cos", "fuzzy", "boost"):
                assert h.parts[part] == pytest.approx(ex[h.id].parts[part], abs=1e-6)
        assert ex[got[0].id].score >= sorted(x.score for x in ex.values())[-3]   # the best is near the top


def test_hop_bound_keeps_every_raised_item_that_could_reach_the_kth(index, hotpot, tiny_budget, monkeypatch):
    """The float32 hop bound only drops items the exact reach test drops: the same scored items and
    parts as selecting every raised item, on questions where the bound is above 0."""
    qs, _ = hotpot
    tiny_budget(4)
    view = view_of(index)
    cfg = Config(scoring="candidates")
    bounds = []
    real = cand._least_hop
    monkeypatch.setattr(cand, "_least_hop", lambda *a: bounds.append(real(*a)) or bounds[-1])
    got = []
    for q in qs[:12]:
        qv = query.dense.embed_queries(view, [q["question"]])
        got.append(cand.score_candidates(view, q["question"], qv, cfg, 10))
    assert any(b > 1e-3 for b in bounds)        # the bound did cut
    monkeypatch.setattr(cand, "_least_hop", lambda *a: np.float32(np.finfo(np.float32).smallest_subnormal))
    for q, parts in zip(qs[:12], got):
        qv = query.dense.embed_queries(view, [q["question"]])
        want = cand.score_candidates(view, q["question"], qv, cfg, 10)
        np.testing.assert_array_equal(parts["candidates"], want["candidates"])
        np.testing.assert_array_equal(parts["score"], want["score"])


def test_least_hop_bound():
    bo = np.array([1.0, 2.0], np.float32)
    tiny = np.finfo(np.float32).smallest_subnormal
    assert cand._least_hop(None, bo, 1.0) == tiny and cand._least_hop(0.5, bo, 1.0) == tiny
    assert cand._least_hop(3.0, bo, 0.0) == tiny and cand._least_hop(3.0, bo[:0], 1.0) == tiny
    t = cand._least_hop(3.0, bo, 0.5)       # 2 · (1 + 0.5 · hop) ≥ 3 − 1e-6: hop ≥ 1 − 1e-6
    assert t.dtype == np.float32 and float(t) <= 1.0 - 1e-6 and float(t) > 0.999998
    # the smallest float32 hop the exact test lets through is at or above the bound
    h = np.float32(1.0 - 2e-6)
    while not 2.0 * (1.0 + 0.5 * float(h)) >= 3.0 - 1e-6:
        h = np.nextafter(h, np.float32(2))
    assert h >= t
    assert cand._least_hop(np.inf, bo, 0.5) == tiny


def test_scored_items_are_the_candidates_and_those_spreading_raised(index, hotpot, tiny_budget):
    qs, _ = hotpot
    tiny_budget(4)
    view = view_of(index)
    cfg = Config(scoring="candidates")
    q = qs[0]["question"]
    qv = query.dense.embed_queries(view, [q])
    from contextrag.query.bm25 import bm25_scores
    C = cand.candidates(view, q, qv, bm25_scores(view, q), cfg, 10)
    assert C.size < view.n
    parts = cand.score_candidates(view, q, qv, cfg, 10)
    done = parts["candidates"]
    assert np.isin(C, done).all()
    assert np.isfinite(parts["score"][done]).all() and np.isneginf(np.delete(parts["score"], done)).all()
    extra = done[~np.isin(done, C)]
    assert (parts["spread"][extra] > 0).all()       # the others were raised by spreading
    n_chunks = int((np.asarray(view.kinds) == "chunk").sum())
    assert np.isin(np.arange(n_chunks, view.n), C).all()    # virtual items always
    top_bm = np.argsort(-bm25_scores(view, q), kind="stable")[:4]
    assert np.isin(top_bm, C).all()


def test_question_without_postings(index, tiny_budget):
    tiny_budget(5)
    hits = query.retrieve(index, "zqxv wvkj pfft", k=7, scoring="candidates")
    assert len(hits) == 7 and all(h.parts["bm25"] == 0 for h in hits)


def test_doc_filter(index, hotpot, tiny_budget):
    qs, docs = hotpot
    tiny_budget(3)
    wanted = [d["id"] for d in docs[:30]]
    for q in qs[:4]:
        hits = query.retrieve(index, q["question"], k=10, doc_ids=wanted, scoring="candidates")
        assert hits and all(set(h.doc_ids) <= set(wanted) for h in hits)
    narrow = [docs[0]["id"], docs[1]["id"]]         # fewer allowed items than the budget: all of them
    got = query.retrieve(index, qs[0]["question"], k=10, doc_ids=narrow, scoring="candidates")
    ex = query.retrieve(index, qs[0]["question"], k=10, doc_ids=narrow, scoring="exhaustive")
    assert _ids(got) == _ids(ex) and got


def test_k_larger_than_the_budget(index, hotpot, tiny_budget):
    qs, _ = hotpot
    tiny_budget(1)
    assert len(query.retrieve(index, qs[1]["question"], k=15, scoring="candidates")) == 15
    assert len(query.retrieve(index, qs[1]["question"], k=index.n_items + 5, scoring="candidates")) == index.n_items


def test_retrieve_many_matches_retrieve(index, hotpot, tiny_budget):
    qs, _ = hotpot
    tiny_budget(5)
    texts = [q["question"] for q in qs[:3]]
    many = query.retrieve_many(index, texts, k=5, scoring="candidates")
    assert [_ids(h) for h in many] == [_ids(query.retrieve(index, t, k=5, scoring="candidates")) for t in texts]


@pytest.mark.parametrize("want", [1, 37, 400, 2999, 5000])
def test_probe_from_a_partition_equals_the_sorted_cells(want, monkeypatch):
    """The head of the cells from a partition gives the chunks the stable sort of every cell gives,
    with tied cell scores (the codebooks' entries repeat) and wants up to the whole file."""
    rng = np.random.default_rng(want)
    books = [np.repeat(rng.standard_normal((20, 5)).astype(np.float32), 2, axis=0), rng.standard_normal((8, 5))]
    codes = np.stack([rng.integers(0, 40, 3000), rng.integers(0, 8, 3000)], axis=1)
    codes[codes[:, 0] < 6, 1] = 0                 # empty cells
    ivf = cand.InvertedFile(codes, [b.astype(np.float32) for b in books])
    qs = [rng.standard_normal(5).astype(np.float32) for _ in range(5)]
    fast = [ivf.probe(q, want) for q in qs]
    used = []
    real = ivf._best_cells
    monkeypatch.setattr(ivf, "_best_cells", lambda s, w: used.append(real(s, w) is not None) or None)
    for q, got in zip(qs, fast):
        np.testing.assert_array_equal(got, ivf.probe(q, want))
    assert any(used) == (want <= 400)             # the partition served the small wants


def test_inverted_file_cells():
    rng = np.random.default_rng(3)
    books = [rng.standard_normal((s, 7)).astype(np.float32) for s in (5, 3, 2)]
    codes = np.stack([rng.integers(0, s, 41) for s in (5, 3, 2)], axis=1)
    codes[:, 1] = np.where(codes[:, 0] == 4, 0, codes[:, 1])      # some empty cells
    ivf = cand.InvertedFile(codes, books)
    q = rng.standard_normal(7).astype(np.float32)
    cell = (codes[:, 0] * 3 + codes[:, 1]) * 2 + codes[:, 2]
    want = {c: float(q @ (books[0][c // 6] + books[1][c // 2 % 3] + books[2][c % 2])) for c in set(cell.tolist())}
    s = ivf.cell_scores(q)
    assert all(s[c] == pytest.approx(v, abs=1e-5) for c, v in want.items())
    got = ivf.probe(q, 10)
    best = sorted(want, key=lambda c: -want[c])
    taken, held = [], 0
    for c in best:                    # whole cells, best first, until they hold 10 chunks
        taken.append(c)
        held += int((cell == c).sum())
        if held >= 10:
            break
    assert got.tolist() == np.flatnonzero(np.isin(cell, taken)).tolist()
    allowed = np.zeros(41, bool)
    allowed[::3] = True
    got = ivf.probe(q, 4, allowed)
    assert allowed[got].sum() >= 4
    assert ivf.probe(q, 10 ** 6).tolist() == list(range(41))


@pytest.mark.parametrize("block", [None, 2])
@pytest.mark.parametrize("major", [False, True])
@pytest.mark.parametrize("native", [True, False])
def test_router_scores_at_equals_scores(major, block, native, monkeypatch):
    """The gathered scores are the kernel's bits, read in place by the extension or gathered by NumPy
    (also in several blocks)."""
    from contextrag.query import fuzzy
    if block is not None:
        monkeypatch.setattr(fuzzy, "GATHER_BLOCK", block)
    if native and fuzzy._cpu_native("route_rows") is None:
        pytest.skip("contextrag._C is not built")
    if not native:
        monkeypatch.setattr(fuzzy, "_cpu_native", lambda name: None)
    rng = np.random.default_rng(5)
    V, N, n = 9, 53, 47                       # 6 virtual items after 47 chunks
    A = rng.standard_normal((4, 8)).astype(np.float32)
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    It = rng.random((V, N)).astype(np.float32)
    kind = np.array([0, 0, 0, 0, 1, 2, 1, 2, 0], np.int8)
    attr = np.array([0, 1, 2, 3, 0, 0, 0, 0, 1])
    parents = np.array([[0, 0]] * 4 + [[0, 1], [1, 2], [2, 3], [0, 3]] + [[0, 0]])
    Ii = np.ascontiguousarray(It[:, :n].T) if major else None
    r = Router(A, np.array([0, 0, 1, 1]), kind, attr, parents, It, node_major=True, n_chunks=n, chunks_major=Ii)
    q = rng.standard_normal((2, 8)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    idx = np.array([0, 3, 17, 46, 47, 50, 52])
    np.testing.assert_array_equal(r.scores_at(q, 0.5, idx), r.scores(q, 0.5)[:, idx])
    np.testing.assert_array_equal(r.scores_at(q, 0.5, idx[:0]), np.zeros((2, 0), np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("V", [1, 7, 132])
def test_route_rows_equals_numpy_bit_for_bit(V, dtype):
    from contextrag.ops import native
    from contextrag.query.fuzzy import Router
    C = native()
    if C is None:
        pytest.skip("contextrag._C is not built")
    rng = np.random.default_rng(V)
    I = rng.random((301, V)).astype(dtype)
    I[::7] = 0.0
    mu = rng.random((3, V)).astype(dtype)
    idx = np.concatenate([rng.integers(0, 301, 500), [0, 300, 300]]).astype(np.int64)   # unsorted, repeated
    want = np.empty((3, idx.size), dtype)
    Router._route_gathered(mu, I, idx, want)
    got = C.route_rows(mu, I, idx)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert C.route_rows(mu, I, idx[:0]).shape == (3, 0)
    with pytest.raises(ValueError, match=r"idx must hold row indices in \[0, 301\)"):
        C.route_rows(mu, I, np.array([301]))
    with pytest.raises(ValueError, match="same number of columns"):
        C.route_rows(np.zeros((3, V + 1), dtype), I, idx)
    with pytest.raises(TypeError, match="same dtype"):
        C.route_rows(mu.astype(np.float16), I, idx)


def test_stored_item_major_extents(rag, hotpot, tmp_path, monkeypatch):
    from contextrag import ContextRAG
    qs, _ = hotpot
    monkeypatch.setattr(cand, "CANDIDATE_MIN_ITEMS", 1)      # store the copy for this small index
    rag.save(tmp_path / "with")
    monkeypatch.setattr(cand, "CANDIDATE_MIN_ITEMS", 10 ** 9)
    rag.save(tmp_path / "without")
    a, b = ContextRAG.load(tmp_path / "with"), ContextRAG.load(tmp_path / "without")
    ext, items = a.index._extents_items
    assert ext is a.index.node_extents() and items.shape == ext.T.shape
    np.testing.assert_array_equal(items, ext.T)
    assert getattr(b.index, "_extents_items", None) is None
    assert view_of(a.index).router._Ii is items                 # the stored copy, not a transpose
    for q in qs[:3]:
        assert _ids(a.retrieve(q["question"], k=8, scoring="candidates")) == \
            _ids(b.retrieve(q["question"], k=8, scoring="candidates")) == \
            _ids(b.retrieve(q["question"], k=8, scoring="exhaustive"))


def test_item_major_extents_of_an_all_seed_graph_are_the_context(hotpot, tmp_path, monkeypatch):
    """Every node the seed of its own attribute (the default graph): the extents are the context's
    matrix transposed, a view of it, stored in neither layout (the manifest says so; a library that
    reads "extents": false derives them on the first query) and taken from the context at load;
    queries give the hits of the index in memory, both ways."""
    import warnings
    from safetensors import safe_open
    from contextrag import ContextRAG
    from contextrag.index import prepared, store
    qs, docs = hotpot
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # codebook sizes clamped to the small corpus
        rag = ContextRAG.build(docs[:300], config=Config(n_summaries=0, rq_sizes=(8, 4, 2)))
    g = rag.index.graph
    assert (np.asarray(g.kind) == 0).all() and np.array_equal(g.attr, np.arange(g.n_nodes))
    monkeypatch.setattr(cand, "CANDIDATE_MIN_ITEMS", 1)
    rag.save(tmp_path / "ix")
    snap = store.snapshot_dir(tmp_path / "ix")
    meta = store.read_manifest(snap)["prepared"]
    assert meta["extents_items"] == "context" and meta["extents"] is False
    with safe_open(str(snap / prepared.FILE), "np") as f:
        assert "node_extents" not in f.keys() and "node_extents_items" not in f.keys()
    a = ContextRAG.load(tmp_path / "ix")
    ext, items = a.index._extents_items
    assert ext is a.index.node_extents() and items is a.index.context.blocks[0].matrix
    assert ext.base is not None and np.shares_memory(ext, items)          # a view, no copy
    np.testing.assert_array_equal(items, ext.T)
    np.testing.assert_array_equal(ext, a.index.graph.extents(a.index.context.dense()))
    router = view_of(a.index).router
    assert router._Ii is items and np.shares_memory(router._It, items)   # until a query routes every item
    for q in qs[:3]:
        want = _ids(rag.retrieve(q["question"], k=8, scoring="exhaustive"))
        assert _ids(a.retrieve(q["question"], k=8, scoring="candidates")) == want
        assert _ids(a.retrieve(q["question"], k=8, scoring="exhaustive")) == want
    assert router._It.flags.c_contiguous and router._It.shape == ext.shape      # laid out for every item
    # a manifest that says so for a graph whose extents are not the context's columns is refused
    ix = a.index
    ix.graph.kind = np.asarray(ix.graph.kind).copy()
    ix.graph.kind[0] = 1
    with pytest.raises(ValueError, match="context's matrix"):
        prepared.attach(ix, {"node_extents": ext}, {"extents": True, "extents_items": "context"})
    with pytest.raises(ValueError, match="context's matrix"):
        prepared.attach(ix, {}, {"extents": False, "extents_items": "context"})


def test_config_scoring_is_checked():
    with pytest.raises(ValueError, match="scoring"):
        Config(scoring="fast")


def test_holding_top_holds_the_k_largest():
    from contextrag.query.spread import holding_top, pick_seeds, seed_relevance
    rng = np.random.default_rng(11)
    for n, k in ((70_000, 80), (300_001, 26), (200_000, 1)):
        h = rng.standard_normal(n).astype(np.float32)
        h[rng.integers(0, n, 50)] = h.max()            # ties at the top
        h[: n // 3] = -np.inf
        sup = holding_top(h, k)
        kth = np.sort(h)[-k]
        assert set(np.flatnonzero(h >= kth).tolist()) <= set(sup.tolist())     # every one of the k best
        assert sup.size < n // 10
    assert holding_top(np.ones(100, np.float32), 5) is None            # small: the plain partition
    h = rng.random(150_000).astype(np.float32)
    order = np.lexsort((np.arange(h.size), -h))
    assert pick_seeds(h, 5).tolist() == order[:5].tolist()
    top = np.sort(h)[::-1][:26]
    want = np.clip((h - top[-1]) / (top[0] - top[-1]), 0, 1)
    np.testing.assert_allclose(seed_relevance(h, 25), want, rtol=1e-6)


def test_activations_that_reach_nothing_are_dropped_before_the_hop():
    import scipy.sparse as sp
    from contextrag import ops
    from contextrag.query.spread import LexicalState
    rng = np.random.default_rng(2)
    M = sp.random(60, 25, density=0.3, random_state=4, dtype=np.float32).tocsr()
    M.data = np.where(np.arange(M.nnz) % 3 == 0, M.data, M.data * 0.3).astype(np.float32)   # low columns
    st = LexicalState.__new__(LexicalState)
    st.G = ops.SpreadIncidence(M, rng.integers(0, 20, 60))
    mu = sp.csr_matrix(rng.random((3, 25)).astype(np.float32) * (rng.random((3, 25)) < 0.5))
    kept = st.reaching(mu)
    assert kept.nnz < mu.nnz
    assert np.allclose(st.column_max, M.toarray().max(axis=0))
    seeds, degs = np.array([[1, 7], [3, -1], [-1, -1]]), np.array([[0.9, 0.6], [1.0, 0], [0, 0]], np.float32)
    np.testing.assert_array_equal(ops.spread_hop(st.G, seeds, degs, kept), ops.spread_hop(st.G, seeds, degs, mu))


def test_hop_walks_columns_in_degree_order_or_whole():
    import scipy.sparse as sp
    from contextrag import ops
    rng = np.random.default_rng(8)
    M = sp.random(80, 30, density=0.25, random_state=9, dtype=np.float32).tocsr()
    doc = rng.integers(0, 25, 80)
    G = ops.SpreadIncidence(M, doc)
    assert G.by_degree
    for a in range(30):      # every column's entries in decreasing degree
        col = G.t_data[G.t_indptr[a]:G.t_indptr[a + 1]]
        assert (np.diff(col) <= 0).all()
    arrays = G.to_arrays()
    T = M.T.tocsr()
    T.sort_indices()
    arrays.update(indices=arrays["indices"].astype(np.int64), t_indices=T.indices.astype(np.int64),
                  t_data=T.data)      # as stored before the order (and before int32 indices)
    del arrays["by_degree"]
    old = ops.SpreadIncidence.from_arrays(arrays)
    assert not old.by_degree and old.in_degree_order().by_degree
    seeds = np.array([[1, 5, 9], [2, -1, -1]])
    degs = np.array([[0.95, 0.7, 0.4], [1.0, 0, 0]], np.float32)
    mu = sp.csr_matrix(rng.random((2, 30)).astype(np.float32) * (rng.random((2, 30)) < 0.4))
    want = ops.spread_hop(old, seeds, degs, mu)
    np.testing.assert_array_equal(ops.spread_hop(G, seeds, degs, mu), want)
    np.testing.assert_array_equal(ops.spread_hop(old.in_degree_order(), seeds, degs, mu), want)


def test_coverage_from_postings_equals_a_pass_over_every_item(index, hotpot, monkeypatch):
    """A hit's coverage reads the BM25 postings of the question's terms (CountBM25's, or bm25s's for a
    snapshot stored before the counts): the same values as a BM25 pass over every item per term."""
    from contextrag.index.bm25_index import CountBM25
    from contextrag.query import relevance as R
    qs, _ = hotpot
    view = view_of(index)
    assert isinstance(index.bm25, CountBM25) and R._postings(view) is not None
    idx = np.arange(view.n)
    fast = [R.coverage(view, q["question"], idx) for q in qs]
    monkeypatch.setattr(R, "_postings", lambda view: None)
    slow = [R.coverage(view, q["question"], idx) for q in qs]
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    assert any(a.any() for a in fast)



@pytest.mark.parametrize("m", [1, 50, 1200, 5000])
def test_bm25_best_takes_ties_in_item_order(m):
    """The m best scores, ties at the edge lowest index first (scores quantised so that many tie)."""
    rng = np.random.default_rng(m)
    n = max(1 << 16, 64 * m) + 7
    bm = np.where(rng.random(n) < 0.4, np.round(rng.random(n) * 40) / 40, 0).astype(np.float32)
    nz = np.flatnonzero(bm)
    want = np.sort(nz[np.lexsort((nz, -bm[nz]))[:m]])         # by score, then by index
    got = cand._bm25_best(bm, m)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(cand._best_in_order(bm, nz, m), want)
    small = bm[:100]
    np.testing.assert_array_equal(cand._bm25_best(small, 1000), np.flatnonzero(small))   # fewer than m


def test_in_sorted_is_isin_on_edges():
    from contextrag.query._select import in_sorted
    h = np.array([2, 5, 9, 10], np.int64)
    idx = np.array([0, 2, 3, 9, 10, 11, 5, 5], np.int64)      # below, equal, between, past the end, repeated
    np.testing.assert_array_equal(in_sorted(h, idx), np.isin(idx, h))
    assert in_sorted(h[:0], idx).tolist() == [False] * idx.size
    assert in_sorted(h, idx[:0]).shape == (0,)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -0.25, 1.5])
def test_router_refuses_degrees_outside_0_1(bad):
    from contextrag.query.fuzzy import Router
    rng = np.random.default_rng(7)
    A = rng.standard_normal((2, 4)).astype(np.float32)
    kind, attr, parents = np.zeros(3, np.int8), np.array([0, 1, 0]), np.zeros((3, 2), np.int64)
    It = rng.random((3, 11)).astype(np.float32)
    Router(A, np.array([0, 0]), kind, attr, parents, It, node_major=True)           # degrees in [0, 1]
    It[1, 5] = bad
    with pytest.raises(ValueError, match=r"finite degrees in \[0, 1\]"):
        Router(A, np.array([0, 0]), kind, attr, parents, It, node_major=True)
