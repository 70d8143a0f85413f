"""Input coercion shared by every op: NumPy, torch or CuPy in, the same kind (and device) out.

Ops work on torch tensors internally (zero-copy for NumPy via ``torch.from_numpy``, for CuPy via
DLPack) so one code path serves CPU BLAS, the C++ extension (through ``.numpy()`` views) and CUDA
tensors. CuPy support is the :func:`accepts_cupy` decorator on every public op (bottom of this
module); CuPy itself is imported only when a CuPy array is passed, and torch only when a function
here that needs it is called (the decorator and the checks on NumPy input do not).
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generic, ParamSpec, TypeVar, cast

import numpy as np

if TYPE_CHECKING:
    import torch


def _torch():
    import torch
    return torch


def is_torch_tensor(x) -> bool:
    """True for a torch tensor (or a subclass such as a Parameter), decided from the type alone.

    torch is not imported for this, and ``sys.modules`` is not consulted: while another thread is
    still importing torch its module there is partially initialised (no ``Tensor`` yet). A tensor's
    existence means torch's import has finished, so importing it afterwards is safe and immediate.
    """
    return any(c.__name__ == "Tensor" and c.__module__ in ("torch", "torch._tensor") for c in type(x).__mro__)


def __getattr__(name):
    # FLOAT_DTYPES / GPU_EXTRA_DTYPES are torch dtypes: made on first use, not at import
    if name == "FLOAT_DTYPES":
        return (_torch().float32, _torch().float64)
    if name == "GPU_EXTRA_DTYPES":
        return (_torch().float16, _torch().bfloat16)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_K = TypeVar("_K")


@dataclass(frozen=True)
class Kind(Generic[_K]):
    """Remembers what the caller passed, so outputs come back as the same kind."""

    numpy: bool

    def out(self, t: torch.Tensor) -> _K:
        """``t`` as the caller's kind: a NumPy array (on the host) or the tensor itself."""
        if self.numpy:
            return cast(_K, t.detach().cpu().numpy())
        return cast(_K, t)


SMALL_CPU_CHECK = 1 << 22   # elements: below this the input checks run on the calling thread


def as_tensor(x: _K, name: str, *, ndim: tuple[int, ...] = (2,), check_finite: bool = True,
              unit_interval: bool = False, allow_half: bool = False) -> tuple[torch.Tensor, Kind[_K]]:
    """Validate ``x`` and return it as a torch tensor plus the caller's kind.

    Raises ``TypeError`` for anything that is not a float array/tensor and ``ValueError`` for
    wrong ndim, NaN/inf, or values outside [0, 1] when ``unit_interval`` is set.
    """
    import torch
    FLOAT_DTYPES = (torch.float32, torch.float64)
    GPU_EXTRA_DTYPES = (torch.float16, torch.bfloat16)
    kind: Kind[_K]
    t: torch.Tensor
    if isinstance(x, torch.Tensor):
        kind = Kind(numpy=False)
        t = x
    elif isinstance(x, np.ndarray):
        kind = Kind(numpy=True)
        if x.dtype not in (np.float32, np.float64):
            raise TypeError(f"{name} must be float32 or float64, got numpy dtype {x.dtype}")
        # torch views neither read-only nor negatively strided (reversed) arrays: those are copied
        view = x.flags.writeable and all(s >= 0 for s in x.strides)
        t = torch.from_numpy(x) if view else torch.from_numpy(x.copy())
    else:
        raise TypeError(f"{name} must be a numpy.ndarray, torch.Tensor or cupy.ndarray, got {type(x).__name__}")
    ok = FLOAT_DTYPES + (GPU_EXTRA_DTYPES if allow_half else ())
    if t.dtype not in ok:
        names = ", ".join(str(d).replace("torch.", "") for d in ok)
        raise TypeError(f"{name} must have dtype in ({names}), got {str(t.dtype).replace('torch.', '')}")
    if t.dim() not in ndim:
        want = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{name} must be {want}, got shape {tuple(t.shape)}")
    if t.numel() and (check_finite or unit_interval):
        # One min/max pass answers both checks without a temporary: torch's min/max propagate NaN,
        # and an inf shows up as an infinite extreme.
        if t.device.type == "cpu" and t.numel() <= SMALL_CPU_CHECK and t.dtype in FLOAT_DTYPES:
            # NumPy on the calling thread: torch's reduction runs on its thread pool, whose barrier
            # waited tens of ms for a preempted thread on a busy machine (profiled: small k-means)
            a = t.detach().numpy()
            lo, hi = float(a.min()), float(a.max())
        else:
            lo_t, hi_t = torch.aminmax(t) if t.dtype in FLOAT_DTYPES or t.device.type == "cuda" else (t.min(), t.max())
            lo, hi = float(lo_t), float(hi_t)
        if check_finite and not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"{name} contains NaN or inf")
        if unit_interval:
            if lo < 0.0 or hi > 1.0:
                raise ValueError(f"{name} must hold fuzzy degrees in [0, 1], got range [{lo:g}, {hi:g}]")
    return t, kind


