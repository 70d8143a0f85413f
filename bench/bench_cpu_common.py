"""Shared helpers for the CPU kernel benchmarks (bench_cpu_*.py): machine facts, timing, JSON.

These are measurements, not tests. Every script records the machine (CPU model, cores, clock,
SIMD width, library versions) and the load average at start and end: on a shared machine the
other tenants' load is part of the result, so each timing is repeated and the best and median
are both kept.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

RESULTS = Path(__file__).resolve().parent / "results"


def _cpuinfo() -> dict:
    info = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    first = text.split("\n\n")[0]
    for line in first.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            info[k.strip()] = v.strip()
    return info


def machine() -> dict:
    ci = _cpuinfo()
    flags = set(ci.get("flags", "").split())
    lanes32 = 16 if "avx512f" in flags else 8 if "avx2" in flags else 4
    versions = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__}
    for mod in ("faiss", "skfuzzy", "scipy"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception as e:  # a peer not installed is recorded, not fatal
            versions[mod] = f"unavailable ({type(e).__name__})"
    try:
        from contextrag import _C
        isa = _C.cpu_isa()
        engine = _C.matrix_engine() if hasattr(_C, "matrix_engine") else "none"
    except Exception:
        isa, engine = "n/a", "none"
    try:
        from contextrag.machine import profile
        prof = profile().to_dict()
    except Exception as e:   # recorded, not fatal
        prof = f"unavailable ({type(e).__name__})"
    return {
        "profile": prof,   # contextrag.machine: CPU model, ISA flags, probed fp32/bf16/int8 GEMM rates
        "cpu_model": ci.get("model name", platform.processor()),
        "cpu_family_model": f"{ci.get('cpu family', '?')}/{ci.get('model', '?')}",
        "cores": os.cpu_count(),
        "cpu_mhz": float(ci.get("cpu MHz", "nan")),
        "simd": "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse",
        "fp32_lanes_per_vector": lanes32,
        "contextrag_cpu_isa": isa,   # the dispatch used (CONTEXTRAG_ISA forces it)
        "contextrag_matrix_engine": engine,   # 'amx' where the bf16 tiles run on AMX
        "contextrag_isa_env": os.environ.get("CONTEXTRAG_ISA"),
        "torch_threads": torch.get_num_threads(),
        "versions": versions,
        "shared_machine": True,
        "note": "2-core VM shared with other jobs during the run; see load averages. "
                "Times are best-of and median-of repeats; ratios use the best of each.",
    }


def loadavg() -> list:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


SETTLE_S = 0.5


def settle():
    """Let the previous contender's worker threads go idle before the next timing starts.

    OpenBLAS (inside faiss-cpu) and OpenMP runtimes keep their threads spinning for up to ~0.1 s after
    a call; on 2 cores that spinning is charged to whoever runs next (a fit timed right after FAISS
    ran visibly slower in development runs)."""
    time.sleep(SETTLE_S)


def timed(fn, repeats: int = 3, warmup: int = 0, pause: bool = True) -> dict:
    """Run fn repeats times (each after settle() unless pause=False: back-to-back repeats suit a
    millisecond kernel, whose first call after an idle pause runs slow: a pause before each call
    halved our bf16 GEMM's rate in the cpu_fcm.json run before it was dropped there); returns
    best/median seconds and the last result."""
    for _ in range(warmup):
        fn()
    ts, cs, out = [], [], None
    for _ in range(repeats):
        if pause:
            settle()
        c0 = time.process_time()
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    # cpu_s: CPU seconds this process actually received (all its threads). On an oversubscribed
    # machine wall time mostly measures the other tenants; CPU time is closer to the work done
    # (it also counts OpenMP/BLAS threads spinning at barriers, so it overstates, never flatters).
    return {"best_s": min(ts), "median_s": statistics.median(ts), "all_s": ts,
            "cpu_s": cs[ts.index(min(ts))], "min_cpu_s": min(cs), "result": out}


def gemm_rate(n: int = 4096, repeats: int = 5) -> dict:
    """The machine's fp32 GEMM rate right now: a large square torch.matmul (MKL/oneDNN)."""
    a = torch.randn(n, n)
    b = torch.randn(n, n)
    torch.matmul(a, b)
    t = timed(lambda: torch.matmul(a, b), repeats)
    flops = 2.0 * n ** 3
    return {"n": n, "best_s": t["best_s"], "median_s": t["median_s"],
            "gflops_best": flops / t["best_s"] / 1e9, "gflops_median": flops / t["median_s"] / 1e9,
            # per CPU second the process received (all threads): what the arithmetic costs in CPU
            # time, which other tenants of a shared machine inflate far less than wall time
            "gflops_per_cpu_s": flops / t["min_cpu_s"] / 1e9}


def write(name: str, payload: dict) -> Path:
    """bench/results/cpu_<name>_<isa>.json: the CPU dispatch the run used names the file, "amx" where
    its bf16 tiles ran on AMX (runs on different ISAs must not overwrite each other; cpu_<name>.json
    are the earlier AVX-512 runs)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    m = payload.get("machine", {})
    isa = "amx" if m.get("contextrag_matrix_engine") == "amx" else m.get("contextrag_cpu_isa", "n/a")
    path = RESULTS / f"cpu_{name}_{isa}.json"

    def clean(o):
        if isinstance(o, dict):
            return {k: clean(v) for k, v in o.items() if k != "result"}
        if isinstance(o, (list, tuple)):
            return [clean(v) for v in o]
        if isinstance(o, (np.floating, np.integer)):
            return o.item()
        return o
    path.write_text(json.dumps(clean(payload), indent=2) + "\n")
    print(f"wrote {path}")
    return path
