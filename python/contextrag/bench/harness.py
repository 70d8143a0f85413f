"""What every suite shares: the parametrisation by backend, shape and dtype, operands on the
backend's device, and the timed run that labels each entry for the ratio table.

Every entry carries ``extra_info`` = {"op", "impl", "backend", "shape", "dtype"}: impl "contextrag"
for ours, the peer's name otherwise. ``--bench-quick`` and ``--bench-backend`` (``plugin.py``) reach
the suites through the environment, read at import (their parametrisation depends on them).
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest
import torch

GPU_BACKENDS = ("triton", "cuda")
ALL_BACKENDS = ("cpu", "ref", "triton", "cuda")


def quick() -> bool:
    return os.environ.get("CONTEXTRAG_BENCH_QUICK") == "1"


def pick(quick_value, full_value):
    return quick_value if quick() else full_value


def dtypes() -> list:
    return [np.float32] if quick() else [np.float32, np.float64]


def backends(op: str, heavy: bool = False) -> list:
    """pytest params for every registered backend of ``op``; the ones this machine lacks are skipped
    with the reason (a GPU backend without a CUDA device, say). ``heavy``: a whole fit, for which
    the float64 reference (tens of seconds) runs only outside --bench-quick."""
    from contextrag.ops import availability, op_tables
    only = os.environ.get("CONTEXTRAG_BENCH_BACKEND") or None
    avail = availability()
    out = []
    for b in ALL_BACKENDS:
        if b not in op_tables().get(op, {}) or (only is not None and b != only) or (heavy and quick() and b == "ref"):
            continue
        ok, why = avail[b]
        if b in GPU_BACKENDS and not torch.cuda.is_available():
            ok, why = False, f"{b}: no CUDA device"
        out.append(pytest.param(b, marks=pytest.mark.skipif(not ok, reason=why)))
    return out


def device_of(backend: str) -> str:
    return "cuda" if backend in GPU_BACKENDS else "cpu"


def on(backend: str, a):
    """The operand as the backend takes it: NumPy for the CPU backends, a CUDA tensor for the GPU."""
    if device_of(backend) == "cuda":
        return torch.as_tensor(a).cuda()
    return a


def synced(backend: str, fn):
    """fn followed by a device sync, so a GPU timing covers the kernels and not only their launch."""
    if device_of(backend) != "cuda":
        return fn

    def run():
        out = fn()
        torch.cuda.synchronize()
        return out
    return run


def shape_id(shape) -> str:
    return "x".join(str(s) for s in shape)


ROUND_BUDGET_S = 1.0   # a fast kernel gets more rounds, up to about this much time in all (quick: a third)
MAX_ROUNDS = 50


def run(benchmark, fn, *, op: str, impl: str, backend: str | None, shape, dtype, rounds: int,
        group: str | None = None, warmup: int = 1):
    """Time fn: at least ``rounds`` rounds, more for a fast kernel (up to ROUND_BUDGET_S of them),
    after ``warmup`` untimed calls. Not pytest-benchmark's calibration, which would run a
    multi-second fit dozens of times. Labels the entry for the ratio table."""
    dt = np.dtype(dtype).name
    benchmark.group = group or f"{op} {shape_id(shape)} {dt}"
    benchmark.extra_info.update({"op": op, "impl": impl, "backend": backend, "shape": list(shape), "dtype": dt})
    if warmup:
        t0 = time.perf_counter()
        for _ in range(warmup):
            fn()
        per = (time.perf_counter() - t0) / warmup
        budget = ROUND_BUDGET_S / 3 if quick() else ROUND_BUDGET_S
        rounds = max(rounds, min(MAX_ROUNDS, int(budget / max(per, 1e-6))))
    return benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)




def clustered(n, d, seed=0, noise=1.2, components=400):
    """n unit vectors in d dimensions around ``components`` random centres: embedding-like data."""
    rng = np.random.default_rng(seed)
    cent = rng.standard_normal((components, d)).astype(np.float32)
    X = cent[rng.integers(0, components, n)] + noise * rng.standard_normal((n, d), dtype=np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return np.ascontiguousarray(X, dtype=np.float32)
