"""Fuzzy routing (paper eq. 16): a max-plus product clamped at zero."""
from __future__ import annotations

import torch

from .. import ref
from ._backend import native, select
from ._registry import IMPLS, from_ref, register
from ._tensor import CSR, as_csr, as_tensor, common_dtype, is_sparse, same_device

_BLOCK_ELEMS = 1 << 22


def fuzzy_route(mu, I, *, backend: str | None = None):
    """score(q, c) = max_v max(0, μ(q, v) + I(c, v) − 1).

    mu: (Q, V) query-to-node activations (or (V,)); I: (C, V) chunk-to-node memberships, dense or
    sparse (scipy.sparse or torch sparse; a missing entry is 0 and cannot raise a score above 0).
    Returns (Q, C) (or (C,)), dense, of mu's kind.
    """
    tm, kind = as_tensor(mu, "mu", ndim=(1, 2), unit_interval=True)
    vec = tm.dim() == 1
    m2 = tm[None, :] if vec else tm
    if is_sparse(I):
        csr = as_csr(I, "I")
        n_v = csr.shape[1]
        dt = common_dtype(m2, torch.empty(0, dtype=csr.dtype))
        tI, key = csr.astype(dt), "fuzzy_route_csr"
    else:
        tI, _ = as_tensor(I, "I", ndim=(2,), unit_interval=True)
        same_device("mu", tm, "I", tI)
        n_v = tI.shape[1]
        dt = common_dtype(m2, tI)
        tI, key = tI.to(dt), "fuzzy_route"
    if m2.shape[1] != n_v:
        raise ValueError(f"mu has {m2.shape[1]} nodes but I has {n_v} columns (I must be chunks × nodes)")
    _, impl = select("fuzzy_route", m2.device, backend, IMPLS[key])
    out = impl(m2.to(dt), tI)
    return kind.out(out[0] if vec else out)


register("fuzzy_route", "ref")(from_ref(ref.fuzzy_route))


@register("fuzzy_route_csr", "ref")
def _ref_fuzzy_route_csr(mu, csr: CSR):
    return from_ref(ref.fuzzy_route)(mu, csr.to_dense(mu.dtype))


def _torch_route(mu, I):
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


@register("fuzzy_route", "cpu")
def _cpu_fuzzy_route(mu, I):
    C = native()
    if C is not None and hasattr(C, "semiring"):
        # max_v (μ[q, v] + Iᵀ[v, c]): the reduction axis v becomes the rows of the second operand.
        It = I.detach().t().contiguous().numpy()
        return torch.from_numpy(C.semiring("route", mu.detach().contiguous().numpy(), It))
    return _torch_route(mu, I)


@register("fuzzy_route_csr", "cpu")
def _cpu_fuzzy_route_csr(mu, csr: CSR):
    C = native()
    if C is None or not hasattr(C, "sparse_semiring"):
        return _torch_route(mu, csr.to_dense(mu.dtype))
    out = C.sparse_semiring("route", csr.indptr, csr.indices, csr.data, mu.detach().contiguous().numpy())
    return torch.from_numpy(out).t().contiguous()
