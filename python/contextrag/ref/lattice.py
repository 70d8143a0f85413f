"""Soft lattice operations on fuzzy extents (paper eq. 8-9) and meet cardinality."""
import numpy as np

from ._np import f64


def soft_join(A1, A2):
    """Fuzzy union max(A1, A2): the soft join (bridge) extent, eq. 8 before closure."""
    return np.maximum(f64(A1), f64(A2))


def soft_meet(A1, A2):
    """Fuzzy intersection min(A1, A2): the soft meet extent, eq. 9."""
    return np.minimum(f64(A1), f64(A2))


def meet_cardinality(A, B):
    """|A_i ∧ B_j| = Σ_g min(A_i(g), B_j(g)) for all pairs. A: (p, G), B: (q, G) -> (p, q)."""
    A, B = f64(A), f64(B)
    out = np.zeros((A.shape[0], B.shape[0]))
    for i in range(A.shape[0]):
        out[i] = np.minimum(A[i][None, :], B).sum(axis=1)
    return out
