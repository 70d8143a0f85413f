"""k-means family: kmeans_assign, kmeans_fit from a shared start, rq_kmeans; peers FAISS (IndexFlatL2
search, faiss.Kmeans with all points) and a torch GEMM of the distance shape (the floor of any
GEMM-based assignment)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from contextrag import ops

from .harness import backends, clustered, dtypes, on, pick, run, shape_id, synced

ASSIGN_SHAPES = pick([(5000, 384, 32)], [(20000, 384, 96), (100000, 384, 96)])
FIT_SHAPES = pick([(5000, 384, 32)], [(20000, 384, 96), (100000, 384, 96)])
FIT_ITERS = 10
ROUNDS = pick(2, 3)


def _problem(shape, dtype):
    n, d, k = shape
    X = clustered(n, d).astype(dtype)
    C0 = X[np.random.default_rng(1).choice(n, k, replace=False)].copy()
    return X, C0


def _skip_slow_ref(backend, shape, shapes):
    if backend == "ref" and shape != shapes[0]:
        pytest.skip("the float64 reference only at the smallest shape")


@pytest.mark.parametrize("shape", ASSIGN_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("kmeans_assign"))
def test_kmeans_assign(benchmark, backend, dtype, shape):
    _skip_slow_ref(backend, shape, ASSIGN_SHAPES)
    X, C = (on(backend, a) for a in _problem(shape, dtype))
    run(benchmark, synced(backend, lambda: ops.kmeans_assign(X, C, backend=backend)), op="kmeans_assign",
        impl="contextrag", backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", ASSIGN_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("peer", ["faiss", "torch_gemm"])
def test_kmeans_assign_peer(benchmark, peer, dtype, shape):
    X, C = _problem(shape, dtype)
    if peer == "faiss":
        faiss = pytest.importorskip("faiss")
        if dtype != np.float32:
            pytest.skip("faiss takes float32 only")
        index = faiss.IndexFlatL2(X.shape[1])
        index.add(C)
        fn = lambda: index.search(X, 1)   # noqa: E731
    else:
        tX, tC = torch.from_numpy(X), torch.from_numpy(C)
        fn = lambda: tX @ tC.t()          # noqa: E731  the distance GEMM alone, no argmin
    run(benchmark, fn, op="kmeans_assign", impl=peer, backend=None, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", FIT_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("kmeans_assign", heavy=True))
def test_kmeans_fit(benchmark, backend, dtype, shape):
    """Same start, FIT_ITERS Lloyd iterations, tol=0: the loop itself, not the seeding."""
    _skip_slow_ref(backend, shape, FIT_SHAPES)
    X, C0 = (on(backend, a) for a in _problem(shape, dtype))
    fn = lambda: ops.kmeans_fit(X, shape[2], n_iter=FIT_ITERS, tol=0.0, init=C0, backend=backend)  # noqa: E731
    run(benchmark, synced(backend, fn), op="kmeans_fit", impl="contextrag", backend=backend, shape=shape,
        dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", FIT_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
def test_kmeans_fit_faiss(benchmark, dtype, shape):
    faiss = pytest.importorskip("faiss")
    if dtype != np.float32:
        pytest.skip("faiss takes float32 only")
    X, C0 = _problem(shape, dtype)
    n, d, k = shape

    def fit():   # all points (FAISS would subsample above 256 per centre), then labels for every row
        km = faiss.Kmeans(d, k, niter=FIT_ITERS, max_points_per_centroid=n, seed=1, verbose=False)
        km.train(X, init_centroids=C0)
        return km.index.search(X, 1)
    run(benchmark, fit, op="kmeans_fit", impl="faiss", backend=None, shape=shape, dtype=dtype, rounds=ROUNDS)


RQ_SHAPE = pick((2000, 384, 16), (20000, 384, 96))


@pytest.mark.parametrize("backend", backends("kmeans_assign", heavy=True))
def test_rq_kmeans(benchmark, backend):
    """rq_kmeans's default call (k-means++ seeding, levels k, k/4, k/8), float32."""
    n, d, k = RQ_SHAPE
    X = on(backend, clustered(n, d))
    sizes = (k, k // 4, k // 8)
    run(benchmark, synced(backend, lambda: ops.rq_kmeans(X, sizes, backend=backend)), op="rq_kmeans",
        impl="contextrag", backend=backend, shape=RQ_SHAPE, dtype=np.float32, rounds=ROUNDS)


def test_rq_kmeans_faiss(benchmark):
    """The same three levels with faiss.Kmeans (its defaults) on the residuals, each level assigned."""
    faiss = pytest.importorskip("faiss")
    n, d, k = RQ_SHAPE
    X = clustered(n, d)

    def rq():
        R = X.copy()
        for kk in (k, k // 4, k // 8):
            km = faiss.Kmeans(d, kk, seed=3, verbose=False)
            km.train(R)
            _, I = km.index.search(R, 1)
            R -= km.centroids[I[:, 0]]
        return R
    run(benchmark, rq, op="rq_kmeans", impl="faiss", backend=None, shape=RQ_SHAPE, dtype=np.float32,
        rounds=ROUNDS)
