"""soft_join / soft_meet (exact) and meet_cardinality (a sum: tolerance growing with G)."""
import numpy as np
import pytest

from contextrag import ops, ref
from kernel_helpers import EPS, KINDS, as_kind, check_kind, fuzzy, to_numpy


def _meet_tol(G, dtype):
    # Σ of G terms in [0, 1]: any summation order is within G·eps·(sum) ≤ G²·eps of the exact value;
    # use the usual γ_G = G·eps bound relative to the sum, plus one ulp.
    return lambda want: (G + 1) * EPS[dtype] * np.maximum(want, 1.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("p,q,G", [(1, 1, 1), (7, 97, 129), (13, 5, 1000), (97, 129, 7), (3, 2, 20000)])
def test_meet_cardinality_matches_ref(backend, isa, rng, dtype, p, q, G):
    A = fuzzy(rng, (p, G), dtype, zeros=0.3)
    B = fuzzy(rng, (q, G), dtype, zeros=0.3)
    out = to_numpy(ops.meet_cardinality(A, B, backend=backend))
    want = ref.meet_cardinality(A, B)
    assert out.shape == (p, q) and out.dtype == dtype
    assert np.all(np.abs(out - want) <= _meet_tol(G, dtype)(want))



@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("p,q,G,zeros", [(1, 1, 1, 0.0), (4, 6, 16, 0.0), (5, 7, 17, 0.3), (9, 13, 4099, 0.5),
                                         (1, 33, 2053, 0.97), (97, 3, 129, 0.0)])
def test_meet_cardinality_cpu_kernel_tiles(isa, rng, dtype, p, q, G, zeros):
    """The row-major CPU kernel on every ISA: full and partial tiles, tails shorter than a vector,
    several g chunks (2048 floats, 1024 doubles)."""
    A = fuzzy(rng, (p, G), dtype, zeros=zeros)
    B = fuzzy(rng, (q, G), dtype, zeros=zeros)
    out = ops.meet_cardinality(A, B, backend="cpu")
    want = ref.meet_cardinality(A, B)
    assert out.dtype == dtype and out.shape == (p, q)
    assert np.all(np.abs(out - want) <= _meet_tol(G, dtype)(want))


def test_meet_rows_native_checks():
    from contextrag.ops._backend import native
    C = native()
    if C is None or not hasattr(C, "meet_rows"):
        pytest.skip("native extension not built")
    with pytest.raises(ValueError, match="same number of columns"):
        C.meet_rows(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(TypeError, match="same dtype"):
        C.meet_rows(np.zeros((2, 3)), np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        C.meet_rows(np.zeros((3, 2)).T, np.zeros((2, 3)))

def test_meet_cardinality_properties(backend, rng):
    A = fuzzy(rng, (6, 50), zeros=0.3)
    M = ops.meet_cardinality(A, A, backend=backend)
    np.testing.assert_allclose(np.diag(M), A.sum(axis=1), rtol=1e-12)  # |A ∧ A| = |A|
    np.testing.assert_allclose(M, M.T, rtol=1e-12)                      # symmetric
    Z = ops.meet_cardinality(A, np.zeros((2, 50)), backend=backend)
    np.testing.assert_array_equal(Z, np.zeros((6, 2)))


@pytest.mark.parametrize("kind", KINDS)
def test_kinds(backend, rng, kind):
    A = fuzzy(rng, (8, 30))
    B = fuzzy(rng, (5, 30))
    out = ops.meet_cardinality(as_kind(A, kind), as_kind(B, kind), backend=backend)
    check_kind(out, kind)
    np.testing.assert_allclose(to_numpy(out), ref.meet_cardinality(A, B), rtol=1e-13)
    j = ops.soft_join(as_kind(A, kind), as_kind(A[::-1].copy(), kind))
    check_kind(j, kind)
    np.testing.assert_array_equal(to_numpy(j), ref.soft_join(A, A[::-1]))
    m = ops.soft_meet(as_kind(A, kind), as_kind(A[::-1].copy(), kind))
    np.testing.assert_array_equal(to_numpy(m), ref.soft_meet(A, A[::-1]))


@pytest.mark.parametrize("p,q,G", [(0, 3, 4), (3, 0, 4), (3, 4, 0)])
def test_meet_empty(backend, p, q, G):
    out = ops.meet_cardinality(np.zeros((p, G)), np.zeros((q, G)), backend=backend)
    assert out.shape == (p, q)
    np.testing.assert_array_equal(out, np.zeros((p, q)))


def test_join_meet_shapes_rejected():
    with pytest.raises(ValueError, match="A1 and A2"):
        ops.soft_join(np.zeros((2, 3)), np.zeros((3, 2)))
