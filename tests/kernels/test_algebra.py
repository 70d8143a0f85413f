"""Laws of the Łukasiewicz structure and the fuzzy Galois connection (paper §3.2), via hypothesis.

Degrees are drawn on the k/64 lattice so that every sum and difference is exact in float32 and
float64: the laws then hold with equality, with no rounding slack to hide a wrong kernel.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from contextrag import ops
from kernel_helpers import CPU_BACKENDS

GRID = 64
deg = st.integers(0, GRID).map(lambda k: k / GRID)


def mat(shape):
    return arrays(np.float64, shape, elements=deg)


shapes = st.tuples(st.integers(1, 6), st.integers(1, 9), st.integers(1, 9))  # (s, G, M)


@settings(max_examples=200, deadline=None)
@given(a=deg, b=deg, c=deg)
def test_adjointness_scalar(a, b, c):
    """a ⊗ b ≤ c  ⇔  a ≤ b → c."""
    assert bool(ops.tnorm(np.array(a), np.array(b)) <= c) == bool(a <= ops.residuum(np.array(b), np.array(c)))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40).flatmap(lambda n: st.tuples(mat((n,)), mat((n,)), mat((n,)))))
def test_adjointness_vectorised(abc):
    a, b, c = abc
    lhs = ops.tnorm(a, b) <= c
    rhs = a <= ops.residuum(b, c)
    np.testing.assert_array_equal(lhs, rhs)
    np.testing.assert_array_equal(ops.neg(ops.neg(a)), a)                  # involution
    np.testing.assert_array_equal(ops.residuum(a, np.zeros_like(a)), ops.neg(a))  # ¬a = a → 0


def _galois_case(draw_shape, data):
    s, G, M = draw_shape
    A = data.draw(mat((s, G)))
    I = data.draw(mat((G, M)))
    return A, I


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data())
def test_closure_laws(backend, dtype, shape, data):
    A, I = _galois_case(shape, data)
    A, I = A.astype(dtype), I.astype(dtype)
    up = ops.luk_up(A, I, backend=backend)
    ext = ops.luk_down(up, I, backend=backend)
    assert np.all(A <= ext)                                              # A ⊆ A↑↓ (extensive)
    np.testing.assert_array_equal(ops.luk_up(ext, I, backend=backend), up)  # A↑↓↑ = A↑
    np.testing.assert_array_equal(ops.luk_down(ops.luk_up(ext, I, backend=backend), I, backend=backend), ext)
    B = up
    assert np.all(B <= ops.luk_up(ops.luk_down(B, I, backend=backend), I, backend=backend))  # B ⊆ B↓↑


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data())
def test_antitone(backend, shape, data):
    """A1 ⊆ A2 ⇒ A2↑ ⊆ A1↑, and dually for ↓."""
    A1, I = _galois_case(shape, data)
    A2 = np.maximum(A1, data.draw(mat(A1.shape)))
    assert np.all(ops.luk_up(A2, I, backend=backend) <= ops.luk_up(A1, I, backend=backend))
    B1 = ops.luk_up(A1, I, backend=backend)
    B2 = np.maximum(B1, data.draw(mat(B1.shape)))
    assert np.all(ops.luk_down(B2, I, backend=backend) <= ops.luk_down(B1, I, backend=backend))


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data())
def test_galois_adjunction(backend, shape, data):
    """B ⊆ A↑ ⇔ A ⊆ B↓ for a single pair of fuzzy sets (the defining property, §3.2)."""
    s, G, M = shape
    A = data.draw(mat((1, G)))
    I = data.draw(mat((G, M)))
    B = data.draw(mat((1, M)))
    left = bool(np.all(B <= ops.luk_up(A, I, backend=backend)))
    right = bool(np.all(A <= ops.luk_down(B, I, backend=backend)))
    assert left == right


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@settings(max_examples=30, deadline=None)
@given(shape=shapes, data=st.data())
def test_route_is_max_of_tnorms(backend, shape, data):
    """fuzzy_route(q, c) = max_v μ(q,v) ⊗ I(c,v), and it is monotone in μ."""
    Q, V, C = shape
    mu = data.draw(mat((Q, V)))
    I = data.draw(mat((C, V)))
    r = ops.fuzzy_route(mu, I, backend=backend)
    want = ops.tnorm(mu[:, None, :], I[None, :, :]).max(axis=2)
    np.testing.assert_array_equal(r, want)
    mu2 = np.maximum(mu, data.draw(mat(mu.shape)))
    assert np.all(ops.fuzzy_route(mu2, I, backend=backend) >= r)
