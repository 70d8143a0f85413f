"""The lattice family: elementwise Łukasiewicz logic (paper eq. 4-5) and the soft lattice
operations on fuzzy extents (eq. 8-9).

Elementwise with broadcasting, so they run as torch's own fused elementwise ops on any device (no
native kernel would beat them), and as NumPy's on NumPy input, without importing torch (the query
path derives concept extents with them); the float64 definitions are in ``ref/lattice.py``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast

import numpy as np

from ._tensor import Kind, accepts_cupy, as_array, as_tensor, common_dtype, same_device
from ._types import Array, ArrayT

if TYPE_CHECKING:
    import torch

_ANY_NDIM = (0, 1, 2, 3)


def _common_np(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    dt = np.float64 if np.float64 in (a.dtype, b.dtype) else np.float32
    return a.astype(dt, copy=False), b.astype(dt, copy=False)


def _elementwise_np(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> tuple[np.ndarray, np.ndarray]:
    a = as_array(a, name_a, ndim=_ANY_NDIM, unit_interval=True)
    b = as_array(b, name_b, ndim=_ANY_NDIM, unit_interval=True)
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"{name_a} of shape {tuple(a.shape)} and {name_b} of shape {tuple(b.shape)} "
                         "do not broadcast") from None
    return _common_np(a, b)


def _elementwise(a: ArrayT, b: Array, name_a: str, name_b: str) -> tuple[torch.Tensor, torch.Tensor, Kind[ArrayT]]:
    import torch
    ta, kind = as_tensor(a, name_a, ndim=_ANY_NDIM, unit_interval=True)
    tb, _ = as_tensor(b, name_b, ndim=_ANY_NDIM, unit_interval=True)
    same_device(name_a, ta, name_b, tb)
    try:
        torch.broadcast_shapes(ta.shape, tb.shape)
    except RuntimeError:
        raise ValueError(f"{name_a} of shape {tuple(ta.shape)} and {name_b} of shape {tuple(tb.shape)} "
                         "do not broadcast") from None
    dt = common_dtype(ta, tb)
    return ta.to(dt), tb.to(dt), kind


@accepts_cupy
def tnorm(a: ArrayT, b: Array) -> ArrayT:
    """Łukasiewicz t-norm a ⊗ b = max(0, a + b − 1) (eq. 4), elementwise with broadcasting.

    Args:
        a: Degrees in [0, 1], any shape of 0 to 3 dimensions; float32 or float64.
        b: Degrees in [0, 1], a shape that broadcasts with ``a``'s; on ``a``'s device.

    Returns:
        The broadcast shape, in the wider of the two dtypes, of ``a``'s kind (NumPy in, NumPy out;
        a 0-d input gives a 0-d array).
    """
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        x, y = _elementwise_np(a, b, "a", "b")
        return np.asarray(np.maximum(x + y - x.dtype.type(1), x.dtype.type(0)))   # 0-d stays an array
    import torch
    ta, tb, kind = _elementwise(a, b, "a", "b")
    return kind.out(torch.clamp_min(ta + tb - 1.0, 0.0))


@accepts_cupy
def residuum(a: ArrayT, b: Array) -> ArrayT:
    """Łukasiewicz residuum a → b = min(1, 1 − a + b) (eq. 5), elementwise with broadcasting.

    Args:
        a: Degrees in [0, 1], any shape of 0 to 3 dimensions; float32 or float64.
        b: Degrees in [0, 1], a shape that broadcasts with ``a``'s; on ``a``'s device.

    Returns:
        The broadcast shape, in the wider of the two dtypes, of ``a``'s kind.
    """
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        x, y = _elementwise_np(a, b, "a", "b")
        return np.asarray(np.minimum(x.dtype.type(1) - x + y, x.dtype.type(1)))
    import torch
    ta, tb, kind = _elementwise(a, b, "a", "b")
    return kind.out(torch.clamp_max(1.0 - ta + tb, 1.0))


@accepts_cupy
def neg(a: ArrayT) -> ArrayT:
    """Involutive negation ¬a = 1 − a, elementwise.

    Args:
        a: Degrees in [0, 1], any shape of 0 to 3 dimensions; float32 or float64.

    Returns:
        ``a``'s shape, dtype and kind.
    """
    if isinstance(a, np.ndarray):
        x = as_array(a, "a", ndim=_ANY_NDIM, unit_interval=True)
        return np.asarray(x.dtype.type(1) - x)
    ta, kind = as_tensor(a, "a", ndim=_ANY_NDIM, unit_interval=True)
    return kind.out(1.0 - ta)


def _pair_np(A1: np.ndarray, A2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = as_array(A1, "A1", ndim=(1, 2), unit_interval=True)
    b = as_array(A2, "A2", ndim=(1, 2), unit_interval=True)
    if a.shape != b.shape:
        raise ValueError(f"A1 and A2 must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return _common_np(a, b)


def _pair(A1: ArrayT, A2: Array) -> tuple[torch.Tensor, torch.Tensor, Kind[ArrayT]]:
    t1, kind = as_tensor(A1, "A1", ndim=(1, 2), unit_interval=True)
    t2, _ = as_tensor(A2, "A2", ndim=(1, 2), unit_interval=True)
    same_device("A1", t1, "A2", t2)
    if t1.shape != t2.shape:
        raise ValueError(f"A1 and A2 must have the same shape, got {tuple(t1.shape)} and {tuple(t2.shape)}")
    dt = common_dtype(t1, t2)
    return t1.to(dt), t2.to(dt), kind


def _extent_op(A1: ArrayT, A2: Array, op: str) -> ArrayT:
    """``np.<op>`` / ``torch.<op>`` of two extents of one shape (NumPy stays NumPy, torch stays torch)."""
    if isinstance(A1, np.ndarray) and isinstance(A2, np.ndarray):
        return cast(ArrayT, getattr(np, op)(*_pair_np(A1, A2)))
    import torch
    t1, t2, kind = _pair(A1, A2)
    return kind.out(getattr(torch, op)(t1, t2))


@accepts_cupy
def soft_join(A1: ArrayT, A2: Array) -> ArrayT:
    """Soft join (bridge) extent max(A1(g), A2(g)) (eq. 8 before closure).

    Args:
        A1: Fuzzy extents, ``(G,)`` or ``(s, G)`` degrees in [0, 1]; float32 or float64.
        A2: Fuzzy extents of ``A1``'s shape, on its device.

    Returns:
        ``A1``'s shape, in the wider of the two dtypes, of ``A1``'s kind.
    """
    return _extent_op(A1, A2, "maximum")


@accepts_cupy
def soft_meet(A1: ArrayT, A2: Array) -> ArrayT:
    """Soft meet extent min(A1(g), A2(g)) (eq. 9).

    Args:
        A1: Fuzzy extents, ``(G,)`` or ``(s, G)`` degrees in [0, 1]; float32 or float64.
        A2: Fuzzy extents of ``A1``'s shape, on its device.

    Returns:
        ``A1``'s shape, in the wider of the two dtypes, of ``A1``'s kind.
    """
    return _extent_op(A1, A2, "minimum")
