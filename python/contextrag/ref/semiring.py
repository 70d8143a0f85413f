"""Łukasiewicz logic (paper eq. 4-7): t-norm, residuum, negation, fuzzy Galois connection."""
import numpy as np

from ._np import f64


def tnorm(a, b):
    """a ⊗ b = max(0, a + b − 1)  (eq. 4)."""
    return np.maximum(0.0, f64(a) + f64(b) - 1.0)


def residuum(a, b):
    """a → b = min(1, 1 − a + b)  (eq. 5)."""
    return np.minimum(1.0, 1.0 - f64(a) + f64(b))


def neg(a):
    """¬a = a → 0 = 1 − a (involutive)."""
    return 1.0 - f64(a)


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
