"""The torch-backed steps of a small ``add`` (its new chunks only), without importing torch.

``ops.kmeans_assign``, ``ops.fcm_memberships`` and ``ops.luk_up`` run through torch, and importing
torch costs about a second, more than the whole rest of a small add. For up to :data:`MAX_ROWS` new
rows the same steps run here:

* RQ codes and FCM memberships (:func:`rq_memberships`): a NumPy GEMM and the same native row
  epilogues (``kmeans_epilogue``: first arg-min and the exact distance of the chosen centre;
  ``fcm_epilogue``: the memberships), so they agree with the torch path to the float32 rounding of
  the GEMM (tested); without the native extension the caller takes the ops path.
* the intents' update over the new rows (:func:`luk_up`): min(1, 1 + min_g (I(g, m) − A(g))) in
  float32, the association every path of ``ops.luk_up`` uses, so the result is the same bit for bit.
"""
from __future__ import annotations

import numpy as np

MAX_ROWS = 4096


def _native():
    from ..ops import native
    C = native()
    if C is None or not hasattr(C, "kmeans_epilogue") or not hasattr(C, "fcm_epilogue"):
        return None
    return C


def available(n_rows: int) -> bool:
    """Whether :func:`rq_memberships` serves ``n_rows`` rows here."""
    return 0 < n_rows <= MAX_ROWS and _native() is not None


def _topk_renorm(U: np.ndarray, k: int | None) -> np.ndarray:
    """The k largest memberships of each row, renormalised to sum 1; the rest 0."""
    if k is None or k >= U.shape[1]:
        return U
    idx = np.argpartition(-U, k - 1, axis=1)[:, :k]
    vals = np.take_along_axis(U, idx, axis=1)
    out = np.zeros_like(U)
    np.put_along_axis(out, idx, vals / vals.sum(axis=1, keepdims=True), axis=1)
    return out


def rq_memberships(X: np.ndarray, codebooks: list, m: float, top_k: int | None, normalize: str):
    """(codes (n, L) int64, FCM blocks [(n, c_l) float32], final squared residual norms (n,)) of the
    rows X against fixed codebooks: ``context._rq_memberships`` for a small batch."""
    Cn = _native()
    R = np.array(X, dtype=np.float32, copy=True, order="C")
    n = R.shape[0]
    codes = np.empty((n, len(codebooks)), np.int64)
    blocks = []
    for lvl, C in enumerate(codebooks):
        C = np.ascontiguousarray(C, dtype=np.float32)
        cn = np.einsum("ij,ij->i", C, C)
        G = np.ascontiguousarray(cn[None, :] + np.float32(-2.0) * (R @ C.T), dtype=np.float32)
        xn = np.ascontiguousarray(np.einsum("ij,ij->i", R, R), dtype=np.float32)
        U = np.empty((n, C.shape[0]), np.float32)
        Cn.fcm_epilogue(G, R, C, xn, float(m), U)
        U = _topk_renorm(U, None if top_k is None else min(int(top_k), C.shape[0]))
        if normalize == "max":
            U = U / np.maximum(U.max(axis=1, keepdims=True), 1e-30)
        blocks.append(np.asarray(U, dtype=np.float32))
        labels = np.empty(n, np.int64)
        d2 = np.empty(n, np.float32)
        Cn.kmeans_epilogue(G, R, C, labels, d2, None)
        codes[:, lvl] = labels
        R -= C[labels]
    return codes, blocks, (R * R).sum(axis=1)


def luk_up(A: np.ndarray, I: np.ndarray, block: int = 1 << 22) -> np.ndarray:
    """``ops.luk_up`` (A↑ = min over objects of A(g) → I(g, m)) of dense float32 (s, G) and (G, M),
    with G small: NumPy, ``block`` elements of the (s, g, M) differences at a time."""
    A = np.asarray(A, np.float32)
    I = np.asarray(I, np.float32)
    s, G = A.shape
    M = I.shape[1]
    t = np.full((s, M), np.inf, np.float32)
    step = max(1, block // max(s * M, 1))
    for g in range(0, G, step):
        d = (I[None, g:g + step, :] - A[:, g:g + step, None]).min(axis=1)
        np.minimum(t, d, out=t)
    return np.minimum(np.float32(1.0), np.float32(1.0) + t)
