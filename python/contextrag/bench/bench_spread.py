"""Spreading activation: one batched hop (ops.spread_hop) over a random chunk × attribute incidence
against the per-query NumPy gather (seed rows, then the activated attributes' columns) that the
query path used before, on the same prepared incidence."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from contextrag import ops
from contextrag.ops.spread import gather_py

from .harness import backends, dtypes, pick, run, shape_id, synced

# (chunks, attributes, queries): 20 attributes per chunk, 5 seeds and 10 mentions per query
SHAPES = pick([(20000, 5000, 16)], [(20000, 5000, 64), (200000, 50000, 64)])
ROUNDS = pick(3, 5)


def _problem(shape, dtype):
    n, m, q = shape
    rng = np.random.default_rng(3)
    per = 20
    rows = np.repeat(np.arange(n), per)
    G = ops.SpreadIncidence(_degrees(rng, rows, rng.integers(0, m, n * per), (n, m), dtype), doc=np.arange(n) // 5)
    seeds = rng.integers(0, n, (q, 5))
    deg = rng.uniform(0.5, 1.0, (q, 5)).astype(dtype)
    mu = _degrees(rng, np.repeat(np.arange(q), 10), rng.integers(0, m, q * 10), (q, m), dtype)
    return G, seeds, deg, mu


def _degrees(rng, rows, cols, shape, dtype):
    """A sparse matrix of degrees in [0, 1) at (rows, cols), repeated positions merged."""
    a = sp.csr_matrix((np.ones(len(rows), dtype), (rows, cols)), shape=shape)
    a.sum_duplicates()
    a.data = rng.random(a.nnz).astype(dtype)
    return a


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("spread_hop"))
def test_spread_hop(benchmark, backend, dtype, shape):
    if backend == "ref":
        pytest.skip("the float64 reference is dense, written for clarity (minutes at these shapes)")
    G, seeds, deg, mu = _problem(shape, dtype)
    if backend in ("triton", "cuda"):
        seeds, deg = torch.as_tensor(seeds).cuda(), torch.as_tensor(deg).cuda()
    run(benchmark, synced(backend, lambda: ops.spread_hop(G, seeds, deg, mu, backend=backend)), op="spread_hop",
        impl="contextrag", backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
def test_spread_hop_numpy_gather(benchmark, dtype, shape):
    G, seeds, deg, mu = _problem(shape, dtype)
    s, d = torch.as_tensor(seeds), torch.as_tensor(deg)
    m = sp.csr_matrix(mu)
    run(benchmark, lambda: gather_py(G, s, d, m), op="spread_hop", impl="numpy_gather", backend=None,
        shape=shape, dtype=dtype, rounds=1 if shape != SHAPES[0] else ROUNDS)
