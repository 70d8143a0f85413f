"""pytest hooks of the microbenchmark suites, loaded with ``-p contextrag.bench.plugin`` (``contextrag
bench`` does it): the options, and the machine section of the JSON.

* ``--bench-quick``: the smallest shape, float32 only, few rounds (the whole suite in about a minute);
* ``--bench-backend B``: only backend B of contextrag (the peers always run: they are the yardstick).

The machine section records the machine profile (CPU model, ISA flags, torch GEMM rates:
``contextrag.machine``), the native kernels' dispatch (``CONTEXTRAG_ISA`` forces it), library
versions and the load average at the start and end: on a shared machine the other tenants' load is
part of every figure.
"""
from __future__ import annotations

import os
import platform

import numpy as np
import torch

from .harness import ALL_BACKENDS, quick


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
    from contextrag.machine import profile
    try:
        from contextrag.ops import native
        isa = native().cpu_isa()
    except Exception:
        isa = "n/a"
    machine_info["contextrag"] = {
        "cpu_isa": isa,                                   # the dispatch the native kernels used
        "profile": profile().to_dict(),
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
