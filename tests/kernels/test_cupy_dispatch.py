"""CuPy in, CuPy out: every op of contextrag.ops through its CuPy dispatch, on the CPU.

The arrays are the host-side stand-in of fake_cupy.py (CPU tensors wearing a ``cupy`` type, with
DLPack and the CUDA array interface); only the step that needs a GPU (entering a torch stream that
wraps CuPy's stream handle) is replaced by a recorder. Checked per op: the result is the NumPy
call's result, every array in it is a CuPy array (also inside result tuples and lists), the op ran
inside CuPy's current stream, and inputs and outputs crossed by DLPack inside that stream.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import contextrag.ops as ops
from contextrag.ops import _tensor
from fake_cupy import STREAM_PTR, install

rng = np.random.default_rng(3)
X = rng.standard_normal((40, 5))
C = X[:3].copy()
A = rng.random((4, 7))
B = rng.random((3, 7))
I = rng.random((7, 6)) * (rng.random((7, 6)) < 0.6)
MU = rng.random((2, 6))
DOC = np.array([0, 0, 1, 2, 2, 3, 4])
SEEDS = np.array([[0, 3], [5, -1]])
SEED_DEG = np.array([[1.0, 0.5], [0.8, 0.0]])


def _spread(I_, doc, seeds, deg, mu):
    return ops.spread_hop(ops.SpreadIncidence(I_, doc), seeds, deg, mu)


# op -> (function, positional arguments, keyword arguments); arrays are NumPy and become CuPy
CASES = {
    "kmeans_assign": (ops.kmeans_assign, (X, C), {}),
    "kmeans_fit": (ops.kmeans_fit, (X, 3), {"n_iter": 4, "init": C}),
    "rq_kmeans": (ops.rq_kmeans, (X,), {"sizes": (3, 2), "n_iter": 4}),
    "rq_kmeans_batched": (ops.rq_kmeans_batched, ([X, X[:25]],), {"sizes": (3, 2), "n_iter": 4}),
    "fcm_memberships": (ops.fcm_memberships, (X, C), {"m": 2.0}),
    "fcm_fit": (ops.fcm_fit, (X, 3), {"n_iter": 5}),
    "tnorm": (ops.tnorm, (A, A[::-1]), {}),
    "residuum": (ops.residuum, (A, A[::-1]), {}),
    "neg": (ops.neg, (A,), {}),
    "soft_join": (ops.soft_join, (A, A[::-1]), {}),
    "soft_meet": (ops.soft_meet, (A, A[::-1]), {}),
    "luk_up": (ops.luk_up, (A, I), {}),
    "luk_down": (ops.luk_down, (MU, I), {}),
    "luk_closure": (ops.luk_closure, (A, I), {}),
    "fuzzy_route": (ops.fuzzy_route, (MU, I), {}),
    "meet_cardinality": (ops.meet_cardinality, (A, B), {}),
    "spread_hop": (_spread, (I, DOC, SEEDS, SEED_DEG, MU[:, :6]), {}),
}


def test_every_op_has_a_cupy_case():
    not_ops = {"backends", "availability", "native", "op_tables",
               "LloydOptions", "KMeansResult", "RQResult", "FCMResult", "SpreadIncidence"}
    assert set(ops.__all__) - not_ops == set(CASES)


def _to_fake(cp, x):
    if isinstance(x, np.ndarray):
        return cp.asarray(x)
    if isinstance(x, list):
        return [_to_fake(cp, v) for v in x]
    return x


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


def _same(cp, got, want):
    """got (from CuPy inputs) mirrors want (from NumPy inputs): CuPy arrays where NumPy arrays were."""
    assert type(got) is type(want) or (isinstance(got, cp.ndarray) and isinstance(want, np.ndarray)), \
        (type(got), type(want))
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(cp, g, w)
    elif isinstance(want, np.ndarray):
        assert isinstance(got, cp.ndarray), type(got)
        np.testing.assert_array_equal(got.get(), want)
    else:
        assert got == want


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_round_trips_cupy(monkeypatch, name):
    cp, state = install(monkeypatch)
    fn, args, kw = CASES[name]
    want = fn(*args, **kw)
    got = fn(*[_to_fake(cp, a) for a in args], **{k: _to_fake(cp, v) for k, v in kw.items()})
    _same(cp, got, want)
    assert not any(isinstance(v, torch.Tensor) for v in _leaves(got))
    assert any(isinstance(v, cp.ndarray) for v in _leaves(got))
    # one stream scope per call (nested op calls see torch tensors; the spread case also prepares its
    # SpreadIncidence from CuPy), on CuPy's current stream of the inputs' device; every DLPack
    # exchange inside it
    calls = 2 if name == "spread_hop" else 1
    assert state.entered == [(STREAM_PTR, 0)] * calls
    assert state.devices == [0] * calls
    assert state.exports and all(state.exports)
    assert state.imports and all(state.imports)


def test_spread_incidence_takes_cupy(monkeypatch):
    cp, _ = install(monkeypatch)
    G = ops.SpreadIncidence(cp.asarray(I), cp.asarray(DOC))
    ref = ops.SpreadIncidence(I, DOC)
    assert (G.csr() != ref.csr()).nnz == 0 and np.array_equal(G.doc, ref.doc)


def test_cupyx_sparse_incidence_is_copied_to_the_host(monkeypatch):
    cp, state = install(monkeypatch)

    class csr_matrix:
        """A cupyx.scipy.sparse matrix stand-in: get() gives the host matrix."""

        def __init__(self, m):
            self.m, self.nnz, self.shape = m, m.nnz, m.shape

        def get(self):
            return self.m

    csr_matrix.__module__ = "cupyx.scipy.sparse._csr"
    got = ops.luk_up(cp.asarray(A), csr_matrix(sp.csr_matrix(I)))
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(got.get(), ops.luk_up(A, sp.csr_matrix(I)))
    assert state.entered == [(STREAM_PTR, 0)]


def test_views_are_zero_copy(monkeypatch):
    cp, _ = install(monkeypatch)
    x = cp.asarray(np.arange(12.0).reshape(3, 4))
    t = _tensor.cupy_to_torch(x)
    assert t.data_ptr() == x._t.data_ptr() and t.shape == (3, 4)
    y = _tensor.torch_to_cupy(t[:, 1])
    assert isinstance(y, cp.ndarray) and y._t.data_ptr() == t[:, 1].data_ptr()


def test_detection():
    class ndarray:
        __cuda_array_interface__ = {}

    ndarray.__module__ = "cupy._core.core"
    assert _tensor.is_cupy(ndarray())
    assert not _tensor.is_cupy(np.zeros(2)) and not _tensor.is_cupy(torch.zeros(2))

    class Other:                       # the interface alone (e.g. a Numba array) is not CuPy
        __cuda_array_interface__ = {}
    assert not _tensor.is_cupy(Other())
    plain = type("ndarray", (), {})
    plain.__module__ = "cupy"          # a cupy type without the interface is not an array
    assert not _tensor.is_cupy(plain())
    with pytest.raises(TypeError, match="cupy.ndarray"):
        ops.neg([0.5])


def test_device_of_the_array():
    class ViaDLPack:
        def __dlpack_device__(self):
            return (2, 1)                  # kDLCUDA, device 1

    class ViaAttribute:
        device = type("Device", (), {"id": 3})()

    assert _tensor.cupy_device(ViaDLPack()) == 1
    assert _tensor.cupy_device(ViaAttribute()) == 3


def test_without_dlpack_the_cuda_array_interface_is_used(monkeypatch):
    seen = []
    monkeypatch.setattr(torch, "as_tensor", lambda obj, device=None: seen.append((obj, device)) or "view")

    class ndarray:
        __cuda_array_interface__ = {"version": 3}
        device = type("Device", (), {"id": 2})()

    x = ndarray()
    assert _tensor.cupy_to_torch(x) == "view" and seen == [(x, torch.device("cuda", 2))]


def test_torch_stream_wraps_the_handle(monkeypatch):
    """The real (GPU) stream step, with torch.cuda's constructors recorded instead of run."""
    calls = []

    class Ctx:
        def __init__(self, what):
            self.what = what

        def __enter__(self):
            calls.append(("enter", self.what))

        def __exit__(self, *exc):
            calls.append(("exit", self.what))

    monkeypatch.setattr(torch.cuda, "ExternalStream", lambda ptr, device: ("external", ptr, device))
    monkeypatch.setattr(torch.cuda, "default_stream", lambda device: ("default", device))
    monkeypatch.setattr(torch.cuda, "device", lambda d: Ctx(("device", d)))
    monkeypatch.setattr(torch.cuda, "stream", lambda s: Ctx(("stream", s)))
    with _tensor.torch_stream(0xABC, 1):
        assert calls == [("enter", ("device", torch.device("cuda", 1))),
                         ("enter", ("stream", ("external", 0xABC, torch.device("cuda", 1))))]
    assert calls[-1] == ("exit", ("device", torch.device("cuda", 1)))
    calls.clear()
    with _tensor.torch_stream(0, 0):   # CuPy's null stream is torch's default stream
        assert calls[1] == ("enter", ("stream", ("default", torch.device("cuda", 0))))


def test_without_cupy_arguments_nothing_changes(monkeypatch):
    cp, state = install(monkeypatch)
    out = ops.neg(torch.tensor([0.25]))
    assert isinstance(out, torch.Tensor) and state.entered == [] and state.devices == []
