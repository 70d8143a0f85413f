"""Launch plumbing shared by the CUDA registrations of every op family (``contextrag._C.cuda``).

The extension is not built against torch: its functions take raw device pointers, shapes, dtype
codes and a stream handle. Importing this module does not import the extension; :func:`cu` does,
on the first CUDA call, so ``import contextrag.ops`` works on machines without it.
"""
from __future__ import annotations

import contextlib
import functools

import torch


@functools.lru_cache(maxsize=None)
def cu():
    """The CUDA submodule of the extension."""
    from ._backend import native
    C = native()
    if C is None:
        raise RuntimeError("contextrag._C failed to import")
    if not getattr(C, "cuda_compiled", lambda: False)():
        raise RuntimeError("contextrag._C was built without CUDA")
    return C.cuda


# dtype codes of csrc/cuda/launch.h (enum DType)
DTYPE_CODE = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}


def stream(t: torch.Tensor) -> int:
    """t's current CUDA stream as an integer handle (0, the legacy default stream, for host tensors)."""
    return torch.cuda.current_stream(t.device).cuda_stream if t.device.type == "cuda" else 0


def ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


def acc_dtype(t: torch.Tensor) -> torch.dtype:
    """The kernels accumulate float64 inputs in float64, every other dtype in float32."""
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def guard(t: torch.Tensor):
    """Make t's device current (tensors on cuda:1 launch on cuda:1); the CUDA launchers also switch
    to the device that owns their output pointer."""
    return torch.cuda.device(t.device) if t.device.type == "cuda" else contextlib.nullcontext()


def centroids(X: torch.Tensor, C: torch.Tensor):
    """C in X's dtype (contiguous), its squared row norms in the accumulation dtype, and that dtype."""
    acc = acc_dtype(X)
    Cd = C.to(X.dtype).contiguous()
    cn = (Cd.to(acc) ** 2).sum(dim=1).contiguous()
    return Cd, cn, acc
