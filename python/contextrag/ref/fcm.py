"""Fuzzy c-means (Bezdek), float64 reference."""
import numpy as np

from ._np import f64
from .kmeans import sq_distances


def fcm_memberships(X, C, m=2.0, top_k=None):
    """u_ij = 1 / Σ_k (d_ij / d_ik)^(2/(m−1)).

    Computed from squared distances as (D_min/D_ij)^p / Σ_k (D_min/D_ik)^p with p = 1/(m−1),
    which never overflows. A point on a centre (D = 0) gets a one-hot row on the first such centre.
    With ``top_k``, all but the k largest memberships of a row are zeroed and the row renormalised.
    """
    X, C = f64(X), f64(C)
    n, c = X.shape[0], C.shape[0]
    if n == 0:
        return np.zeros((0, c))
    D = sq_distances(X, C)
    p = 1.0 / (m - 1.0)
    U = np.zeros((n, c))
    dmin = D.min(axis=1)
    on = dmin <= 0.0
    U[np.where(on)[0], D[on].argmin(axis=1)] = 1.0
    off = ~on
    if off.any():
        W = (dmin[off, None] / D[off]) ** p
        U[off] = W / W.sum(axis=1, keepdims=True)
    if top_k is not None and top_k < c:
        keep = np.argsort(-U, axis=1, kind="stable")[:, :top_k]
        mask = np.zeros_like(U, dtype=bool)
        np.put_along_axis(mask, keep, True, axis=1)
        U = np.where(mask, U, 0.0)
        U /= U.sum(axis=1, keepdims=True)
    return U


def partition_coefficient(U):
    """Bezdek's fuzzy partition coefficient Σ u² / n (1 = crisp, 1/c = uniform)."""
    U = f64(U)
    return float((U ** 2).sum() / max(U.shape[0], 1))


def fcm_fit(X, c, m=2.0, n_iter=100, tol=1e-5, seed=0, init=None):
    """Alternate centres = Σ u^m x / Σ u^m and memberships until max |ΔU| < tol.

    ``init`` is an initial centre matrix; by default centres start at c distinct random points.
    Returns (centres, U, iterations, objective Σ u^m d², partition coefficient).
    """
    X = f64(X)
    if init is None:
        rng = np.random.default_rng(seed)
        C = X[rng.choice(X.shape[0], size=c, replace=False)].copy()
    else:
        C = f64(init).copy()
    U = fcm_memberships(X, C, m)
    it = 0
    for it in range(1, n_iter + 1):
        W = U ** m
        C = (W.T @ X) / np.maximum(W.sum(axis=0), 1e-300)[:, None]
        U_new = fcm_memberships(X, C, m)
        delta = np.abs(U_new - U).max() if U.size else 0.0
        U = U_new
        if delta < tol:
            break
    J = float(((U ** m) * sq_distances(X, C)).sum())
    return C, U, it, J, partition_coefficient(U)
