"""The direct NumPy way to write each semiring product (blocked broadcasting, so memory stays
bounded): the peer a user would write without contextrag."""
from __future__ import annotations

import numpy as np


def numpy_luk_up(A, I, gblock=4096, sblock=8):
    """min(1, 1 + min_g (I[g, m] − A[s, g])) (eq. 6)."""
    s, G = A.shape
    out = np.full((s, I.shape[1]), np.inf, dtype=A.dtype)
    for i in range(0, s, sblock):
        for g in range(0, G, gblock):
            t = (I[None, g:g + gblock, :] - A[i:i + sblock, g:g + gblock, None]).min(axis=1)
            np.minimum(out[i:i + sblock], t, out=out[i:i + sblock])
    return np.minimum(1.0, 1.0 + out)


def numpy_meet(A, B, gblock=4096, pblock=8):
    """Σ_g min(A[i, g], B[j, g])."""
    p, G = A.shape
    out = np.zeros((p, B.shape[0]), dtype=np.float64)
    for i in range(0, p, pblock):
        for g in range(0, G, gblock):
            out[i:i + pblock] += np.minimum(A[i:i + pblock, None, g:g + gblock], B[None, :, g:g + gblock]).sum(axis=2)
    return out


def numpy_route(mu, I, cblock=2048):
    """max(0, max_v (μ[q, v] + I[c, v]) − 1) (eq. 16)."""
    out = np.empty((mu.shape[0], I.shape[0]), dtype=mu.dtype)
    for c in range(0, I.shape[0], cblock):
        out[:, c:c + cblock] = (mu[:, None, :] + I[None, c:c + cblock, :]).max(axis=2)
    return np.maximum(0.0, out - 1.0)
