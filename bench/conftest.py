"""Microbenchmarks of ``contextrag.ops`` with pytest-benchmark: one ``test_bench_<family>.py`` per op
family, every backend this machine has × a few shapes × dtypes, and in the same benchmark group the
peers a user would pick instead (FAISS k-means, skfuzzy.cmeans, NumPy broadcasting, a torch GEMM).

Run them with ``contextrag bench [--op NAME] [--backend B] [--quick]`` (or ``make bench``), which
writes the pytest-benchmark JSON and prints peer/ours ratios per group. Options (also accepted by a
plain ``pytest bench/``):

* ``--bench-quick``: the smallest shape, float32 only, few rounds (the whole suite in about a minute);
* ``--bench-backend B``: only backend B of contextrag (the peers always run: they are the yardstick).

Every entry carries ``extra_info`` = {"op", "impl", "backend", "shape", "dtype"}: impl "contextrag"
for ours, the peer's name otherwise. The machine section records the CPU dispatch
(``contextrag_cpu_isa``; CONTEXTRAG_ISA forces it), library versions and the load average at the
start and end: on a shared machine the other tenants' load is part of every figure.
"""
from __future__ import annotations

import os
import platform
import time

import numpy as np
import pytest
import torch

GPU_BACKENDS = ("triton", "cuda")
ALL_BACKENDS = ("cpu", "ref", "triton", "cuda")


def pytest_addoption(parser):
    g = parser.getgroup("contextrag bench")
    g.addoption("--bench-quick", action="store_true", help="smallest shape, float32, few rounds")
    g.addoption("--bench-backend", choices=ALL_BACKENDS, default=None,
                help="only this contextrag backend (peers still run)")


def pytest_configure(config):
    # read by the test modules at import (their parametrisation depends on it); collection follows
    if config.getoption("--bench-quick", default=False):
        os.environ["CONTEXTRAG_BENCH_QUICK"] = "1"
    b = config.getoption("--bench-backend", default=None)
    if b:
        os.environ["CONTEXTRAG_BENCH_BACKEND"] = b


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
    from contextrag.ops._backend import availability
    from contextrag.ops._registry import IMPLS
    only = os.environ.get("CONTEXTRAG_BENCH_BACKEND") or None
    avail = availability()
    out = []
    for b in ALL_BACKENDS:
        if b not in IMPLS.get(op, {}) or (only is not None and b != only) or (heavy and quick() and b == "ref"):
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


def _versions() -> dict:
    v = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__}
    for mod in ("contextrag", "faiss", "skfuzzy", "scipy", "triton"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # a peer not installed is recorded, not fatal
            v[mod] = f"unavailable ({type(e).__name__})"
    return v


def _loadavg() -> list:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def pytest_benchmark_update_machine_info(config, machine_info):
    try:
        from contextrag import _C
        isa = _C.cpu_isa()
    except Exception:
        isa = "n/a"
    machine_info["contextrag"] = {
        "cpu_isa": isa,                                   # the dispatch the native kernels used
        "isa_env": os.environ.get("CONTEXTRAG_ISA"),
        "torch_threads": torch.get_num_threads(),
        "cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "versions": _versions(),
        "quick": quick(),
        "load_start": config._contextrag_load_start,
        "load_end": _loadavg(),
    }


def pytest_sessionstart(session):
    session.config._contextrag_load_start = _loadavg()
