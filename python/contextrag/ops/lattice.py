"""Soft lattice operations (paper eq. 8-9) and meet cardinality (a min-sum product)."""
from __future__ import annotations

import torch

from .. import ref
from ._backend import native, select
from ._registry import IMPLS, from_ref, register
from ._tensor import as_tensor, common_dtype, same_device

_BLOCK_ELEMS = 1 << 22


def _pair(A1, A2):
    t1, kind = as_tensor(A1, "A1", ndim=(1, 2), unit_interval=True)
    t2, _ = as_tensor(A2, "A2", ndim=(1, 2), unit_interval=True)
    same_device("A1", t1, "A2", t2)
    if t1.shape != t2.shape:
        raise ValueError(f"A1 and A2 must have the same shape, got {tuple(t1.shape)} and {tuple(t2.shape)}")
    dt = common_dtype(t1, t2)
    return t1.to(dt), t2.to(dt), kind


def soft_join(A1, A2):
    """Soft join (bridge) extent max(A1(g), A2(g)) (eq. 8 before closure)."""
    t1, t2, kind = _pair(A1, A2)
    return kind.out(torch.maximum(t1, t2))


def soft_meet(A1, A2):
    """Soft meet extent min(A1(g), A2(g)) (eq. 9)."""
    t1, t2, kind = _pair(A1, A2)
    return kind.out(torch.minimum(t1, t2))


def meet_cardinality(A, B, *, backend: str | None = None):
    """|A_i ∧ B_j| = Σ_g min(A_i(g), B_j(g)) for every pair of rows. A: (p, G), B: (q, G) -> (p, q)."""
    tA, kind = as_tensor(A, "A", ndim=(2,), unit_interval=True)
    tB, _ = as_tensor(B, "B", ndim=(2,), unit_interval=True)
    same_device("A", tA, "B", tB)
    if tA.shape[1] != tB.shape[1]:
        raise ValueError(f"A and B must have the same number of objects (columns), "
                         f"got {tA.shape[1]} and {tB.shape[1]}")
    dt = common_dtype(tA, tB)
    _, impl = select("meet_cardinality", tA.device, backend, IMPLS["meet_cardinality"])
    return kind.out(impl(tA.to(dt), tB.to(dt)))


register("meet_cardinality", "ref")(from_ref(ref.meet_cardinality))


@register("meet_cardinality", "cpu")
def _cpu_meet_cardinality(A, B):
    C = native()
    A = A.detach().contiguous()
    B = B.detach().contiguous()
    if C is not None and hasattr(C, "meet_rows"):
        # lanes along g over A and B as given. The broadcast semiring kernel needs Bᵀ (a fresh copy as
        # large as B); even with its zero-skipping it was slower up to 83% empty 6-row blocks of A and
        # within about 10% either way beyond (bench/results/cpu_semiring.json, "meet_cardinality_sparse"),
        # so one kernel serves every density.
        return torch.from_numpy(C.meet_rows(A.numpy(), B.numpy()))
    p, G = A.shape
    q = B.shape[0]
    out = torch.zeros((p, q), dtype=A.dtype)
    if G == 0:
        return out
    step = max(1, _BLOCK_ELEMS // max(q * G, 1))
    for i in range(0, p, step):
        out[i:i + step] = torch.minimum(A[i:i + step, None, :], B[None, :, :]).sum(dim=2)
    return out
