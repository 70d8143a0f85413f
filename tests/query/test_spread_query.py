"""Łukasiewicz spreading: the hop (ops.spread_hop, float64 definition ref.spread_hop) against
hand-checked cases, and the query path's seed rules (query/spread.py)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from contextrag import ops, ref
from contextrag.ops import fuzzy_route
from contextrag.query.spread import pick_seeds, relevance, seed_relevance

# 4 chunks × 3 attributes. a0 links chunk 0 to chunk 2 (a rare entity), a1 is common, a2 only chunk 3.
I = np.array([[1.0, 0.3, 0.0],
              [0.0, 0.3, 0.0],
              [0.8, 0.3, 0.0],
              [0.0, 0.0, 0.9]], dtype=np.float32)


def _hops(M, seeds, degs, mu=None, doc=None):
    """The hop of one query by the op on the CPU and by the float64 reference, checked equal."""
    seeds = np.asarray([seeds], np.int64).reshape(1, -1)
    degs = np.asarray([degs], np.float32).reshape(1, -1)
    mu = None if mu is None else np.asarray(mu, np.float32)[None, :]
    got = ops.spread_hop(ops.SpreadIncidence(sp.csr_matrix(M), doc), seeds, degs, mu, backend="cpu")[0]
    want = ref.spread_hop(np.asarray(M.todense() if sp.issparse(M) else M), seeds, degs, mu, doc)[0]
    np.testing.assert_allclose(got, want, atol=1e-6)
    return got


def test_hand_checked_two_steps():
    # seeds 0 (degree 1) and 1 (0.6): act(a) = max_s ρ(s) ⊗ I(s, a) = [1, 0.3, 0] (seed 1 activates nothing);
    # hop(c) = max_a act(a) ⊗ I(c, a): c0: 1+1-1 = 1; c1: .3+.3-1 → 0; c2: max(1+.8-1, .3+.3-1) = 0.8; c3: 0
    assert _hops(I, [0, 1], [1.0, 0.6]) == pytest.approx([1.0, 0.0, 0.8, 0.0])


def test_query_mentions_join_the_activation():
    g = _hops(I, [-1], [0.0], mu=[0.0, 0.0, 0.95])
    assert g == pytest.approx([0, 0, 0, 0.85])       # 0.95 ⊗ 0.9


def test_equals_two_fuzzy_route_calls():
    rng = np.random.default_rng(0)
    M = np.where(rng.random((37, 11)) < 0.3, rng.random((37, 11)), 0).astype(np.float32)
    r = rng.random(37).astype(np.float32)
    seeds = np.array([3, 8, 20])
    rs = np.zeros_like(r)
    rs[seeds] = r[seeds]
    act = np.asarray(fuzzy_route(rs[None, :], np.ascontiguousarray(M.T)))[0]   # chunks -> attributes
    want = np.asarray(fuzzy_route(act[None, :], M))[0]                          # attributes -> chunks
    assert _hops(M, seeds, r[seeds]) == pytest.approx(want, abs=1e-6)


def test_seeds_relevance_and_the_hop_they_start():
    h = np.array([0.8, 0.6, 0.5, 0.4], np.float32)
    assert relevance(h) == pytest.approx(h / 0.8)
    sr = seed_relevance(h, candidates=3)        # min-max over the top 4 (3 + the boundary)
    assert sr == pytest.approx([1.0, 0.5, 0.25, 0.0])
    assert list(pick_seeds(h, 2)) == [0, 1]
    assert list(pick_seeds(h, 2, doc=np.array([7, 7, 9, 9]))) == [0, 2]
    seeds = pick_seeds(h, 1)
    # seed 0 (degree 1) reaches chunk 2 through a0 (0.8) and nothing through a1 (1+.3+.3-2 < 0)
    assert _hops(I, seeds, sr[seeds]) == pytest.approx([1.0, 0.0, 0.8, 0.0])
    assert relevance(np.zeros(3, np.float32)) == pytest.approx([0, 0, 0])


def test_rejects_degrees_outside_unit_interval():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ops.SpreadIncidence(np.array([[1.5], [0.0]], np.float32))


def test_no_hop_to_the_seeds_sibling_chunks():
    # chunks 0 and 1 belong to one document; chunk 2 to another; all share attribute a0
    M = np.array([[1.0], [1.0], [1.0]], np.float32)
    g = _hops(M, [0], [0.9], doc=np.array([0, 0, 1]))
    assert g[0] > 0 and g[1] == 0 and g[2] > 0
    assert _hops(M, [0], [0.9])[1] > 0
