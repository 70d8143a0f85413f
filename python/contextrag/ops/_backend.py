"""Backend discovery and selection.

Order: explicit ``backend=`` argument, then env ``CONTEXTRAG_BACKEND``, then by device
(CUDA tensors: cuda > triton; CPU tensors: cpu > ref). An auto-selected backend that is not
available falls back with a one-time warning; an explicitly requested one raises.
"""
from __future__ import annotations

import functools
import os
import warnings
from typing import Callable

import torch

BACKENDS = ("ref", "cpu", "triton", "cuda")
_AUTO_ORDER = {"cuda": ("cuda", "triton", "ref"), "cpu": ("cpu", "ref")}
_warned: set[tuple[str, str]] = set()


@functools.lru_cache(maxsize=None)
def _native():
    """The compiled extension, or the reason it is missing."""
    try:
        from contextrag import _C  # noqa: F401
        return _C, None
    except Exception as e:  # ImportError, or a broken build
        return None, f"contextrag._C failed to import: {e}"


@functools.lru_cache(maxsize=None)
def _triton():
    try:
        import triton  # noqa: F401
    except Exception as e:
        return None, f"triton is not installed ({e})"
    try:
        from contextrag import kernels
        return kernels, None
    except Exception as e:
        return None, f"contextrag.kernels failed to import: {e}"


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def availability() -> dict[str, tuple[bool, str]]:
    """{backend: (available, why)} for this process."""
    out = {"ref": (True, "float64 NumPy reference, always available")}
    C, why = _native()
    out["cpu"] = (True, "C++/OpenMP kernels and torch CPU BLAS" if C is not None
                  else f"torch CPU only ({why})")
    kern, why_t = _triton()
    cuda_ok = torch.cuda.is_available()
    if kern is None:
        out["triton"] = (False, why_t)
    elif cuda_ok:
        out["triton"] = (True, "Triton on CUDA")
    elif _interpret():
        out["triton"] = (True, "Triton interpreter on CPU (TRITON_INTERPRET=1; small shapes only)")
    else:
        out["triton"] = (False, "no CUDA device (set TRITON_INTERPRET=1 to run the interpreter on CPU)")
    if C is None:
        out["cuda"] = (False, why)
    elif not getattr(C, "cuda_compiled", lambda: False)():
        out["cuda"] = (False, "contextrag._C was built without CUDA (nvcc not found or CONTEXTRAG_CUDA=OFF)")
    elif not cuda_ok:
        out["cuda"] = (False, "CUDA kernels compiled, but no CUDA device is visible")
    else:
        out["cuda"] = (True, "CUDA C++ kernels")
    return out


def backends() -> dict[str, dict]:
    """What is available, and why the rest is not."""
    return {k: {"available": ok, "detail": why} for k, (ok, why) in availability().items()}


def native():
    """The C++ module or None."""
    return _native()[0]


def select(op: str, device: torch.device, backend: str | None, impls: dict[str, Callable]) -> tuple[str, Callable]:
    """Pick the implementation of ``op`` for tensors on ``device``."""
    explicit = backend if backend is not None else os.environ.get("CONTEXTRAG_BACKEND") or None
    avail = availability()
    if explicit is not None:
        if explicit not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {explicit!r}")
        if explicit not in impls:
            raise ValueError(f"op {op} has no {explicit!r} implementation (has: {sorted(impls)})")
        ok, why = avail[explicit]
        if not ok:
            raise RuntimeError(f"backend {explicit!r} requested for {op} but unavailable: {why}")
        on_gpu = device.type == "cuda"
        if explicit in ("cuda",) and not on_gpu:
            raise ValueError(f"backend 'cuda' needs CUDA tensors; {op} got tensors on {device}")
        if explicit == "triton" and not on_gpu and not _interpret():
            raise ValueError(f"backend 'triton' needs CUDA tensors (or TRITON_INTERPRET=1); {op} got {device}")
        return explicit, impls[explicit]
    order = _AUTO_ORDER["cuda" if device.type == "cuda" else "cpu"]
    for name in order:
        if name in impls and avail[name][0]:
            if name != order[0] and (op, order[0]) not in _warned:
                _warned.add((op, order[0]))
                warnings.warn(f"contextrag: {op} fell back to backend {name!r}: "
                              f"{order[0]!r} unavailable ({avail[order[0]][1]})", RuntimeWarning, stacklevel=3)
            return name, impls[name]
    raise RuntimeError(f"no backend available for {op} on {device}")
