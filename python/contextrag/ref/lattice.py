"""The lattice family: Łukasiewicz logic (paper eq. 4-5) and the soft lattice operations on fuzzy
extents (eq. 8-9), all elementwise."""
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


def soft_join(A1, A2):
    """Fuzzy union max(A1, A2): the soft join (bridge) extent, eq. 8 before closure."""
    return np.maximum(f64(A1), f64(A2))


def soft_meet(A1, A2):
    """Fuzzy intersection min(A1, A2): the soft meet extent, eq. 9."""
    return np.minimum(f64(A1), f64(A2))
