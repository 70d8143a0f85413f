"""Membership in a sorted index array, for a query's few thousand indices against a term's postings
or the candidates (no (n,) mask of a million items)."""
from __future__ import annotations

import numpy as np


def in_sorted(h: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """(len(idx),) bool: which of ``idx`` are in the sorted array ``h`` (a binary search each)."""
    if not h.size:
        return np.zeros(np.shape(idx), dtype=bool)
    pos = np.minimum(np.searchsorted(h, idx), h.size - 1)
    return h[pos] == idx
