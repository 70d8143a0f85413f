"""Fuzzy c-means: fcm_memberships and fcm_fit (same start, fixed iterations, tol=0) against
skfuzzy.cmeans (float64, the same start and iteration count) and a torch GEMM of the distance shape."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from contextrag import ops

from .harness import backends, clustered, dtypes, on, pick, run, shape_id, synced

SHAPES = pick([(2000, 384, 16)], [(5000, 384, 32), (20000, 384, 96)])
ITERS = pick(10, 20)
ROUNDS = pick(2, 3)
M = 2.0


def _problem(shape, dtype):
    n, d, c = shape
    X = clustered(n, d, seed=5, noise=0.15, components=48).astype(dtype)   # as bench_cpu_fcm.py
    C0 = X[np.random.default_rng(2).choice(n, c, replace=False)].copy()
    return X, C0


def _skip_slow_ref(backend, shape):
    if backend == "ref" and shape != SHAPES[0]:
        pytest.skip("the float64 reference only at the smallest shape")


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("fcm_memberships"))
def test_fcm_memberships(benchmark, backend, dtype, shape):
    _skip_slow_ref(backend, shape)
    X, C = (on(backend, a) for a in _problem(shape, dtype))
    run(benchmark, synced(backend, lambda: ops.fcm_memberships(X, C, M, backend=backend)), op="fcm_memberships",
        impl="contextrag", backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
def test_fcm_memberships_torch_gemm(benchmark, dtype, shape):
    X, C = (torch.from_numpy(a) for a in _problem(shape, dtype))
    run(benchmark, lambda: X @ C.t(), op="fcm_memberships", impl="torch_gemm", backend=None, shape=shape,
        dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("fcm_memberships", heavy=True))
def test_fcm_fit(benchmark, backend, dtype, shape):
    _skip_slow_ref(backend, shape)
    X, C0 = (on(backend, a) for a in _problem(shape, dtype))
    fn = lambda: ops.fcm_fit(X, shape[2], M, n_iter=ITERS, tol=0.0, init=C0, backend=backend)  # noqa: E731
    run(benchmark, synced(backend, fn), op="fcm_fit", impl="contextrag", backend=backend, shape=shape,
        dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
def test_fcm_fit_skfuzzy(benchmark, dtype, shape):
    """skfuzzy computes in float64 whatever it is given: the same figure sits in both dtype groups."""
    skfuzzy = pytest.importorskip("skfuzzy")
    X, C0 = _problem(shape, dtype)
    X64 = X.astype(np.float64)
    U0 = ops.fcm_memberships(X64, C0.astype(np.float64), M).T.copy()
    fn = lambda: skfuzzy.cmeans(X64.T, shape[2], M, error=0.0, maxiter=ITERS, init=U0.copy())  # noqa: E731
    run(benchmark, fn, op="fcm_fit", impl="skfuzzy", backend=None, shape=shape, dtype=dtype,
        rounds=1 if shape[0] >= 20000 else ROUNDS, warmup=0)
