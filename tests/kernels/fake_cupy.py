"""A host-side stand-in for the ``cupy`` module: just the surface contextrag's CuPy dispatch uses.

Its arrays are CPU torch tensors wearing a ``cupy`` type: they expose DLPack and the CUDA array
interface, ``cupy.from_dlpack`` wraps tensors back, and ``cupy.cuda.get_current_stream()`` reports
a fixed handle. :func:`install` puts the module in ``sys.modules`` and replaces the one GPU-only
step of the dispatch (entering a torch stream that wraps a CUDA stream handle) with a recorder, so
the dispatch logic (detection, stream handling, zero-copy in and out, result wrapping) runs and is
checked on any machine. Used by tests/kernels/test_cupy_dispatch.py and ``bench/gpu_check.py
--cpu-smoke`` (the cupy group).
"""
from __future__ import annotations

import contextlib
import types

import numpy as np
import torch

STREAM_PTR = 0x5EED   # the handle the stand-in reports as CuPy's current stream


class State:
    """What the dispatch did: streams entered, devices made current, DLPack exchanges."""

    def __init__(self):
        self.entered: list[tuple[int, int]] = []   # (stream handle, device) per torch_stream
        self.devices: list[int] = []               # cupy.cuda.Device(i) entered
        self.exports: list[bool] = []              # an input's __dlpack__ called; inside the stream?
        self.imports: list[bool] = []              # cupy.from_dlpack called; inside the stream?
        self.inside = False


def make_module(state: State) -> types.ModuleType:
    cp = types.ModuleType("cupy")

    class ndarray:
        """A CuPy-typed array over a CPU torch tensor."""

        def __init__(self, t: torch.Tensor):
            self._t = t

        @property
        def shape(self):
            return tuple(self._t.shape)

        @property
        def dtype(self):
            return self._t.numpy().dtype

        @property
        def __cuda_array_interface__(self):
            t = self._t
            return {"shape": tuple(t.shape), "typestr": t.numpy().dtype.str, "data": (t.data_ptr(), False),
                    "strides": tuple(s * t.element_size() for s in t.stride()), "version": 3}

        def __dlpack__(self, **kw):
            state.exports.append(state.inside)
            return self._t.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self._t.__dlpack_device__()

        def get(self):
            return self._t.numpy().copy()

    ndarray.__module__ = "cupy"   # what contextrag's detection reads, as for cupy.ndarray

    class Device:
        def __init__(self, i):
            self.i = i

        def __enter__(self):
            state.devices.append(self.i)
            return self

        def __exit__(self, *exc):
            return False

    def from_dlpack(obj):
        state.imports.append(state.inside)
        return ndarray(torch.from_dlpack(obj))

    def asarray(a):
        return ndarray(torch.from_numpy(np.array(a, copy=True)))

    cp.ndarray, cp.from_dlpack, cp.asarray = ndarray, from_dlpack, asarray
    cp.cuda = types.SimpleNamespace(Device=Device,
                                    get_current_stream=lambda: types.SimpleNamespace(ptr=STREAM_PTR))
    return cp


def _recorder(state: State):
    @contextlib.contextmanager
    def torch_stream(ptr, device):
        state.entered.append((ptr, device))
        state.inside = True
        try:
            yield
        finally:
            state.inside = False
    return torch_stream


def install(monkeypatch=None) -> tuple[types.ModuleType, State]:
    """Install the stand-in as ``cupy`` and record the stream step; with ``monkeypatch`` (pytest)
    both are undone after the test, without it they stay for the process (a benchmark child)."""
    import sys

    from contextrag.ops import _tensor
    state = State()
    cp = make_module(state)
    if monkeypatch is not None:
        monkeypatch.setitem(sys.modules, "cupy", cp)
        monkeypatch.setattr(_tensor, "torch_stream", _recorder(state))
    else:
        sys.modules["cupy"] = cp
        _tensor.torch_stream = _recorder(state)
    return cp, state
