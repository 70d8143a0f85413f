"""The semiring family (luk_up / luk_down / luk_closure / fuzzy_route / meet_cardinality): every CPU
backend and ISA against contextrag.ref.

min and max never round, so in float64 the fast paths must equal the reference bit for bit; in float32
each output is one float32 rounding of (I − A) and one of (1 + t), so within 2 float32 ulps of 1.
meet_cardinality is a sum: its tolerance grows with G.
"""
import numpy as np
import pytest
import torch

from contextrag import ops, ref
from kernel_helpers import EPS, KINDS, as_kind, check_kind, fuzzy, to_numpy

SHAPES = [(1, 1, 1), (7, 97, 129), (13, 129, 7), (97, 7, 1), (2, 300, 17), (6, 64, 64)]


def _close(out, want, dtype):
    out = to_numpy(out)
    assert out.shape == want.shape
    if dtype == np.float64:
        np.testing.assert_array_equal(out, want)
    else:
        np.testing.assert_allclose(out, want, rtol=0, atol=2 * EPS[np.float32])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("s,G,M", SHAPES)
def test_luk_up_down_match_ref(backend, isa, rng, dtype, s, G, M):
    A = fuzzy(rng, (s, G), dtype, zeros=0.3)
    I = fuzzy(rng, (G, M), dtype)
    B = fuzzy(rng, (s, M), dtype, zeros=0.3)
    _close(ops.luk_up(A, I, backend=backend), ref.luk_up(A, I), dtype)
    _close(ops.luk_down(B, I, backend=backend), ref.luk_down(B, I), dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("Q,V,C", SHAPES)
def test_fuzzy_route_matches_ref(backend, isa, rng, dtype, Q, V, C):
    mu = fuzzy(rng, (Q, V), dtype, zeros=0.3)
    I = fuzzy(rng, (C, V), dtype)
    _close(ops.fuzzy_route(mu, I, backend=backend), ref.fuzzy_route(mu, I), dtype)


@pytest.mark.parametrize("kind", KINDS)
def test_kinds_and_layouts(backend, rng, kind):
    """numpy in -> numpy out, torch in -> torch out; transposed/strided views give the same values."""
    A = fuzzy(rng, (9, 33), zeros=0.2)
    I = fuzzy(rng, (33, 21))
    up = ops.luk_up(as_kind(A, kind), as_kind(I, kind), backend=backend)
    check_kind(up, kind)
    np.testing.assert_array_equal(to_numpy(up), ref.luk_up(A, I))
    down = ops.luk_down(as_kind(ref.luk_up(A, I), kind), as_kind(I, kind), backend=backend)
    check_kind(down, kind)
    np.testing.assert_array_equal(to_numpy(down), ref.luk_down(ref.luk_up(A, I), I))
    mu = fuzzy(rng, (5, 21))
    r = ops.fuzzy_route(as_kind(mu, kind), as_kind(I, kind), backend=backend)
    check_kind(r, kind)
    np.testing.assert_array_equal(to_numpy(r), ref.fuzzy_route(mu, I))


def test_ties_and_zero_rows(backend, isa, rng):
    """Values on a 1/8 lattice (many ties), all-zero sets (every term skipped) and all-one sets."""
    A = fuzzy(rng, (12, 40), grid=8, zeros=0.4)
    A[0] = 0.0
    A[1] = 1.0
    I = fuzzy(rng, (40, 19), grid=8)
    up = ops.luk_up(A, I, backend=backend)
    np.testing.assert_array_equal(up, ref.luk_up(A, I))
    np.testing.assert_array_equal(up[0], np.ones(19))      # the empty set's intent is everything
    np.testing.assert_array_equal(up[1], I.min(axis=0))    # a crisp full set: column minima
    mu = np.zeros((3, 19))
    np.testing.assert_array_equal(ops.fuzzy_route(mu, I, backend=backend), np.zeros((3, 40)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vectors_and_mixed_dtypes(backend, rng, dtype):
    A = fuzzy(rng, (31,), dtype)
    I = fuzzy(rng, (31, 8), np.float64)
    up = ops.luk_up(A, I, backend=backend)
    assert up.shape == (8,) and up.dtype == np.float64       # the wider input's dtype wins
    np.testing.assert_array_equal(up, ref.luk_up(A, I))
    mu = fuzzy(rng, (8,), dtype)
    r = ops.fuzzy_route(mu, I.astype(dtype), backend=backend)
    assert r.shape == (31,) and r.dtype == dtype


@pytest.mark.parametrize("s,G,M", [(0, 5, 4), (3, 0, 5), (3, 5, 0), (0, 0, 0)])
def test_empty(backend, s, G, M):
    A, I, B = np.zeros((s, G)), np.zeros((G, M)), np.zeros((s, M))
    up = ops.luk_up(A, I, backend=backend)
    np.testing.assert_array_equal(up, ref.luk_up(A, I))
    assert up.shape == (s, M)
    np.testing.assert_array_equal(ops.luk_down(B, I, backend=backend), ref.luk_down(B, I))
    r = ops.fuzzy_route(B, I, backend=backend)
    np.testing.assert_array_equal(r, ref.fuzzy_route(B, I))
    assert r.shape == (s, G)


def test_closure(backend, rng):
    A = fuzzy(rng, (5, 50), zeros=0.5)
    I = fuzzy(rng, (50, 23))
    ext, intent = ops.luk_closure(A, I, backend=backend)
    e_ref, i_ref = ref.luk_closure(A, I)
    np.testing.assert_array_equal(ext, e_ref)
    np.testing.assert_array_equal(intent, i_ref)


def test_large_blocks_cross_chunks(isa, rng):
    """Shapes large enough to span several L2 chunks and column panels of the native kernel."""
    A = fuzzy(rng, (7, 5000), np.float32, zeros=0.5)
    I = fuzzy(rng, (5000, 70), np.float32)
    _close(ops.luk_up(A, I, backend="cpu"), ref.luk_up(A, I), np.float32)
    mu = fuzzy(rng, (3, 40), zeros=0.5)
    I2 = fuzzy(rng, (9000, 40))
    np.testing.assert_array_equal(ops.fuzzy_route(mu, I2, backend="cpu"), ref.fuzzy_route(mu, I2))


def test_torch_grad_tensor_inputs(backend, rng):
    A = torch.from_numpy(fuzzy(rng, (3, 10))).requires_grad_(True)
    I = torch.from_numpy(fuzzy(rng, (10, 4)))
    out = ops.luk_up(A, I, backend=backend)
    np.testing.assert_array_equal(out.detach().numpy(), ref.luk_up(A.detach().numpy(), I.numpy()))


@pytest.mark.parametrize("zeros", [0.0, 0.05, 0.5, 0.97])
def test_zero_skip_densities_across_chunks(isa, rng, zeros):
    """The zero-skip list is built once per set block and chunk and used only when enough rows are
    zero; every density must give the reference's result, for all three semirings."""
    A = fuzzy(rng, (13, 6000), np.float64, zeros=zeros)
    I = fuzzy(rng, (6000, 37))
    np.testing.assert_array_equal(ops.luk_up(A, I, backend="cpu"), ref.luk_up(A, I))
    B = fuzzy(rng, (11, 6000), zeros=zeros / 2)
    np.testing.assert_allclose(ops.meet_cardinality(A, B, backend="cpu"), ref.meet_cardinality(A, B),
                               rtol=1e-12)
    from contextrag.ops._backend import native
    Cn = native()   # the broadcast "meet" semiring (Bᵀ operand, zero-skipping), exported beside meet_rows
    np.testing.assert_allclose(Cn.semiring("meet", A, np.ascontiguousarray(B.T)), ref.meet_cardinality(A, B),
                               rtol=1e-12)
    mu = fuzzy(rng, (5, 37), zeros=zeros)
    np.testing.assert_array_equal(ops.fuzzy_route(mu, I, backend="cpu"), ref.fuzzy_route(mu, I))


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (3, 17), (132, 1000), (17, 33)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_transpose(shape, dtype, rng):
    from contextrag.ops._backend import native
    C = native()
    if C is None:
        pytest.skip("native extension not built")
    a = rng.random(shape).astype(dtype)
    t = C.transpose(a)
    assert t.dtype == dtype and t.flags["C_CONTIGUOUS"]
    np.testing.assert_array_equal(t, a.T)
    with pytest.raises(ValueError, match="a must be"):
        C.transpose(np.zeros((2, 3, 4), dtype))


# ---- meet_cardinality (min-sum) ---------------------------------------------------------------

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
def test_meet_kinds(backend, rng, kind):
    A = fuzzy(rng, (8, 30))
    B = fuzzy(rng, (5, 30))
    out = ops.meet_cardinality(as_kind(A, kind), as_kind(B, kind), backend=backend)
    check_kind(out, kind)
    np.testing.assert_allclose(to_numpy(out), ref.meet_cardinality(A, B), rtol=1e-13)


@pytest.mark.parametrize("p,q,G", [(0, 3, 4), (3, 0, 4), (3, 4, 0)])
def test_meet_empty(backend, p, q, G):
    out = ops.meet_cardinality(np.zeros((p, G)), np.zeros((q, G)), backend=backend)
    assert out.shape == (p, q)
    np.testing.assert_array_equal(out, np.zeros((p, q)))