def as_array(x: np.ndarray, name: str, *, ndim: tuple[int, ...] = (2,), check_finite: bool = True,
             unit_interval: bool = False) -> np.ndarray:
    """:func:`as_tensor`'s checks and messages for a NumPy array, without torch: the ops that compute
    NumPy input in NumPy (on the CPU) validate with this."""
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got numpy dtype {x.dtype}")
    if x.ndim not in ndim:
        want = " or ".join(f"{d}-D" for d in ndim)
        raise ValueError(f"{name} must be {want}, got shape {tuple(x.shape)}")
    if x.size:
        lo, hi = float(np.min(x)), float(np.max(x))      # NaN propagates; inf shows as an extreme
        if check_finite and not (np.isfinite(lo) and np.isfinite(hi)):
            raise ValueError(f"{name} contains NaN or inf")
        if unit_interval and (lo < 0.0 or hi > 1.0):
            raise ValueError(f"{name} must hold fuzzy degrees in [0, 1], got range [{lo:g}, {hi:g}]")
    return x


def all_numpy(*xs) -> bool:
    """True when every argument is a NumPy array (the ops' torch-free path)."""
    return all(isinstance(x, np.ndarray) for x in xs)


def check_half_on_gpu(t: torch.Tensor, name: str) -> None:
    """float16/bfloat16 storage is a GPU feature; the CPU paths compute in float32/float64 only."""
    import torch
    if t.dtype in (torch.float16, torch.bfloat16) and t.device.type != "cuda":
        raise TypeError(f"{name} has dtype {str(t.dtype).replace('torch.', '')}, which is only accepted for "
                        "CUDA tensors; use float32 or float64 on the CPU")


def same_device(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    if a.device != b.device:
        raise ValueError(f"{name_a} is on {a.device} but {name_b} is on {b.device}")


def common_dtype(*ts: torch.Tensor) -> torch.dtype:
    """float64 if any input is float64, else float32 (halves compute in float32)."""
    import torch
    return torch.float64 if any(t.dtype == torch.float64 for t in ts) else torch.float32


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


# ---- sparse incidences ---------------------------------------------------------------------

def is_sparse(x) -> bool:
    """True for scipy.sparse matrices/arrays and torch sparse (CSR or COO) tensors."""
    if is_torch_tensor(x):
        import torch
        return x.layout in (torch.sparse_csr, torch.sparse_coo)
    return hasattr(x, "tocoo") and hasattr(x, "nnz") and hasattr(x, "shape")


@dataclass(frozen=True)
class CSR:
    """A canonical CSR matrix (sorted, unique column indices per row) held as NumPy arrays."""

    indptr: np.ndarray   # (rows + 1,) int64
    indices: np.ndarray  # (nnz,) int64
    data: np.ndarray     # (nnz,) float32 or float64
    shape: tuple

    @property
    def dtype(self) -> torch.dtype:
        import torch
        return torch.float64 if self.data.dtype == np.float64 else torch.float32

    def astype(self, dtype: torch.dtype) -> "CSR":
        import torch
        want = np.float64 if dtype == torch.float64 else np.float32
        if self.data.dtype == want:
            return self
        return CSR(self.indptr, self.indices, self.data.astype(want), self.shape)

    def transpose(self) -> "CSR":
        """The CSR of the transpose (= this matrix's CSC), still canonical."""
        rows = np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))
        return _coo_to_csr(self.indices, rows, self.data, (self.shape[1], self.shape[0]), summed=True)

    def to_dense(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        out = np.zeros(self.shape, dtype=self.data.dtype)
        rows = np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))
        out[rows, self.indices] = self.data
        import torch
        t = torch.from_numpy(out)
        return t if dtype is None else t.to(dtype)


