"""K-means and residual-quantization k-means (paper §3.4, eq. 10-12), float64 reference."""
import numpy as np

from ._np import f64

SPLIT_EPS = 1.0 / 1024.0  # FAISS's perturbation when an empty cluster takes half of a big one


def sq_distances(X, C):
    """‖x − c‖² for all pairs, computed directly (no GEMM cancellation)."""
    X, C = f64(X), f64(C)
    return ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=2)


def kmeans_assign(X, C):
    """(labels, squared distances) of each row of X to its nearest centroid; ties -> lowest index."""
    X, C = f64(X), f64(C)
    if X.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    D = sq_distances(X, C)
    labels = D.argmin(axis=1).astype(np.int64)
    return labels, D[np.arange(X.shape[0]), labels]


PP_POINTS_PER_CENTROID = 64   # as ops.kmeans: the seeding subsample's size per centre


def kmeans_plus_plus(X, k, seed=0, points_per_centroid=PP_POINTS_PER_CENTROID):
    """Greedy k-means++ seeding (Arthur & Vassilvitskii; greedy as scikit-learn: 2 + ⌊ln k⌋ candidates
    drawn ∝ D², the one that lowers the potential most is kept, first on ties) on a seeded uniform
    subsample of at most k·points_per_centroid rows, with a NumPy generator: the subsample, the
    first row, then all (k − 1, candidates) uniform draws, each mapped by inverse CDF (the first row
    whose cumulative D² exceeds u·ΣD²)."""
    X = f64(X)
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    m = min(n, k * max(1, points_per_centroid))
    S = X[np.sort(rng.choice(n, size=m, replace=False))] if m < n else X
    trials = 2 + int(np.log(k))
    first = int(rng.integers(m))
    U = rng.random((k - 1, trials))      # every draw up front
    C = np.empty((k, X.shape[1]))
    C[0] = S[first]
    d2 = ((S - C[0]) ** 2).sum(axis=1)
    for j in range(1, k):
        cum = np.cumsum(d2)
        if not cum[-1] > 0:   # every point on a chosen centre: the draw picks a row uniformly
            cand = (U[j - 1] * m).astype(np.int64)
        else:
            cand = np.searchsorted(cum, U[j - 1] * cum[-1], side="right")
        cand = np.minimum(cand, m - 1)
        D = np.minimum(((S[:, None, :] - S[cand][None, :, :]) ** 2).sum(axis=2), d2[:, None])
        best = int(D.sum(axis=0).argmin())
        C[j] = S[cand[best]]
        d2 = D[:, best]
    return C


def split_empty(C, counts):
    """Give each empty cluster half of the largest cluster (FAISS's perturbation split).

    FAISS draws the cluster to split at random; we take the largest (lowest index on ties) so that
    every backend makes the same choice. Returns the number of splits.
    """
    k, d = C.shape
    sign = np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    n_split = 0
    for ci in range(k):
        if counts[ci] > 0:
            continue
        cj = int(np.argmax(counts))
        if counts[cj] <= 1:
            break
        C[ci] = C[cj] * (1.0 + sign * SPLIT_EPS)
        C[cj] = C[cj] * (1.0 - sign * SPLIT_EPS)
        counts[ci] = counts[cj] // 2
        counts[cj] -= counts[ci]
        n_split += 1
    return n_split


def lloyd_step(X, C):
    """One Lloyd iteration: assign, recompute means, split empties. Returns (C_new, labels, inertia)."""
    X, C = f64(X), f64(C)
    labels, d2 = kmeans_assign(X, C)
    k = C.shape[0]
    counts = np.bincount(labels, minlength=k).astype(np.int64)
    sums = np.zeros_like(C)
    np.add.at(sums, labels, X)
    C_new = C.copy()
    nz = counts > 0
    C_new[nz] = sums[nz] / counts[nz, None]
    split_empty(C_new, counts)
    return C_new, labels, float(d2.sum())


def kmeans_fit(X, k, n_iter=25, tol=1e-4, seed=0, init="k-means++"):
    """Lloyd's algorithm. Returns (centroids, labels, inertia, iterations run).

    Stops when the relative decrease of inertia falls below ``tol``; labels and inertia are those
    of a final assignment to the returned centroids.
    """
    X = f64(X)
    if isinstance(init, str):
        if init == "k-means++":
            C = kmeans_plus_plus(X, k, seed)
        else:
            rng = np.random.default_rng(seed)
            C = X[rng.choice(X.shape[0], size=k, replace=False)].copy()
    else:
        C = f64(init).copy()
    prev = np.inf
    it = 0
    for it in range(1, n_iter + 1):
        C, _, inertia = lloyd_step(X, C)
        if prev < np.inf and prev - inertia <= tol * max(prev, 1e-300):
            break
        prev = inertia
    labels, d2 = kmeans_assign(X, C)
    return C, labels, float(d2.sum()), it


def rq_kmeans(X, sizes=(96, 24, 12), n_iter=25, tol=1e-4, seed=0, inits=None):
    """Residual-quantization k-means: level ℓ clusters the residual of level ℓ−1 (eq. 10-12).

    Returns (codebooks, codes (n, L), final residual). ``inits`` optionally gives each level's
    initial centroids.
    """
    R = f64(X).copy()
    books, codes = [], []
    for lvl, k in enumerate(sizes):
        init = "k-means++" if inits is None else inits[lvl]
        C, labels, _, _ = kmeans_fit(R, k, n_iter=n_iter, tol=tol, seed=seed + lvl, init=init)
        books.append(C)
        codes.append(labels)
        R = R - C[labels]
    codes = np.stack(codes, axis=1) if codes else np.zeros((R.shape[0], 0), dtype=np.int64)
    return books, codes, R
