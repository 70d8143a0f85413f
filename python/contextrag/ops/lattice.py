"""The lattice family: elementwise Łukasiewicz logic (paper eq. 4-5) and the soft lattice
operations on fuzzy extents (eq. 8-9).

Elementwise with broadcasting, so they run as torch's own fused elementwise ops on any device (no
native kernel would beat them); the float64 definitions are in ``ref/lattice.py``.
"""
from __future__ import annotations

import torch

from ._tensor import accepts_cupy, as_tensor, common_dtype, same_device


def _elementwise(a, b, name_a, name_b):
    ta, kind = as_tensor(a, name_a, ndim=(0, 1, 2, 3), unit_interval=True)
    tb, _ = as_tensor(b, name_b, ndim=(0, 1, 2, 3), unit_interval=True)
    same_device(name_a, ta, name_b, tb)
    try:
        torch.broadcast_shapes(ta.shape, tb.shape)
    except RuntimeError:
        raise ValueError(f"{name_a} of shape {tuple(ta.shape)} and {name_b} of shape {tuple(tb.shape)} "
                         "do not broadcast") from None
    dt = common_dtype(ta, tb)
    return ta.to(dt), tb.to(dt), kind


@accepts_cupy
def tnorm(a, b):
    """Łukasiewicz t-norm a ⊗ b = max(0, a + b − 1) (eq. 4), elementwise with broadcasting."""
    ta, tb, kind = _elementwise(a, b, "a", "b")
    return kind.out(torch.clamp_min(ta + tb - 1.0, 0.0))


@accepts_cupy
def residuum(a, b):
    """Łukasiewicz residuum a → b = min(1, 1 − a + b) (eq. 5), elementwise with broadcasting."""
    ta, tb, kind = _elementwise(a, b, "a", "b")
    return kind.out(torch.clamp_max(1.0 - ta + tb, 1.0))


@accepts_cupy
def neg(a):
    """Involutive negation ¬a = 1 − a."""
    ta, kind = as_tensor(a, "a", ndim=(0, 1, 2, 3), unit_interval=True)
    return kind.out(1.0 - ta)


def _pair(A1, A2):
    t1, kind = as_tensor(A1, "A1", ndim=(1, 2), unit_interval=True)
    t2, _ = as_tensor(A2, "A2", ndim=(1, 2), unit_interval=True)
    same_device("A1", t1, "A2", t2)
    if t1.shape != t2.shape:
        raise ValueError(f"A1 and A2 must have the same shape, got {tuple(t1.shape)} and {tuple(t2.shape)}")
    dt = common_dtype(t1, t2)
    return t1.to(dt), t2.to(dt), kind


@accepts_cupy
def soft_join(A1, A2):
    """Soft join (bridge) extent max(A1(g), A2(g)) (eq. 8 before closure)."""
    t1, t2, kind = _pair(A1, A2)
    return kind.out(torch.maximum(t1, t2))


@accepts_cupy
def soft_meet(A1, A2):
    """Soft meet extent min(A1(g), A2(g)) (eq. 9)."""
    t1, t2, kind = _pair(A1, A2)
    return kind.out(torch.minimum(t1, t2))
