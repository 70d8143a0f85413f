"""Row-major copies of transposed matrices, made without NumPy's strided walk.

``np.ascontiguousarray(a.T)`` of a tall matrix (a million rows × a few hundred node or attribute
columns) walks the source with a stride of one row per element. Whole matrices go to the extension's
cache-blocked, parallel ``transpose``; a subset of the columns (or no extension) is copied 4,096
source rows at a time, each block's rows and output columns staying in cache. An index's node
extents are such a transpose of its context (index/graph.py), its item-major extents one of the node
extents (index/prepared.py, query/fuzzy.py). Also here: the rows a delete keeps of a CSR-like pair,
copied run by run. At a million chunks on the 2-core AMX Xeon (bench/bench_scale_parts.py,
``scale_1m.json`` "parts_amx", load 0.3–0.9, medians): the context made node-major 1.83 → 0.47 s,
the extents made item-major 0.77 → 0.49 s, a delete's kept chunk texts 0.67 → 0.15 s.
"""
from __future__ import annotations

import numpy as np

BLOCK_ROWS = 4096


def transposed(a: np.ndarray, columns=None, *, block: int = BLOCK_ROWS) -> np.ndarray:
    """``np.ascontiguousarray(a[:, columns].T)`` (``a.T`` when ``columns`` is None) for a 2-D ``a``."""
    if a.ndim != 2:
        raise ValueError(f"transposed needs a 2-D array, got shape {a.shape}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    if columns is None and a.dtype in (np.float32, np.float64) and a.flags.c_contiguous and a.size:
        from ..ops import native
        C = native()
        if C is not None and hasattr(C, "transpose"):
            out: np.ndarray = C.transpose(a)
            return out
    if columns is not None:
        a = _Columns(a, np.asarray(columns, dtype=np.int64))
    n, m = a.shape
    out = np.empty((m, n), dtype=a.dtype)
    for r in range(0, n, block):
        out[:, r:r + block] = a[r:r + block].T
    return out


class _Columns:
    """``a[:, cols]`` taken lazily, block by block (never the whole gathered copy)."""

    def __init__(self, a: np.ndarray, cols: np.ndarray):
        self.a, self.cols = a, cols
        self.shape, self.dtype = (a.shape[0], cols.size), a.dtype

    def __getitem__(self, key):
        rows, cols = key if isinstance(key, tuple) else (key, slice(None))
        return self.a[rows][:, self.cols[cols]]


def kept_rows(indptr: np.ndarray, data: np.ndarray, keep: np.ndarray) -> tuple:
    """(indptr, data) of the rows ``keep`` (ascending) of a CSR-like pair, copied run by run: a
    delete keeps nearly every row, so a few long slices replace a mask over every entry."""
    n = indptr.size - 1
    mask = np.zeros(n, bool)
    mask[keep] = True
    lens = np.diff(indptr)[keep]
    out_ptr = np.zeros(keep.size + 1, np.int64)
    np.cumsum(lens, out=out_ptr[1:])
    # runs of consecutive kept rows: one slice each
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    parts = [data[indptr[a]:indptr[b]] for a, b in zip(edges[0::2], edges[1::2])]
    return out_ptr, (np.concatenate(parts) if parts else data[:0].copy())