def _coo_to_csr(rows, cols, vals, shape, *, summed: bool = False) -> CSR:
    """Sort by (row, col); duplicates are summed (scipy's convention) unless already unique."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    vals = np.asarray(vals)
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    if not summed and rows.size:
        first = np.ones(rows.size, dtype=bool)
        first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
        if not first.all():
            starts = np.flatnonzero(first)
            vals = np.add.reduceat(vals, starts)
            rows, cols = rows[starts], cols[starts]
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return CSR(indptr, np.ascontiguousarray(cols), np.ascontiguousarray(vals), (int(shape[0]), int(shape[1])))


def as_csr(x, name: str, *, unit_interval: bool = True) -> CSR:
    """Validate a sparse matrix (scipy.sparse or torch sparse) and return its canonical CSR."""
    if is_torch_tensor(x):
        if x.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(x.shape)}")
        coo = x.detach().to_sparse_coo().coalesce().cpu()
        idx = coo.indices().numpy()
        rows, cols, vals = idx[0], idx[1], coo.values().numpy()
        shape = tuple(x.shape)
    else:
        if len(x.shape) != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(x.shape)}")
        coo = x.tocoo()
        rows, cols, vals, shape = coo.row, coo.col, coo.data, tuple(x.shape)
    if vals.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got dtype {vals.dtype}")
    csr = _coo_to_csr(rows, cols, vals, shape)
    if csr.data.size:
        if not np.isfinite(csr.data).all():
            raise ValueError(f"{name} contains NaN or inf")
        if unit_interval:
            lo, hi = float(csr.data.min()), float(csr.data.max())
            if lo < 0.0 or hi > 1.0:
                raise ValueError(f"{name} must hold fuzzy degrees in [0, 1], got range [{lo:g}, {hi:g}]")
    return csr


# ---- CuPy ------------------------------------------------------------------------------------
# A CuPy array is viewed as a torch tensor without a copy (DLPack, or the CUDA array interface), the
# op runs on a torch stream wrapping CuPy's current stream (so its kernels are ordered with the
# caller's CuPy work exactly as a CuPy function's would be), and every tensor it returns is handed
# back as a CuPy array, again without a copy.

def _top_module(x) -> str:
    return (type(x).__module__ or "").split(".", 1)[0]


def is_cupy(x) -> bool:
    """True for a CuPy ndarray: an object of a ``cupy`` type exposing the CUDA array interface or DLPack."""
    return _top_module(x) == "cupy" and (hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"))


def is_cupy_sparse(x) -> bool:
    """True for a ``cupyx.scipy.sparse`` matrix (copied to the host: the sparse paths run there)."""
    return _top_module(x) == "cupyx" and hasattr(x, "get") and hasattr(x, "nnz")


def _cupy():
    import cupy  # the optional extra `cupy`; only reached when a CuPy array was passed
    return cupy


def cupy_device(x) -> int:
    """The CUDA device index that holds the CuPy array ``x``."""
    if hasattr(x, "__dlpack_device__"):
        return int(x.__dlpack_device__()[1])
    return int(x.device.id)


def cupy_to_torch(x) -> torch.Tensor:
    """A torch view of the CuPy array ``x`` (same memory, same strides), through DLPack or, for
    objects without it, the CUDA array interface."""
    import torch
    if hasattr(x, "__dlpack__"):
        from torch.utils.dlpack import from_dlpack
        return from_dlpack(x)
    return torch.as_tensor(x, device=torch.device("cuda", cupy_device(x)))


def torch_to_cupy(t: torch.Tensor):
    """A CuPy view of the tensor ``t`` (same memory) through DLPack."""
    return _cupy().from_dlpack(t.detach())


def cupy_current_stream(device: int) -> int:
    """The handle of CuPy's current stream on ``device`` (0: the legacy default stream)."""
    cp = _cupy()
    with cp.cuda.Device(device):
        return int(cp.cuda.get_current_stream().ptr)


def torch_stream(ptr: int, device: int):
    """A context in which torch (and the CUDA/Triton launchers, which take torch's current stream)
    works on the CUDA stream ``ptr`` of ``device``; 0, CuPy's null stream, is torch's default stream."""
    import torch
    dev = torch.device("cuda", device)
    s = torch.cuda.ExternalStream(ptr, device=dev) if ptr else torch.cuda.default_stream(dev)
    stack = contextlib.ExitStack()
    stack.enter_context(torch.cuda.device(dev))
    stack.enter_context(torch.cuda.stream(s))
    return stack


def _first_cupy(values):
    for v in values:
        if is_cupy(v):
            return v
        if isinstance(v, (list, tuple)):
            found = _first_cupy(v)
            if found is not None:
                return found
    return None


def _map(x, leaf):
    """leaf applied through lists, tuples and named tuples (the ops' result types)."""
    if isinstance(x, list):
        return [_map(v, leaf) for v in x]
    if isinstance(x, tuple):
        items = [_map(v, leaf) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else tuple(items)
    return leaf(x)


def unwrap_cupy(x):
    if is_cupy(x):
        return cupy_to_torch(x)
    if is_cupy_sparse(x):
        return x.get()
    return x


def wrap_cupy(x):
    return torch_to_cupy(x) if isinstance(x, _torch().Tensor) else x


_P = ParamSpec("_P")
_R = TypeVar("_R")


def accepts_cupy(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Let the op ``fn`` take CuPy arrays (anywhere in its arguments, also inside lists).

    Without one, ``fn`` is called unchanged. With one, on the device of the first CuPy argument and
    on CuPy's current stream there: the CuPy arguments become torch views, ``fn`` runs, and every
    tensor in its result (also inside tuples, lists and named tuples) is returned as a CuPy array.
    """
    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        first = _first_cupy(list(args) + list(kwargs.values()))
        if first is None:
            return fn(*args, **kwargs)
        dev = cupy_device(first)
        with torch_stream(cupy_current_stream(dev), dev):
            targs = _map(args, unwrap_cupy)
            tkwargs = {k: _map(v, unwrap_cupy) for k, v in kwargs.items()}
            result: _R = _map(fn(*targs, **tkwargs), wrap_cupy)
            return result
    return run

