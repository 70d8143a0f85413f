"""The semiring family, dense: luk_up (A↑, eq. 6), luk_down (B↓, eq. 7), fuzzy_route (eq. 16) and
meet_cardinality (Σ_g min), each against blocked NumPy broadcasting (the direct way to write it) and
a torch GEMM of the same shape (what an ordinary matrix product of these operands costs here)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from contextrag import ops

from .harness import backends, dtypes, on, pick, run, shape_id, synced
from .peers import numpy_luk_up, numpy_meet, numpy_route

# (sets, chunks, attributes): a batch of concept extents against the chunk × attribute incidence
SHAPES = pick([(32, 20000, 32)], [(32, 20000, 132), (132, 100000, 132)])
# (rows of A, objects, rows of B): extents against extents
MEET_SHAPES = pick([(32, 20000, 32)], [(32, 20000, 132), (132, 100000, 132)])
# (queries, nodes, chunks): query memberships routed to chunks
ROUTE_SHAPES = pick([(16, 132, 20000)], [(16, 132, 20000), (64, 132, 100000)])
ROUNDS = pick(3, 5)


def _operands(shape, dtype):
    s, g, m = shape
    rng = np.random.default_rng(0)
    return rng.random((s, g), dtype=dtype), rng.random((g, m), dtype=dtype), rng.random((s, m), dtype=dtype)


def _skip_slow(who, shape, shapes=SHAPES):
    if who in ("ref", "numpy") and shape != shapes[0]:
        pytest.skip(f"{who} only at the smallest shape (tens of seconds at this one)")


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("luk_up"))
def test_luk_up(benchmark, backend, dtype, shape):
    _skip_slow(backend, shape)
    A, I, _ = (on(backend, a) for a in _operands(shape, dtype))
    run(benchmark, synced(backend, lambda: ops.luk_up(A, I, backend=backend)), op="luk_up", impl="contextrag",
        backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("luk_down"))
def test_luk_down(benchmark, backend, dtype, shape):
    _skip_slow(backend, shape)
    _, I, B = (on(backend, a) for a in _operands(shape, dtype))
    run(benchmark, synced(backend, lambda: ops.luk_down(B, I, backend=backend)), op="luk_down",
        impl="contextrag", backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("peer", ["numpy", "torch_gemm"])
def test_luk_up_peer(benchmark, peer, dtype, shape):
    _skip_slow(peer, shape)
    A, I, _ = _operands(shape, dtype)
    if peer == "numpy":
        fn = lambda: numpy_luk_up(A, I)       # noqa: E731
    else:
        tA, tI = torch.from_numpy(A), torch.from_numpy(I)
        fn = lambda: tA @ tI                  # noqa: E731
    run(benchmark, fn, op="luk_up", impl=peer, backend=None, shape=shape, dtype=dtype,
        rounds=1 if peer == "numpy" else ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("peer", ["numpy", "torch_gemm"])
def test_luk_down_peer(benchmark, peer, dtype, shape):
    _skip_slow(peer, shape)
    _, I, B = _operands(shape, dtype)
    if peer == "numpy":   # B↓(g) = min(1, 1 + min_m (I[g,m] − B[s,m])): the same broadcast on Iᵀ
        It = np.ascontiguousarray(I.T)
        fn = lambda: numpy_luk_up(B, It)      # noqa: E731
    else:
        tB, tI = torch.from_numpy(B), torch.from_numpy(I)
        fn = lambda: tB @ tI.t()              # noqa: E731
    run(benchmark, fn, op="luk_down", impl=peer, backend=None, shape=shape, dtype=dtype,
        rounds=1 if peer == "numpy" else ROUNDS)


def _meet_operands(shape, dtype):
    p, g, q = shape
    rng = np.random.default_rng(1)
    return rng.random((p, g), dtype=dtype), rng.random((q, g), dtype=dtype)


@pytest.mark.parametrize("shape", MEET_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("meet_cardinality"))
def test_meet_cardinality(benchmark, backend, dtype, shape):
    _skip_slow(backend, shape, MEET_SHAPES)
    A, B = (on(backend, a) for a in _meet_operands(shape, dtype))
    run(benchmark, synced(backend, lambda: ops.meet_cardinality(A, B, backend=backend)), op="meet_cardinality",
        impl="contextrag", backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", MEET_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("peer", ["numpy", "torch_gemm"])
def test_meet_cardinality_peer(benchmark, peer, dtype, shape):
    _skip_slow(peer, shape, MEET_SHAPES)
    A, B = _meet_operands(shape, dtype)
    if peer == "numpy":
        fn = lambda: numpy_meet(A, B)        # noqa: E731
    else:
        tA, tB = torch.from_numpy(A), torch.from_numpy(B)
        fn = lambda: tA @ tB.t()             # noqa: E731
    run(benchmark, fn, op="meet_cardinality", impl=peer, backend=None, shape=shape, dtype=dtype,
        rounds=1 if peer == "numpy" else ROUNDS)


def _route_operands(shape, dtype):
    q, v, c = shape
    rng = np.random.default_rng(2)
    return rng.random((q, v), dtype=dtype), rng.random((c, v), dtype=dtype)


@pytest.mark.parametrize("shape", ROUTE_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("fuzzy_route"))
def test_fuzzy_route(benchmark, backend, dtype, shape):
    if backend == "ref" and shape != ROUTE_SHAPES[0]:
        pytest.skip("the float64 reference only at the smallest shape")
    mu, I = (on(backend, a) for a in _route_operands(shape, dtype))
    run(benchmark, synced(backend, lambda: ops.fuzzy_route(mu, I, backend=backend)), op="fuzzy_route",
        impl="contextrag", backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", ROUTE_SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("peer", ["numpy", "torch_gemm"])
def test_fuzzy_route_peer(benchmark, peer, dtype, shape):
    mu, I = _route_operands(shape, dtype)
    if peer == "numpy":
        fn = lambda: numpy_route(mu, I)      # noqa: E731
    else:
        tm, tI = torch.from_numpy(mu), torch.from_numpy(I)
        fn = lambda: tm @ tI.t()             # noqa: E731
    run(benchmark, fn, op="fuzzy_route", impl=peer, backend=None, shape=shape, dtype=dtype, rounds=ROUNDS)
