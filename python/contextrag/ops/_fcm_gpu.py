"""Triton and CUDA registrations of ``fcm_memberships``; the API and the ref/cpu entries are in
``ops/fcm.py``. Kernels: ``kernels/fcm.py`` (Triton), ``csrc/cuda/fcm.cu`` (CUDA).

Importing this module imports neither triton nor the CUDA extension (see ``ops/_cuda.py``).
"""
from __future__ import annotations

import contextlib

import torch

from . import _cuda
from ._cuda import DTYPE_CODE, centroids, guard, ptr, stream
from ._registry import register


def _topk(U, k):
    from .fcm import _topk_renorm
    return _topk_renorm(U, k)


@register("fcm_memberships", "triton")
def _triton_fcm(X, C, m, k):
    from triton.runtime.errors import OutOfResources

    from .fcm import _torch_memberships
    from contextrag.kernels import fcm
    # fp64 on a GPU: fp64 exp2/log2 lowering in Triton is unverified there, so use the torch path instead;
    # more centres than this device's shared memory stages: the torch path too
    if C.shape[0] > fcm.max_centres(X.device, X.dtype) or (X.dtype == torch.float64 and X.device.type == "cuda"):
        return _torch_memberships(X, C, m, k)
    try:
        U = fcm.memberships(X, C, m)
    except OutOfResources:  # every plan failed to compile (recorded in kernels.fcm.FALLBACKS)
        return _torch_memberships(X, C, m, k)
    return _topk(U.to(C.dtype), k)


_FCM_LIMITS: dict = {}


def cuda_fcm_max_centres(device: torch.device, dtype: torch.dtype) -> int:
    """Largest c the CUDA FCM kernel takes on ``device`` (its shared-memory opt-in limit, queried
    once per device and dtype); beyond it the wrapper uses the torch path."""
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    key = (str(device), dtype)
    if key not in _FCM_LIMITS:
        ctx = torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
        with ctx:
            _FCM_LIMITS[key] = int(_cuda.cu().fcm_max_centres(DTYPE_CODE[dtype]))
    return _FCM_LIMITS[key]


@register("fcm_memberships", "cuda")
def _cuda_fcm(X, C, m, k):
    cu = _cuda.cu()
    if C.shape[0] > cuda_fcm_max_centres(X.device, X.dtype):
        from .fcm import _torch_memberships
        return _torch_memberships(X, C, m, k)
    X = X.contiguous()
    n, d = X.shape
    Cd, cn, acc = centroids(X, C)
    U = torch.empty((n, C.shape[0]), dtype=acc, device=X.device)
    if n:
        snap = 8 * torch.finfo(acc).eps
        with guard(X):
            cu.fcm_memberships(DTYPE_CODE[X.dtype], ptr(X), ptr(Cd), ptr(cn), ptr(U), n, int(C.shape[0]), d,
                               1.0 / (float(m) - 1.0), snap, stream(X))
    return _topk(U.to(C.dtype), k)

