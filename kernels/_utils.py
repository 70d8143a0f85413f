"""Helpers every Triton kernel module shares: interpreter detection, the device's SM count, and
the launch wrapper (device pinning, the tf32x3 → IEEE precision fallback, the compile log).

One place for each, so that a kernel module holds its kernel and its launch arithmetic only.
"""
from __future__ import annotations

import os

import torch

# Every switch from tf32x3 to IEEE fp32 this process made: (kernel, error). The GPU check asserts it
# stays empty, since a fallback changes what every later fp32 dot measures.
PRECISION_FALLBACKS: list = []
_PREC_FALLBACK: dict = {}
# When a list, every compiled launch appends (kernel, constexprs, registers, spills, shared bytes):
# the GPU check's compile sweep reads it. None (the default) records nothing.
COMPILE_LOG: list | None = None


def interpret() -> bool:
    """True when Triton runs kernels in its CPU interpreter (TRITON_INTERPRET=1 before import)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def sm_count(device) -> int:
    """Streaming multiprocessors of a CUDA device (1 elsewhere: the interpreter runs one program at a time)."""
    if getattr(device, "type", "cpu") == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def fp32_precision(device) -> str:
    """How tl.dot multiplies fp32 tiles: 'ieee' under the interpreter; on a GPU 'tf32x3' (three
    TF32 tensor-core passes, about fp32 accuracy) unless torch allows plain TF32
    (``torch.backends.cuda.matmul.allow_tf32``), the same switch torch's own matmuls obey."""
    if interpret() or getattr(device, "type", "cuda") != "cuda":
        return "ieee"
    if torch.backends.cuda.matmul.allow_tf32:
        return "tf32"
    return _PREC_FALLBACK.get("tf32x3", "tf32x3")


def is_precision_error(e: BaseException) -> bool:
    """A compile error about the dot's input precision (this Triton or GPU has no tf32x3), and
    nothing else: out-of-resources, launch failures and CUDA errors must surface as they are."""
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import OutOfResources
    if isinstance(e, OutOfResources):
        return False
    if not isinstance(e, (CompilationError, ValueError, AssertionError, TypeError)):
        return False
    msg = str(e)
    return "tf32x3" in msg or "input_precision" in msg


def _record_compiled(kernel, compiled, kwargs) -> None:
    if COMPILE_LOG is None or compiled is None:
        return
    meta = getattr(compiled, "metadata", None)
    COMPILE_LOG.append({
        "kernel": getattr(kernel, "__name__", str(kernel)),
        "config": {k: v for k, v in kwargs.items() if isinstance(v, (int, str, bool, float))},
        "registers": getattr(compiled, "n_regs", None),
        "spills": getattr(compiled, "n_spills", None),
        "shared_bytes": getattr(meta, "shared", None),
    })


def launch(kernel, grid, args, kwargs):
    """kernel[grid](*args, **kwargs), on the device of the first tensor argument (a tensor on
    cuda:1 launches on cuda:1 whatever the current device is)."""
    dev = next((a.device for a in args if isinstance(a, torch.Tensor)), None)
    if dev is not None and dev.type == "cuda":
        with torch.cuda.device(dev):
            compiled = kernel[grid](*args, **kwargs)
    else:
        compiled = kernel[grid](*args, **kwargs)
    _record_compiled(kernel, compiled, kwargs)
    return compiled


def launch_with_fallback(kernel, grid, args, kwargs, *, fp32: bool):
    """Launch; if this Triton cannot compile a tf32x3 dot, fall back to exact IEEE fp32 once and for
    all, and record it in PRECISION_FALLBACKS. Only for kernels whose dot really runs in fp32
    (``fp32``) and only for that compile error: anything else propagates unchanged."""
    try:
        return launch(kernel, grid, args, kwargs)
    except Exception as e:
        if not (fp32 and kwargs.get("PREC") == "tf32x3" and is_precision_error(e)):
            raise
        _PREC_FALLBACK["tf32x3"] = "ieee"
        PRECISION_FALLBACKS.append({"kernel": getattr(kernel, "__name__", str(kernel)),
                                    "error": f"{type(e).__name__}: {str(e)[:500]}"})
        return launch(kernel, grid, args, dict(kwargs, PREC="ieee"))
