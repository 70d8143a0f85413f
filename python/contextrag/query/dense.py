"""Cosine term of eq. 13: exact inner products with the stored unit-norm embeddings.

``dense_scores`` is one (Q, d) × (d, n) product over every item (exact; a few ms at 10^5 items).
``dense_topk`` uses a FAISS ``IndexFlatIP`` (exact too, multi-threaded, no (Q, n) matrix kept) when
faiss is installed and the corpus has at least ``FAISS_MIN_ITEMS`` items, else NumPy argpartition.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from ..config import check_k

FAISS_MIN_ITEMS = 100_000
_FAISS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def embed_queries(view, texts: list[str]) -> np.ndarray:
    Q = np.asarray(view.embed(list(texts)), dtype=np.float32)
    if Q.ndim != 2 or Q.shape[1] != view.E.shape[1]:
        raise ValueError(f"query embeddings must be (Q, {view.E.shape[1]}), got {Q.shape}")
    n = np.linalg.norm(Q, axis=1, keepdims=True)
    return Q / np.maximum(n, 1e-12)


_GATHER_BLOCK = 2048      # NumPy's path gathers the rows a query scores in blocks that stay in cache


def cosines(E: np.ndarray, qvecs: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
    """(Q, m) inner products of the queries with the rows ``idx`` of ``E`` (every row when None).
    The extension's ``dot_rows`` reads the rows in place, in one summation order for every path (a
    candidate's cosine is the exhaustive one's bits); NumPy's BLAS otherwise."""
    from ..ops._backend import cpu_native
    q = np.ascontiguousarray(np.atleast_2d(np.asarray(qvecs, dtype=np.float32)))
    C = cpu_native("dot_rows")
    if C is not None and isinstance(E, np.ndarray) and E.dtype == np.float32 and E.flags.c_contiguous:
        return C.dot_rows(E, q, None if idx is None else np.asarray(idx, np.int64))
    if idx is None:
        return q @ E.T
    out = np.empty((q.shape[0], len(idx)), np.float32)
    for b0 in range(0, len(idx), _GATHER_BLOCK):
        rows = E[idx[b0:b0 + _GATHER_BLOCK]]
        for j in range(q.shape[0]):
            out[j, b0:b0 + rows.shape[0]] = rows @ q[j]
    return out


def dense_scores(view, qvecs: np.ndarray) -> np.ndarray:
    """(Q, n) cosine similarities (embeddings are unit-norm)."""
    return cosines(view.E, qvecs)


def _faiss_index(view):
    try:
        import faiss
    except ImportError:
        return None
    with _LOCK:
        ix = _FAISS.get(view)
        if ix is None:
            ix = faiss.IndexFlatIP(view.E.shape[1])
            ix.add(view.E)
            _FAISS[view] = ix
    return ix


def dense_topk(view, qvecs: np.ndarray, k: int, *, use_faiss: bool | None = None):
    """(scores, indices), each (Q, k'), k' = min(k, n), best first."""
    check_k(k)
    q = np.ascontiguousarray(np.atleast_2d(qvecs), dtype=np.float32)
    k = min(k, view.n)
    if use_faiss is None:
        use_faiss = view.n >= FAISS_MIN_ITEMS
    ix = _faiss_index(view) if use_faiss else None
    if ix is not None:
        D, I = ix.search(q, k)
        return D, I.astype(np.int64)
    S = dense_scores(view, q)
    part = np.argpartition(-S, k - 1, axis=1)[:, :k]
    ps = np.take_along_axis(S, part, axis=1)
    order = np.argsort(-ps, axis=1, kind="stable")
    return np.take_along_axis(ps, order, axis=1), np.take_along_axis(part, order, axis=1)
