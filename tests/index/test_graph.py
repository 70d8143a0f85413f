"""Concept-graph invariants on the real base index (HotpotQA paragraphs, MiniLM embeddings)."""
import numpy as np
import pytest
import scipy.sparse as sp

from contextrag import ops
from contextrag.index.core import CHUNK, JOIN_ITEM, MEET_ITEM
from contextrag.index.graph import COOC, DOWN, JOIN, MEET, SEED, UP, cooc_edges, core_meet_cardinality, windows

ATOL = 1e-5


def test_graph_has_every_node_kind(base):
    g = base.index.graph
    for k in (SEED, JOIN, MEET):
        assert (g.kind == k).sum() > 0, f"no node of kind {k}"
    assert (g.kind == JOIN).sum() <= base.index.config.n_join
    assert (g.kind == MEET).sum() <= base.index.config.n_meet


def test_seed_extents_are_closed_attribute_concepts(base):
    ix = base.index
    I = ix.context.dense()
    g = ix.graph
    seeds = np.flatnonzero(g.kind == SEED)
    ext = ix.node_extents()[seeds]
    # {m}↓ computed by the kernel from the attribute indicator equals the stored extent
    B = np.zeros((len(seeds), I.shape[1]), np.float32)
    B[np.arange(len(seeds)), g.attr[seeds]] = 1.0
    np.testing.assert_allclose(ops.luk_down(B, I), ext, atol=ATOL)
    # closed: A↑↓ = A, and the stored intent is A↑
    closed, up = ops.luk_closure(ext, I)
    np.testing.assert_allclose(closed, ext, atol=ATOL)
    np.testing.assert_allclose(g.intent[seeds], up, atol=ATOL)
    # an intent holds its own attribute fully
    np.testing.assert_allclose(g.intent[seeds, g.attr[seeds]], 1.0, atol=ATOL)


def test_join_contains_both_parents_meet_inside_both(base):
    ix = base.index
    g = ix.graph
    ext = ix.node_extents()
    mem = g.members.toarray()
    grp = ix.context.attr_group
    for v in np.flatnonzero(g.kind == JOIN):
        a, b = g.parents[v]
        assert g.kind[a] == SEED and g.kind[b] == SEED and a != b
        assert grp[g.attr[a]] == grp[g.attr[b]], "a join bridges clusters of one group"
        assert (ext[v] >= ext[a] - ATOL).all() and (ext[v] >= ext[b] - ATOL).all()
        assert (mem[v] >= mem[a]).all() and (mem[v] >= mem[b]).all()
        # the closure of the join's extent contains it too (eq. 8: A1∨2 = (max)↑↓ ⊇ max)
        closed, _ = ops.luk_closure(ext[v], ix.context.dense())
        assert (closed >= ext[v] - ATOL).all()
    for v in np.flatnonzero(g.kind == MEET):
        a, b = g.parents[v]
        assert grp[g.attr[a]] != grp[g.attr[b]], "a meet crosses groups"
        assert (ext[v] <= ext[a] + ATOL).all() and (ext[v] <= ext[b] + ATOL).all()
        assert (mem[v] <= mem[a]).all() and (mem[v] <= mem[b]).all()
        assert mem[v].sum() >= ix.config.min_support
        assert mem[v].sum() < min(mem[a].sum(), mem[b].sum()), "a meet is a strict specialisation"


def test_intents_match_kernel(base):
    ix = base.index
    I = ix.context.dense()
    np.testing.assert_allclose(ix.graph.intent, ops.luk_up(ix.node_extents(), I), atol=ATOL)


def test_lattice_edges_link_nodes_to_their_parents(base):
    g = base.index.graph
    lat = g.edge_kind != COOC
    pairs = set(zip(g.edge_src[lat].tolist(), g.edge_dst[lat].tolist(), g.edge_kind[lat].tolist()))
    for v in np.flatnonzero(g.kind != SEED):
        for p in g.parents[v]:
            child, parent = (p, v) if g.kind[v] == JOIN else (v, p)
            assert (child, parent, UP) in pairs and (parent, child, DOWN) in pairs
    assert lat.sum() == 4 * (g.kind != SEED).sum()


def test_cooc_edges_match_brute_force_within_documents(base):
    ix = base.index
    g = ix.graph
    w = ix.config.cooc_window
    # brute force: windows of w consecutive chunks of one document
    by_doc = {}
    for i, (d, p) in enumerate(zip(ix.chunk_doc_ids, ix.chunk_positions)):
        by_doc.setdefault(d, []).append((p, i))
    wins = []
    for d, lst in by_doc.items():
        idx = [i for _, i in sorted(lst)]
        for s in range(max(1, len(idx) - w + 1)):
            wins.append(set(idx[s:s + w]))
    mem = [set(g.members[v].indices.tolist()) for v in range(g.n_nodes)]
    expect = {}
    for win in wins:
        active = [v for v in range(g.n_nodes) if mem[v] & win]
        for a in active:
            for b in active:
                if a != b:
                    expect[(a, b)] = expect.get((a, b), 0) + 1
    expect = {k: c for k, c in expect.items() if c >= ix.config.cooc_threshold}
    co = g.edge_kind == COOC
    got = {(int(s), int(d)): float(c) for s, d, c in zip(g.edge_src[co], g.edge_dst[co], g.edge_weight[co])}
    assert got == expect
    assert len(got) > 0


