"""Lattice ops: meet_cardinality |A_i ∧ B_j| = Σ_g min(A_i(g), B_j(g)) against blocked NumPy
broadcasting and a torch GEMM of the same shape."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bench_cpu_semiring import numpy_meet
from conftest import backends, dtypes, on, pick, run, shape_id, synced

from contextrag import ops

# (rows of A, objects, rows of B)
SHAPES = pick([(32, 20000, 32)], [(32, 20000, 132), (132, 100000, 132)])
ROUNDS = pick(3, 5)


def _operands(shape, dtype):
    p, g, q = shape
    rng = np.random.default_rng(1)
    return rng.random((p, g), dtype=dtype), rng.random((q, g), dtype=dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", backends("meet_cardinality"))
def test_meet_cardinality(benchmark, backend, dtype, shape):
    if backend == "ref" and shape != SHAPES[0]:
        pytest.skip("the float64 reference only at the smallest shape")
    A, B = (on(backend, a) for a in _operands(shape, dtype))
    run(benchmark, synced(backend, lambda: ops.meet_cardinality(A, B, backend=backend)), op="meet_cardinality",
        impl="contextrag", backend=backend, shape=shape, dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("peer", ["numpy", "torch_gemm"])
def test_meet_cardinality_peer(benchmark, peer, dtype, shape):
    A, B = _operands(shape, dtype)
    if peer == "numpy":
        if shape != SHAPES[0]:
            pytest.skip("NumPy broadcasting only at the smallest shape (tens of seconds at this one)")
        fn = lambda: numpy_meet(A, B)        # noqa: E731
    else:
        tA, tB = torch.from_numpy(A), torch.from_numpy(B)
        fn = lambda: tA @ tB.t()             # noqa: E731
    run(benchmark, fn, op="meet_cardinality", impl=peer, backend=None, shape=shape, dtype=dtype,
        rounds=1 if peer == "numpy" else ROUNDS)
