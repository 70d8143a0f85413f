"""Float64 reference of one spreading hop over a fuzzy incidence (docs/MULTIHOP.md).

For each query q, with seed chunks s of degrees ρ(q, s) and query activations μ(q, a):

    hop(q, c) = max( max_a μ(q,a) ⊗ I(c,a),
                     max_{s : c = s or doc(c) ≠ doc(s)} max_a ρ(q,s) ⊗ I(s,a) ⊗ I(c,a) )

with the Łukasiewicz t-norm a ⊗ b = max(0, a + b − 1) (associative, so the seed path is the two
max-plus steps chunks → attributes → chunks). The second condition is the no-sibling rule: a seed
spreads to itself and to chunks of other documents, never to the other chunks of its own document.
Written densely and for clarity.
"""
import numpy as np

from ._np import f64


def _luk(a, b):
    return np.maximum(a + b - 1.0, 0.0)


def spread_hop(I, seeds, seed_deg, mu=None, doc=None):
    """I: (n, M) incidence in [0, 1]; seeds: (Q, S) chunk indices (−1 = none); seed_deg: (Q, S);
    mu: (Q, M) or None; doc: (n,) document codes or None (no sibling rule). Returns (Q, n) float64."""
    I = f64(I)
    seeds = np.asarray(seeds, dtype=np.int64)
    deg = f64(seed_deg)
    n = I.shape[0]
    out = np.zeros((seeds.shape[0], n))
    for q in range(seeds.shape[0]):
        if mu is not None:
            m = f64(mu)[q]
            out[q] = _luk(m[None, :], I).max(axis=1, initial=0.0)
        for s, r in zip(seeds[q], deg[q]):
            if s < 0:
                continue
            act = _luk(r, I[s])
            h = _luk(act[None, :], I).max(axis=1, initial=0.0)
            if doc is not None:
                sib = np.asarray(doc) == np.asarray(doc)[s]
                sib[s] = False
                h[sib] = 0.0
            out[q] = np.maximum(out[q], h)
    return out
