"""Indices of a query's (n,) scores above a threshold: the extension's one-pass select
(csrc/cpu/select.cpp) where it is built, NumPy's flatnonzero otherwise (the same indices)."""
from __future__ import annotations

import numpy as np


def indices_above(h: np.ndarray, thr: float, strict: bool = False) -> np.ndarray:
    """Ascending int64 indices i with h[i] >= thr (h[i] > thr when ``strict``); NaN never passes."""
    from ..ops._backend import cpu_native
    C = cpu_native("indices_above")
    if C is not None and isinstance(h, np.ndarray) and h.dtype == np.float32 and h.ndim == 1 \
            and h.flags.c_contiguous:
        return C.indices_above(h, float(thr), bool(strict))
    return np.flatnonzero(h > thr if strict else h >= thr).astype(np.int64, copy=False)


def in_sorted(h: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(len(idx),) bool: which of ``idx`` are in the sorted array ``h`` (a binary search each)."""
    if not h.size:
        return np.zeros(np.shape(idx), dtype=bool)
    pos = np.minimum(np.searchsorted(h, idx), h.size - 1)
    return h[pos] == idx
