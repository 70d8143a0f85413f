"""Backend discovery and selection.

Order: explicit ``backend=`` argument, then env ``CONTEXTRAG_BACKEND``, then by device
(CUDA tensors: cuda > triton; CPU tensors: cpu > ref). An auto-selected backend that is not
available falls back with a one-time warning; an explicitly requested one raises.

torch is imported only when a GPU backend is asked about: choosing a CPU backend for NumPy input
(the query path) must not cost torch's import (about 3 s of a cold start, profiled).
"""
from __future__ import annotations

import functools
import os
import warnings
from typing import Any, Callable

BACKENDS = ("ref", "cpu", "triton", "cuda")
_AUTO_ORDER = {"cuda": ("cuda", "triton", "ref"), "cpu": ("cpu", "ref")}
_warned: set[tuple[str, str]] = set()


def _native():
    """The compiled extension, or the reason it is missing. Raises ValueError when CONTEXTRAG_ISA
    names an instruction set that is unknown or that this CPU lacks (the C++ side falls back
    silently at load time, so the error is raised here, on first use)."""
    C, why = _load_native()
    err = getattr(C, "isa_env_error", lambda: "")() if C is not None else ""
    if err:
        raise ValueError(err)
    return C, why


@functools.lru_cache(maxsize=None)
def _load_native():
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


def _cuda_available() -> bool:
    import torch
    return torch.cuda.is_available()


def _device_type(device) -> str:
    """The device type, "cuda" or "cpu", of a torch.device or a device name (NumPy input passes "cpu")."""
    return device if isinstance(device, str) else device.type


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _check(name: str) -> tuple[bool, str]:
    """(available, why) for one backend. Each backend is probed only when asked about: selecting a
    CPU backend must not import Triton (about 0.2 s of the first op call, profiled)."""
    if name == "ref":
        return True, "float64 NumPy reference, always available"
    C, why = _native()
    if name == "cpu":
        return True, ("C++/OpenMP kernels and torch CPU BLAS" if C is not None else f"torch CPU only ({why})")
    if name == "triton":
        kern, why_t = _triton()
        if kern is None:
            return False, why_t
        if _cuda_available():
            return True, "Triton on CUDA"
        if _interpret():
            return True, "Triton interpreter on CPU (TRITON_INTERPRET=1; small shapes only)"
        return False, "no CUDA device (set TRITON_INTERPRET=1 to run the interpreter on CPU)"
    if C is None:
        return False, why
    if not getattr(C, "cuda_compiled", lambda: False)():
        return False, "contextrag._C was built without CUDA (nvcc not found or CONTEXTRAG_CUDA=OFF)"
    if not _cuda_available():
        return False, "CUDA kernels compiled, but no CUDA device is visible"
    return True, "CUDA C++ kernels"


def availability() -> dict[str, tuple[bool, str]]:
    """{backend: (available, why)} for this process."""
    return {name: _check(name) for name in ("ref", "cpu", "triton", "cuda")}


def backends() -> dict[str, dict]:
    """What is available, and why the rest is not; the "cpu" entry carries the machine profile
    (``contextrag.machine``: CPU model, ISA flags, the native dispatch, torch's GEMM rates when
    probed or cached; reading it imports no torch)."""
    out = {k: {"available": ok, "detail": why} for k, (ok, why) in availability().items()}
    from contextrag.machine import profile
    out["cpu"]["machine"] = profile(probe=False).to_dict()
    return out


def native() -> Any:
    """The compiled extension module ``contextrag._C`` (the C++ kernels; it ships no type stubs), or
    None where it is not built or failed to load."""
    return _native()[0]


def cpu_native(name: str) -> Any:
    """The extension when it has the function ``name`` and the CPU backend is in use
    (CONTEXTRAG_BACKEND unset or "cpu"), else None: what a query's NumPy path calls in place."""
    if os.environ.get("CONTEXTRAG_BACKEND") not in (None, "", "cpu"):
        return None
    C = native()
    return C if C is not None and hasattr(C, name) else None


def select(op: str, device, backend: str | None, impls: dict[str, Callable]) -> tuple[str, Callable]:
    """Pick the implementation of ``op`` for tensors on ``device`` (a torch.device, or "cpu"/"cuda")."""
    dev = _device_type(device)
    explicit = backend if backend is not None else os.environ.get("CONTEXTRAG_BACKEND") or None
    if explicit is not None:
        if explicit not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {explicit!r}")
        if explicit not in impls:
            raise ValueError(f"op {op} has no {explicit!r} implementation (has: {sorted(impls)})")
        ok, why = _check(explicit)
        if not ok:
            raise RuntimeError(f"backend {explicit!r} requested for {op} but unavailable: {why}")
        on_gpu = dev == "cuda"
        if explicit in ("cuda",) and not on_gpu:
            raise ValueError(f"backend 'cuda' needs CUDA tensors; {op} got tensors on {device}")
        if explicit == "triton" and not on_gpu and not _interpret():
            raise ValueError(f"backend 'triton' needs CUDA tensors (or TRITON_INTERPRET=1); {op} got {device}")
        return explicit, impls[explicit]
    order = _AUTO_ORDER["cuda" if dev == "cuda" else "cpu"]
    for name in order:
        if name in impls and _check(name)[0]:
            if name != order[0] and (op, order[0]) not in _warned:
                _warned.add((op, order[0]))
                warnings.warn(f"contextrag: {op} fell back to backend {name!r}: "
                              f"{order[0]!r} unavailable ({_check(order[0])[1]})", RuntimeWarning, stacklevel=3)
            return name, impls[name]
    raise RuntimeError(f"no backend available for {op} on {device}")
