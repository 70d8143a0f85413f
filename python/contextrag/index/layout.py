"""Row-major copies of transposed matrices, made without NumPy's strided walk.

``np.ascontiguousarray(a.T)`` of a tall matrix (a million rows × a few hundred node or attribute
columns) walks the source with a stride of one row per element. Whole matrices go to the extension's
cache-blocked, parallel ``transpose``; a subset of the columns (or no extension) is copied 4,096
source rows at a time, each block's rows and output columns staying in cache. An index's node
extents are such a transpose of its context (index/graph.py; the default graph's are a view of it
instead, laid out node-major only for a query that routes every item, query/fuzzy.py), its
item-major extents one of the node extents (index/prepared.py). Also here: the rows a delete keeps
of a CSR-like pair, copied run by run; an array without some positions, moved left in place; CSR
blocks stacked side by side straight into the output. At a million chunks on the 2-core AMX Xeon (bench/bench_scale_parts.py,
``scale_1m.json`` "parts_amx", load 0.3–0.9, medians): the context made node-major 1.83 → 0.47 s,
the extents made item-major 0.77 → 0.49 s, a delete's kept chunk texts 0.67 → 0.15 s.
"""
from __future__ import annotations

import numpy as np

from .deferred import DeferredRows

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


def kept_rows(indptr: np.ndarray, data: np.ndarray, keep: np.ndarray, *, deferred: bool = False) -> tuple:
    """(indptr, data) of the rows ``keep`` (ascending) of a CSR-like pair, copied run by run: a
    delete keeps nearly every row, so a few long slices replace a mask over every entry.
    ``deferred``: the data as those runs of ``data`` (index/deferred.py), not copied."""
    n = indptr.size - 1
    mask = np.zeros(n, bool)
    mask[keep] = True
    lens = np.diff(indptr)[keep]
    out_ptr = np.zeros(keep.size + 1, np.int64)
    np.cumsum(lens, out=out_ptr[1:])
    # runs of consecutive kept rows: one slice each
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    spans = [(int(indptr[a]), int(indptr[b])) for a, b in zip(edges[0::2], edges[1::2])]
    if deferred:
        runs = [(data, slice(a, b)) for a, b in spans if b > a]
        return out_ptr, (DeferredRows(runs) if runs else data[:0].copy())
    parts = [data[a:b] for a, b in spans]
    return out_ptr, (np.concatenate(parts) if parts else data[:0].copy())


def without_positions(a: np.ndarray, gone: np.ndarray) -> np.ndarray:
    """``a`` without the entries at the (ascending) positions ``gone``, the rest moved left in place:
    a view of ``a`` (an update deletes few postings of many, so no second array of them is made).
    Many positions: one vectorised selection instead (a new array)."""
    if gone.size > 65536:
        keep = np.ones(a.size, bool)
        keep[gone] = False
        return a[keep]
    for i, (s, e) in enumerate(zip((gone + 1).tolist(), np.append(gone[1:], a.size).tolist())):
        if e > s:
            a[s - i - 1:e - i - 1] = a[s:e]
    return a[:a.size - gone.size]


_STACK_ROWS = 1 << 16


def hstack_rows(mats: list, dtype=np.float32):
    """``sp.hstack(mats, format="csr", dtype=dtype)`` for CSR blocks of equal rows (the same
    matrix, index dtype and entry order), written straight into the output a block of rows at a time:
    scipy's first concatenates every block's indices and data (a second copy of all entries, 0.35 GB
    of fresh memory at a million chunks) before laying them out by rows."""
    import scipy.sparse as sp
    n = mats[0].shape[0]
    widths = [M.shape[1] for M in mats]
    if any(M.shape[0] != n for M in mats):
        raise ValueError(f"blocks to stack side by side need the same rows, got {[M.shape for M in mats]}")
    nnz = sum(int(M.nnz) for M in mats)
    idx = np.int32 if max(nnz, sum(widths), n) <= np.iinfo(np.int32).max else np.int64
    ptrs = [np.asarray(M.indptr, np.int64) if M.indptr.dtype != np.int64 else M.indptr for M in mats]
    indptr64 = np.zeros(n + 1, np.int64)
    for p in ptrs:
        indptr64 += p - p[0]
    indices, data = np.empty(nnz, idx), np.empty(nnz, dtype)
    offs = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    for r0 in range(0, n, _STACK_ROWS):
        r1 = min(n, r0 + _STACK_ROWS)
        start = indptr64[r0:r1].copy()                   # where each row's next block goes
        for M, p, off in zip(mats, ptrs, offs.tolist()):
            e0, e1 = int(p[r0]), int(p[r1])
            lens = np.diff(p[r0:r1 + 1])
            if e1 > e0:
                pos = np.repeat(start - p[r0:r1], lens)
                pos += np.arange(e0, e1, dtype=np.int64)
                indices[pos] = M.indices[e0:e1] + off if off else M.indices[e0:e1]
                data[pos] = M.data[e0:e1]
            start += lens
    out = sp.csr_matrix((data, indices, indptr64.astype(idx, copy=False)), shape=(n, sum(widths)))
    out.has_sorted_indices = all(M.has_sorted_indices for M in mats)
    return out
