"""The lattice family: elementwise Łukasiewicz logic (tnorm, residuum; eq. 4-5) and the soft lattice
operations on fuzzy extents (soft_join, soft_meet; eq. 8-9), on concept extents over chunks. Ours
(NumPy input, as the query path calls them: input checks included; on a GPU, CUDA tensors) against
the bare NumPy and torch expressions, which check nothing."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from contextrag import ops
from contextrag.ref import lattice as ref_lattice

from .harness import GPU_BACKENDS, dtypes, on, pick, run, shape_id, synced

# (extents, chunks)
SHAPES = pick([(132, 20000)], [(132, 20000), (132, 200000)])
ROUNDS = pick(3, 5)
OPS = ("tnorm", "residuum", "soft_join", "soft_meet")
BARE_NUMPY = {"tnorm": lambda a, b: np.maximum(0.0, a + b - 1.0), "residuum": lambda a, b: np.minimum(1.0, 1.0 - a + b),
              "soft_join": np.maximum, "soft_meet": np.minimum}
BARE_TORCH = {"tnorm": lambda a, b: torch.clamp_min(a + b - 1.0, 0.0), "residuum": lambda a, b: torch.clamp_max(1.0 - a + b, 1.0),
              "soft_join": torch.maximum, "soft_meet": torch.minimum}


def _backends() -> list:
    """The elementwise ops have no backend table: "cpu" is NumPy input, "ref" the float64
    reference, "cuda" CUDA tensors (torch's own kernels)."""
    only = os.environ.get("CONTEXTRAG_BENCH_BACKEND") or None
    out = []
    for b in ("cpu", "ref", "cuda"):
        if only is not None and b != only:
            continue
        gpu_missing = b in GPU_BACKENDS and not torch.cuda.is_available()
        out.append(pytest.param(b, marks=pytest.mark.skipif(gpu_missing, reason=f"{b}: no CUDA device")))
    return out


def _operands(shape, dtype):
    rng = np.random.default_rng(4)
    return rng.random(shape, dtype=dtype), rng.random(shape, dtype=dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("op", OPS)
def test_lattice(benchmark, op, backend, dtype, shape):
    a, b = (on(backend, x) for x in _operands(shape, dtype))
    fn = getattr(ref_lattice if backend == "ref" else ops, op)
    run(benchmark, synced(backend, lambda: fn(a, b)), op=op, impl="contextrag", backend=backend, shape=shape,
        dtype=dtype, rounds=ROUNDS)


@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
@pytest.mark.parametrize("dtype", dtypes(), ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("peer", ["numpy", "torch"])
@pytest.mark.parametrize("op", OPS)
def test_lattice_peer(benchmark, op, peer, dtype, shape):
    a, b = _operands(shape, dtype)
    if peer == "numpy":
        bare = BARE_NUMPY[op]
    else:
        bare, a, b = BARE_TORCH[op], torch.from_numpy(a), torch.from_numpy(b)
    run(benchmark, lambda: bare(a, b), op=op, impl=peer, backend=None, shape=shape, dtype=dtype, rounds=ROUNDS)
