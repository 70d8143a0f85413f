"""Per-op implementation tables. Each op module declares its table here; GPU modules add entries.

The op modules load lazily (``contextrag.ops``), so a table may be asked for before the module that
fills it ran: any lookup except the torch-free ``spread_hop``'s first loads every op module (and the
Triton/CUDA entries of k-means and FCM).
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, TypeVar

import numpy as np

_TORCH_FREE = frozenset({"spread_hop"})
_loaded = {"done": False, "busy": False}


def _load_all() -> None:
    if _loaded["done"] or _loaded["busy"]:
        return
    _loaded["busy"] = True
    try:
        for mod in ("lattice", "semiring", "kmeans", "fcm", "spread", "_fcm_gpu", "_kmeans_gpu"):
            importlib.import_module(f"contextrag.ops.{mod}")
        _loaded["done"] = True
    finally:
        _loaded["busy"] = False


class _Tables(dict[str, dict[str, Callable]]):
    """{op: {backend: fn}}; a lookup loads the op modules that fill it (see the module docstring).
    The ops only look up by name (``IMPLS[op]``, ``IMPLS.get(op)``), so only those load."""

    def __getitem__(self, op: str) -> dict[str, Callable]:
        if op not in _TORCH_FREE:
            _load_all()
        return super().__getitem__(op)

    def get(self, op: str, default: Any = None) -> Any:
        if op not in _TORCH_FREE:
            _load_all()
        return super().get(op, default)


IMPLS: dict[str, dict[str, Callable]] = _Tables()


_F = TypeVar("_F", bound=Callable)


def register(op: str, backend: str) -> Callable[[_F], _F]:
    """Decorator: register ``fn`` as ``backend``'s implementation of ``op``."""
    def deco(fn: _F) -> _F:
        dict.setdefault(IMPLS, op, {})[backend] = fn
        return fn
    return deco


def from_ref(fn: Callable) -> Callable:
    """Wrap a float64 NumPy reference so it takes and returns torch tensors (result in the inputs' dtype)."""
    def run(*tensors: Any, **kw: Any) -> Any:
        import torch
        dtype, device = tensors[0].dtype, tensors[0].device
        arrs = [t.detach().cpu().double().numpy() for t in tensors]
        out = fn(*arrs, **kw)

        def back(o: Any) -> Any:
            if isinstance(o, np.ndarray):
                t = torch.from_numpy(np.ascontiguousarray(o))
                return t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)
            return o
        return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)
    return run
