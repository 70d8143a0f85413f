"""Łukasiewicz semiring products: luk_up (A↑, eq. 6) and luk_down (B↓, eq. 7), dense, against
blocked NumPy broadcasting (the direct way to write them) and a torch GEMM of the same shape (what
an ordinary matrix product of these operands costs on this machine)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bench_cpu_semiring import numpy_luk_up
from conftest import backends, dtypes, on, pick, run, shape_id, synced

from contextrag import ops

# (sets, chunks, attributes): a batch of concept extents against the chunk × attribute incidence
SHAPES = pick([(32, 20000, 32)], [(32, 20000, 132), (132, 100000, 132)])
ROUNDS = pick(3, 5)


def _operands(shape, dtype):
    s, g, m = shape
    rng = np.random.default_rng(0)
    return rng.random((s, g), dtype=dtype), rng.random((g, m), dtype=dtype), rng.random((s, m), dtype=dtype)


def _skip_slow(who, shape):
    if who in ("ref", "numpy") and shape != SHAPES[0]:
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
