"""The semiring family: fuzzy Galois connection (paper eq. 6-7), fuzzy routing (eq. 16) and
meet cardinality, each a semiring product over an incidence."""
import numpy as np

from ._np import f64


def luk_up(A, I):
    """A↑(m) = min_g (A(g) → I(g, m))  (eq. 6).

    A: (s, G) fuzzy sets of objects (or (G,)); I: (G, M) incidence. Returns (s, M) (or (M,)).
    Computed as min(1, 1 + min_g (I(g, m) − A(g))), the association every fast path uses, so
    results agree exactly in float64. The infimum over an empty set is 1.
    """
    A, I = f64(A), f64(I)
    vec = A.ndim == 1
    A2 = A[None, :] if vec else A
    if A2.shape[1] == 0:
        out = np.ones((A2.shape[0], I.shape[1]))
    else:
        t = (I[None, :, :] - A2[:, :, None]).min(axis=1)  # (s, M)
        out = np.minimum(1.0, 1.0 + t)
    return out[0] if vec else out


def luk_down(B, I):
    """B↓(g) = min_m (B(m) → I(g, m))  (eq. 7). B: (s, M) or (M,); returns (s, G) or (G,)."""
    B, I = f64(B), f64(I)
    vec = B.ndim == 1
    B2 = B[None, :] if vec else B
    if B2.shape[1] == 0:
        out = np.ones((B2.shape[0], I.shape[0]))
    else:
        t = (I[None, :, :] - B2[:, None, :]).min(axis=2)  # (s, G)
        out = np.minimum(1.0, 1.0 + t)
    return out[0] if vec else out


def luk_closure(A, I):
    """(A↑↓, A↑): the extent closure of A and its intent."""
    up = luk_up(A, I)
    return luk_down(up, I), up


def fuzzy_route(mu, I):
    """score(q, c) = max_v max(0, μ(q, v) + I(c, v) − 1): the best Łukasiewicz conjunction of
    query-to-node activation and chunk-to-node membership. mu: (Q, V), I: (C, V) -> (Q, C).
    Computed as max(0, max_v(μ + I) − 1); an empty V gives 0.
    """
    mu, I = f64(mu), f64(I)
    if mu.shape[1] == 0:
        return np.zeros((mu.shape[0], I.shape[0]))
    t = (mu[:, None, :] + I[None, :, :]).max(axis=2)
    return np.maximum(0.0, t - 1.0)


def meet_cardinality(A, B):
    """|A_i ∧ B_j| = Σ_g min(A_i(g), B_j(g)) for all pairs. A: (p, G), B: (q, G) -> (p, q)."""
    A, B = f64(A), f64(B)
    out = np.zeros((A.shape[0], B.shape[0]))
    for i in range(A.shape[0]):
        out[i] = np.minimum(A[i][None, :], B).sum(axis=1)
    return out
