"""Fuzzy routing (paper eq. 16): a max-plus product clamped at zero."""
from __future__ import annotations

import torch

from .. import ref
from ._backend import native, select
from ._registry import IMPLS, from_ref, register
from ._tensor import as_tensor, common_dtype, same_device

_BLOCK_ELEMS = 1 << 22


def fuzzy_route(mu, I, *, backend: str | None = None):
    """score(q, c) = max_v max(0, μ(q, v) + I(c, v) − 1).

    mu: (Q, V) query-to-node activations (or (V,)); I: (C, V) chunk-to-node memberships.
    Returns (Q, C) (or (C,)).
    """
    tm, kind = as_tensor(mu, "mu", ndim=(1, 2), unit_interval=True)
    tI, _ = as_tensor(I, "I", ndim=(2,), unit_interval=True)
    same_device("mu", tm, "I", tI)
    vec = tm.dim() == 1
    m2 = tm[None, :] if vec else tm
    if m2.shape[1] != tI.shape[1]:
        raise ValueError(f"mu has {m2.shape[1]} nodes but I has {tI.shape[1]} columns (I must be chunks × nodes)")
    dt = common_dtype(m2, tI)
    _, impl = select("fuzzy_route", m2.device, backend, IMPLS["fuzzy_route"])
    out = impl(m2.to(dt), tI.to(dt))
    return kind.out(out[0] if vec else out)


register("fuzzy_route", "ref")(from_ref(ref.fuzzy_route))


@register("fuzzy_route", "cpu")
def _cpu_fuzzy_route(mu, I):
    C = native()
    if C is not None and hasattr(C, "fuzzy_route"):
        return torch.from_numpy(C.fuzzy_route(mu.contiguous().numpy(), I.contiguous().numpy()))
    Q, V = mu.shape
    n = I.shape[0]
    out = torch.zeros((Q, n), dtype=mu.dtype)
    if V == 0:
        return out
    step = max(1, _BLOCK_ELEMS // max(n * V, 1))
    for i in range(0, Q, step):
        t = (mu[i:i + step, None, :] + I[None, :, :]).amax(dim=2)
        out[i:i + step] = torch.clamp_min(t - 1.0, 0.0)
    return out
