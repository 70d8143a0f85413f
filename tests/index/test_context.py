"""The fuzzy context: RQ mapping, and the attribute-family registry other families plug into."""
import re

import numpy as np
import pytest
import scipy.sparse as sp

from contextrag import Config, ContextRAG, ops
from contextrag.index import context as ctxmod
from contextrag.index.context import FAMILIES, FamilyResult, register_family
from contextrag.index.graph import MEET, SEED


def test_rq_mapping_blocked_equals_direct(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 12)).astype(np.float32)
    books = [rng.standard_normal((7, 12)).astype(np.float32), rng.standard_normal((3, 12)).astype(np.float32)]
    monkeypatch.setattr(ctxmod, "RQ_ROW_BLOCK", 61)
    codes, blocks, resid = ctxmod._rq_memberships(X, books, Config())
    R = X.copy()
    for lvl, C in enumerate(books):
        np.testing.assert_allclose(blocks[lvl], ops.fcm_memberships(R, C, m=2.0), rtol=1e-5, atol=1e-7)
        lab = ((R[:, None, :] - C[None]) ** 2).sum(-1).argmin(1)
        np.testing.assert_array_equal(codes[:, lvl], lab)
        R -= C[lab]
    np.testing.assert_allclose(resid, (R * R).sum(1), rtol=1e-4)


_CAP = re.compile(r"\b[A-Z][a-z]{3,}\b")


def caps_family(chunks, embeddings, config):
    """Capitalised words held by at least two chunks, degree 1 (a toy lexical family)."""
    sets = [set(_CAP.findall(t)) for t in chunks.texts]
    df = {}
    for s in sets:
        for w in s:
            df[w] = df.get(w, 0) + 1
    names = sorted(w for w, c in df.items() if c >= 2)
    col = {w: j for j, w in enumerate(names)}
    rows = [(i, col[w]) for i, s in enumerate(sets) for w in s if w in col]
    r, c = (np.array(x, dtype=np.int64) for x in zip(*rows)) if rows else (np.zeros(0, int), np.zeros(0, int))
    M = sp.csr_matrix((np.ones(len(r), np.float32), (r, c)), shape=(len(sets), len(names)))
    return M, names


@pytest.fixture
def caps_registered():
    register_family("caps", caps_family)
    yield
    FAMILIES.pop("caps", None)


def test_custom_family_joins_the_context(caps_registered, hotpot_paragraphs, embedder):
    cfg = Config(rq_sizes=(6, 2), n_join=6, n_meet=12, n_summaries=0, family_weights={"caps": 0.5, "rq": 1.0})
    rag = ContextRAG.build(hotpot_paragraphs[:50], config=cfg, embedder=embedder)
    ix = rag.index
    ctx = ix.context
    assert ctx.family_names == ["caps", "rq"]   # caps first: its growth on add shifts rq
    caps = ctx.block("caps")
    assert sp.issparse(caps.matrix), "a sparse family is stored as CSR"
    assert caps.matrix.max() == pytest.approx(0.5), "weight 0.5 scales degree 1 to 0.5"
    sl = ctx.family_slice("caps")
    assert all(n.startswith("caps:") for n in ctx.attr_names[sl])
    # caps attributes become seeds, and meets cross families (groups differ)
    g = ix.graph
    fam = ctx.attr_family
    seed_fams = set(fam[g.attr[g.kind == SEED]].tolist())
    assert seed_fams == {0, 1}
    seed_attr_names = [ctx.attr_names[a] for a in g.attr[g.kind == SEED]]
    closed, _ = ops.luk_closure(ix.node_extents()[g.kind == SEED], ctx.dense())
    np.testing.assert_allclose(closed, ix.node_extents()[g.kind == SEED], atol=1e-5)
    assert (g.kind == MEET).any()
    # add(): a family without transform is refitted and reconciled by name
    old_names = list(caps.names)
    old_cols = caps.matrix.toarray().copy()
    rag.add(hotpot_paragraphs[50:56])     # an update swaps in a new index; the old one is left as it was
    assert len(ctx.block("caps").names) == len(old_names)
    ix = rag.index
    ctx, g = ix.context, ix.graph
    caps = ctx.block("caps")
    assert caps.names[:len(old_names)] == old_names
    assert len(caps.names) > len(old_names), "the new documents bring new capitalised words"
    # seeds still name the same attributes although the rq columns moved
    assert [ctx.attr_names[a] for a in g.attr[g.kind == SEED]] == seed_attr_names
    assert caps.matrix.shape == (ix.n_chunks, len(caps.names))
    # old chunks keep their degrees on the surviving columns (df >= 2 can only grow)
    np.testing.assert_allclose(caps.matrix.toarray()[:len(old_cols), :len(old_names)], old_cols)
    np.testing.assert_allclose(ix.graph.intent, ops.luk_up(ix.node_extents(), ctx.dense()), atol=1e-5)


def test_family_validation(hotpot_paragraphs, embedder):
    def bad_range(chunks, E, config):
        return np.full((len(chunks), 2), 1.5, np.float32), ["a", "b"]

    def bad_rows(chunks, E, config):
        return np.zeros((1, 2), np.float32), ["a", "b"]

    def bad_names(chunks, E, config):
        return FamilyResult(np.zeros((len(chunks), 2), np.float32), ["a"])
    docs = hotpot_paragraphs[:20]
    try:
        for fn, msg in ((bad_range, r"\[0, 1\]"), (bad_rows, "rows"), (bad_names, "names")):
            register_family("bad", fn)
            with pytest.raises(ValueError, match=msg):
                ContextRAG.build(docs, config=Config(rq_sizes=(4,), family_weights={"rq": 1.0, "bad": 1.0}),
                                 embedder=embedder)
    finally:
        FAMILIES.pop("bad", None)
    with pytest.raises(ValueError, match="name"):
        register_family("has:colon", bad_rows)
    with pytest.raises(TypeError, match="fit"):
        register_family("x", 3)
