"""The row kernels a candidate query calls (csrc/cpu/dot_rows.cpp, route_rows in
semiring_kernels.h): against the float64 reference and NumPy, on odd shapes, scattered and repeated
rows, and every instruction set this CPU runs."""
from __future__ import annotations

import numpy as np
import pytest

from contextrag.ops import native

C = native()
pytestmark = pytest.mark.skipif(C is None or not hasattr(C, "dot_rows"), reason="contextrag._C is not built")
ISAS = [i for i in ("avx512", "avx2", "generic") if C is not None and C.cpu_isa_supported(i)]


@pytest.fixture
def isa(request):
    C.set_cpu_isa(request.param)
    yield request.param
    C.set_cpu_isa("auto")


@pytest.mark.parametrize("d", [1, 7, 16, 33, 384])
def test_dot_rows_matches_float64_on_odd_shapes(d):
    rng = np.random.default_rng(d)
    E = rng.standard_normal((301, d)).astype(np.float32)
    q = rng.standard_normal((3, d)).astype(np.float32)
    idx = np.concatenate([rng.integers(0, 301, 500), [0, 300, 300]]).astype(np.int64)   # unsorted, repeated
    want = q.astype(np.float64) @ E[idx].astype(np.float64).T
    got = C.dot_rows(E, q, idx)
    assert got.dtype == np.float32 and got.shape == (3, idx.size)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(d))
    every = C.dot_rows(E, q, None)
    np.testing.assert_array_equal(every[:, idx], got)           # the same bits, gathered or not
    assert C.dot_rows(E, q, idx[:0]).shape == (3, 0)


def test_dot_rows_rejects_bad_arguments():
    E, q = np.zeros((5, 4), np.float32), np.zeros((1, 4), np.float32)
    with pytest.raises(ValueError, match=r"idx must hold row indices in \[0, 5\)"):
        C.dot_rows(E, q, np.array([5]))
    with pytest.raises(ValueError, match="q must have E's 4 columns"):
        C.dot_rows(E, np.zeros((1, 3), np.float32), None)
    with pytest.raises(TypeError):          # no silent float64 → float32 copy
        C.dot_rows(E.astype(np.float64), q, None)


def test_cosines_is_the_kernel_or_numpy(monkeypatch):
    from contextrag.ops import _backend
    from contextrag.query.dense import cosines
    rng = np.random.default_rng(0)
    E = rng.standard_normal((5000, 24)).astype(np.float32)
    q = rng.standard_normal(24).astype(np.float32)
    idx = np.sort(rng.choice(5000, 2100, replace=False))
    fast = cosines(E, q, idx)
    np.testing.assert_array_equal(fast, cosines(E, q)[:, idx])
    monkeypatch.setattr(_backend, "cpu_native", lambda name: None)
    slow = cosines(E, q, idx)
    np.testing.assert_allclose(fast, slow, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(slow, np.stack([E[idx] @ q]))


@pytest.mark.parametrize("isa", ISAS, indirect=True)
@pytest.mark.parametrize("V", [1, 15, 16, 63, 64, 65, 132])
def test_route_rows_same_bits_on_every_isa(isa, V):
    from contextrag.query.fuzzy import Router
    rng = np.random.default_rng(V)
    I = rng.random((257, V)).astype(np.float32)
    I[::5] = 0.0
    mu = rng.random((2, V)).astype(np.float32)
    idx = np.concatenate([rng.integers(0, 257, 300), [256, 0, 0]]).astype(np.int64)
    want = np.empty((2, idx.size), np.float32)
    Router._route_gathered(mu, I, idx, want)
    np.testing.assert_array_equal(C.route_rows(mu, I, idx).view(np.uint32), want.view(np.uint32))
    want64 = np.empty((2, idx.size), np.float64)
    Router._route_gathered(mu.astype(np.float64), I.astype(np.float64), idx, want64)
    np.testing.assert_array_equal(C.route_rows(mu.astype(np.float64), I.astype(np.float64), idx), want64)
