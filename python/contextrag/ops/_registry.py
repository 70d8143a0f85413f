"""Per-op implementation tables. Each op module declares its table here; GPU modules add entries."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

IMPLS: dict[str, dict[str, Callable]] = {}


def register(op: str, backend: str):
    """Decorator: register ``fn`` as ``backend``'s implementation of ``op``."""
    def deco(fn):
        IMPLS.setdefault(op, {})[backend] = fn
        return fn
    return deco


def from_ref(fn: Callable) -> Callable:
    """Wrap a float64 NumPy reference so it takes and returns torch tensors (result in the inputs' dtype)."""
    def run(*tensors, **kw):
        dtype, device = tensors[0].dtype, tensors[0].device
        arrs = [t.detach().cpu().double().numpy() for t in tensors]
        out = fn(*arrs, **kw)

        def back(o):
            if isinstance(o, np.ndarray):
                t = torch.from_numpy(np.ascontiguousarray(o))
                return t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)
            return o
        return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)
    return run
