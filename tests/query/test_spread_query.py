"""Łukasiewicz spreading: the math against a hand-checked case and the ops kernels."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from contextrag.ops import fuzzy_route
from contextrag.query.spread import (hop, pick_seeds, relevance, seed_activation, seed_relevance,
                                     spread_scores)

# 4 chunks × 3 attributes. a0 links chunk 0 to chunk 2 (a rare entity), a1 is common, a2 only chunk 3.
I = np.array([[1.0, 0.3, 0.0],
              [0.0, 0.3, 0.0],
              [0.8, 0.3, 0.0],
              [0.0, 0.0, 0.9]], dtype=np.float32)


def test_hand_checked_two_steps():
    r = np.array([1.0, 0.6, 0.2, 0.1], np.float32)
    act = seed_activation(r, [0, 1], sp.csr_matrix(I))
    # act(a) = max_s r(s) ⊗ I(s, a): a0: max(1+1-1, 0.6+0-1 → 0) = 1; a1: max(1+.3-1, .6+.3-1 → 0) = 0.3; a2: 0
    assert act == pytest.approx([1.0, 0.3, 0.0])
    g = hop(act, sp.csr_matrix(I).T.tocsr())
    # hop(c) = max_a act(a) ⊗ I(c, a): c0: 1+1-1 = 1; c1: .3+.3-1 → 0; c2: max(1+.8-1, .3+.3-1) = 0.8; c3: 0
    assert g == pytest.approx([1.0, 0.0, 0.8, 0.0])


def test_query_mentions_join_the_activation():
    r = np.zeros(4, np.float32)
    mu = np.array([0.0, 0.0, 0.95], np.float32)
    act = seed_activation(r, [], sp.csr_matrix(I), mu)
    assert act == pytest.approx(mu)
    g = hop(act, sp.csr_matrix(I).T.tocsr())
    assert g == pytest.approx([0, 0, 0, 0.85])       # 0.95 ⊗ 0.9


def test_equals_two_fuzzy_route_calls():
    rng = np.random.default_rng(0)
    M = np.where(rng.random((37, 11)) < 0.3, rng.random((37, 11)), 0).astype(np.float32)
    r = rng.random(37).astype(np.float32)
    seeds = np.array([3, 8, 20])
    rs = np.zeros_like(r)
    rs[seeds] = r[seeds]
    act = seed_activation(r, seeds, sp.csr_matrix(M))
    ref_act = np.asarray(fuzzy_route(rs[None, :], np.ascontiguousarray(M.T)))[0]   # chunks -> attributes
    assert act == pytest.approx(ref_act, abs=1e-6)
    g = hop(act, sp.csr_matrix(M).T.tocsr())
    ref_g = np.asarray(fuzzy_route(act[None, :], M))[0]                            # attributes -> chunks
    assert g == pytest.approx(ref_g, abs=1e-6)


def test_bounded_sum_aggregation():
    g = hop(np.array([1.0, 0.9, 0.0], np.float32), sp.csr_matrix(I).T.tocsr(), agg="sum")
    # c0: (1+1-1) + (0.9+0.3-1) = 1.2 -> 1; c2: 0.8 + 0.2 = 1.0; c1: 0.2
    assert g == pytest.approx([1.0, 0.2, 1.0, 0.0])
    with pytest.raises(ValueError):
        hop(np.ones(3, np.float32), sp.csr_matrix(I).T.tocsr(), agg="mean")


def test_seeds_relevance_and_scores():
    h = np.array([0.8, 0.6, 0.5, 0.4], np.float32)
    assert relevance(h) == pytest.approx(h / 0.8)
    sr = seed_relevance(h, candidates=3)        # min-max over the top 4 (3 + the boundary)
    assert sr == pytest.approx([1.0, 0.5, 0.25, 0.0])
    assert list(pick_seeds(h, 2)) == [0, 1]
    assert list(pick_seeds(h, 2, doc=np.array([7, 7, 9, 9]))) == [0, 2]
    s, g = spread_scores(h, sp.csr_matrix(I), n_seeds=1, lam=1.0, candidates=3)
    # seed 0 (degree 1) reaches chunk 2 through a0 (0.8) and everything through a1 (1+.3+.3-2 < 0)
    assert g == pytest.approx([1.0, 0.0, 0.8, 0.0])
    assert s == pytest.approx(h / 0.8 + g)
    s0, g0 = spread_scores(h, sp.csr_matrix(I), lam=0.0)
    assert not g0.any() and s0 == pytest.approx(h / 0.8)


def test_rejects_degrees_outside_unit_interval():
    with pytest.raises(ValueError):
        seed_activation(np.ones(2, np.float32), [0], np.array([[1.5], [0.0]], np.float32))


def test_no_hop_to_the_seeds_sibling_chunks():
    # chunks 0 and 1 belong to one document; chunk 2 to another; all share attribute a0
    M = sp.csr_matrix(np.array([[1.0], [1.0], [1.0]], np.float32))
    h = np.array([0.9, 0.5, 0.4], np.float32)
    s, g = spread_scores(h, M, n_seeds=1, lam=1.0, candidates=2, doc=np.array([0, 0, 1]))
    assert g[0] > 0 and g[1] == 0 and g[2] > 0
    _, g_nodoc = spread_scores(h, M, n_seeds=1, lam=1.0, candidates=2)
    assert g_nodoc[1] > 0


def test_per_seed_hop_equals_joint_hop_for_one_chunk_documents():
    from contextrag.query.spread import hop_from_seeds
    rng = np.random.default_rng(1)
    M = sp.csr_matrix(np.where(rng.random((40, 9)) < 0.3, rng.random((40, 9)), 0).astype(np.float32))
    rho = rng.random(40).astype(np.float32)
    mu = np.where(rng.random(9) < 0.3, rng.random(9), 0).astype(np.float32)
    seeds = np.array([1, 5, 7])
    joint = hop(seed_activation(rho, seeds, M, mu), M.T.tocsr())
    per_seed = hop_from_seeds(rho, seeds, M, M.T.tocsr(), mu=mu, doc=np.arange(40))
    assert per_seed == pytest.approx(joint)
