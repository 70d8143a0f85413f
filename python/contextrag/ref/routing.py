"""Fuzzy routing (paper eq. 16)."""
import numpy as np

from ._np import f64


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