def test_windows_never_cross_documents():
    doc_ids = ["a", "a", "b", "a", "b", "c"]
    pos = np.array([0, 1, 0, 2, 1, 0])
    W = windows(doc_ids, pos, 2).toarray()
    for row in W:
        assert len({doc_ids[i] for i in np.flatnonzero(row)}) == 1
    # a: (0,1),(1,2) ; b: (0,1) ; c: (0)
    assert W.shape[0] == 4 and sorted(row.sum() for row in W) == [1, 2, 2, 2]
    # two nodes whose members sit in different documents never co-occur, whatever the threshold
    members = sp.csr_matrix(np.array([[1, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0]], bool))
    s, d, c = cooc_edges(members, sp.csr_matrix(W), 1)
    assert len(s) == 0


def test_virtual_items_know_their_members(base):
    ix = base.index
    n = ix.n_chunks
    assert (ix.item_kinds[:n] == CHUNK).all()
    assert ix.item_ids[:n] == ix.chunk_ids
    np.testing.assert_allclose(np.linalg.norm(ix.embeddings, axis=1), 1.0, atol=1e-4)
    mem, src = ix.item_members.toarray(), ix.item_sources.toarray()
    for i in np.flatnonzero(np.isin(ix.item_kinds, [JOIN_ITEM, MEET_ITEM])):
        v = ix.item_node[i]
        assert (src[i] <= mem[i]).all() and src[i].any()
        assert (mem[i] == ix.graph.members[v].toarray()[0]).all()
        for c in np.flatnonzero(src[i]):
            assert ix.chunk_texts[c] in ix.item_texts[i]
        if ix.graph.kind[v] == JOIN:   # a bridge quotes one chunk from each side
            a, b = ix.graph.parents[v]
            srcs = set(np.flatnonzero(src[i]))
            assert srcs & set(ix.graph.members[a].indices) and srcs & set(ix.graph.members[b].indices)


def test_item_mask_excludes_foreign_sources(base):
    ix = base.index
    d = ix.chunk_doc_ids[0]
    m = ix.item_mask([d])
    assert m[0] and m[:ix.n_chunks].sum() == sum(x == d for x in ix.chunk_doc_ids)
    for i in np.flatnonzero(m[ix.n_chunks:]) + ix.n_chunks:
        assert {ix.chunk_doc_ids[c] for c in ix.item_sources[i].indices} == {d}
    with pytest.raises(TypeError, match="doc_ids"):
        ix.item_mask(3.5)


def test_context_and_occupancy(base):
    ix = base.index
    I = ix.context.dense()
    L = len(ix.codebooks)
    assert I.shape == (ix.n_chunks, sum(C.shape[0] for C in ix.codebooks))
    # each level's FCM memberships sum to 1 per chunk (Config.fcm_top_k None, fcm_normalize none)
    for lvl in range(L):
        sl = ix.context.attr_group == lvl
        np.testing.assert_allclose(I[:, sl].sum(axis=1), 1.0, atol=1e-4)
        # the RQ code is the cluster of largest membership
        assert (I[:, sl].argmax(axis=1) == ix.codes[:, lvl]).mean() > 0.99
    occ = ix.occupancy()
    assert [o["clusters"] for o in occ] == list(ix.config.rq_sizes)
    assert all(0 < o["occupancy"] <= 1 for o in occ)


def test_sparse_core_meet_cardinality_equals_dense_kernel(base):
    ix = base.index
    I = ix.context.dense()
    memT = ix.context.members().T.tocsr()
    seeds = np.flatnonzero(np.asarray(memT.sum(axis=1)).ravel() >= 2)
    core = I[:, seeds].T * memT[seeds].toarray()
    K, inter = core_meet_cardinality(I, seeds, memT)
    np.testing.assert_allclose(K, ops.meet_cardinality(core, core), rtol=1e-5, atol=1e-6)
    assert (inter == (memT[seeds].toarray().astype(int) @ memT[seeds].toarray().T.astype(int))).all()


def _windows_loop(doc_ids, positions, w):
    """The definition, one document and one window at a time."""
    order = np.lexsort((positions, np.asarray(doc_ids, dtype=object).astype(str)))
    rows, cols, r, start, n = [], [], 0, 0, len(order)
    while start < n:
        end = start
        while end < n and doc_ids[order[end]] == doc_ids[order[start]]:
            end += 1
        idx = order[start:end]
        for s in range(max(1, len(idx) - w + 1)):
            rows += [r] * len(idx[s:s + w])
            cols += idx[s:s + w].tolist()
            r += 1
        start = end
    return rows, cols, r


def test_windows_equal_the_loop_on_odd_shapes():
    rng = np.random.default_rng(3)
    for _ in range(150):
        n, w = int(rng.integers(1, 30)), int(rng.integers(1, 5))
        docs = [f"d{int(x)}" for x in rng.integers(0, max(1, n // 3), n)]
        pos = rng.permutation(n).astype(np.int32)
        rows, cols, r = _windows_loop(docs, pos, w)
        W = windows(docs, pos, w)
        assert W.shape == (r, n)
        assert sorted(zip(*W.nonzero())) == sorted(zip(rows, cols))
