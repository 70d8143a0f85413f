"""Helpers shared by the kernel tests: input kinds and layouts, fuzzy data, tolerances.

(A plain module rather than conftest.py, so that it cannot be shadowed by another conftest.)
"""
from __future__ import annotations

import numpy as np
import torch

from contextrag.ops._backend import availability

CPU_BACKENDS = [b for b in ("ref", "cpu") if availability()[b][0]]


def as_kind(a: np.ndarray, kind: str):
    """The same values as ``a`` in one of several containers/layouts.

    numpy / torch: contiguous; numpy_T / torch_T: a transposed view of a transposed copy
    (non-contiguous, same values); torch_strided: every other column of a wider tensor.
    """
    if kind == "numpy":
        return np.ascontiguousarray(a)
    if kind == "torch":
        return torch.from_numpy(np.ascontiguousarray(a))
    if kind == "numpy_T":
        return np.ascontiguousarray(a.T).T if a.ndim == 2 else a[::-1].copy()[::-1]
    if kind == "torch_T":
        return torch.from_numpy(np.ascontiguousarray(a.T)).T if a.ndim == 2 else torch.from_numpy(a.copy())
    if kind == "torch_strided":
        if a.ndim != 2:
            return torch.from_numpy(np.repeat(a, 2)[::2].copy())
        wide = np.zeros((a.shape[0], 2 * a.shape[1]), dtype=a.dtype)
        wide[:, ::2] = a
        return torch.from_numpy(wide)[:, ::2]
    raise ValueError(kind)


KINDS = ("numpy", "torch", "numpy_T", "torch_T", "torch_strided")


def to_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def check_kind(out, kind: str):
    """numpy in -> numpy out, torch in -> torch out."""
    if kind.startswith("numpy"):
        assert isinstance(out, np.ndarray), type(out)
    else:
        assert isinstance(out, torch.Tensor), type(out)


def fuzzy(rng, shape, dtype=np.float64, zeros: float = 0.0, grid: int | None = None):
    """Degrees in [0, 1]: optionally a fraction of exact zeros, optionally on a k/grid lattice (ties)."""
    a = rng.random(shape)
    if grid:
        a = np.round(a * grid) / grid
    if zeros:
        a[rng.random(shape) < zeros] = 0.0
    return a.astype(dtype)


EPS = {np.float32: float(np.finfo(np.float32).eps), np.float64: float(np.finfo(np.float64).eps)}
