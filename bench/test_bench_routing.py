"""Fuzzy routing (eq. 16): fuzzy_route(μ, I) = max_v max(0, μ(q,v) + I(c,v) − 1), dense, against
blocked NumPy broadcasting and a torch GEMM of the same shape."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import backends, dtypes, on, pick, run, shape_id, synced

from contextrag import ops

# (queries, nodes, chunks)
SHAPES = pick([(16, 132, 20000)], [(16, 132, 20000), (64, 132, 100000)])
ROUNDS = pick(3, 5)


def numpy_route(mu, I, cblock=2048):
    out = np.empty((mu.shape[0], I.shape[0]), dtype=mu.dtype)
    for c in range(0, I.shape[0], cblock):
        out[:, c:c + cblock] = (mu[:, None, :] + I[None, c:c + cblock, :]).max(axis=2)
    return np.maximum(0.0, out - 1.0)


def _operands(shape, dtype):
    q, v, c = shape
    rng = np.random.default_rng(2)
    return rng.random((q, v), dtype=dtype), rng.random((c, v), dtype=dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("fuzzy_route"))
def test_fuzzy_route(benchmark, backend, dtype, shape):
    if backend == "ref" and shape != SHAPES[0]:
        pytest.skip("the float64 reference only at the smallest shape")
    mu, I = (on(backend, a) for a in _operands(shape, dtype))
    run(benchmark, synced(backend, lambda: ops.fuzzy_route(mu, I, backend=backend)), op="fuzzy_route",
        impl="contextrag", backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("peer", ["numpy", "torch_gemm"])
def test_fuzzy_route_peer(benchmark, peer, dtype, shape):
    mu, I = _operands(shape, dtype)
    if peer == "numpy":
        fn = lambda: numpy_route(mu, I)      # noqa: E731
    else:
        tm, tI = torch.from_numpy(mu), torch.from_numpy(I)
        fn = lambda: tm @ tI.t()             # noqa: E731
    run(benchmark, fn, op="fuzzy_route", impl=peer, backend=None, shape=shape, dtype=dtype, rounds=ROUNDS)
