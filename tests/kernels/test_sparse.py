"""Sparse incidences (scipy CSR/CSC, torch sparse CSR/COO) give exactly the densified result.

A missing entry is degree 0: for luk_up/luk_down it still contributes 1 − A(g) (the kernel's
"absent" term), for fuzzy_route it contributes nothing. The reference densifies.
"""
import numpy as np
import pytest
import torch

sp = pytest.importorskip("scipy.sparse")

from contextrag import ops, ref
from kernel_helpers import EPS, to_numpy


def _sparse_I(rng, G, M, density, dtype=np.float64, explicit_zeros=False):
    I = sp.random(G, M, density=density, random_state=rng, format="csr", dtype=np.float64)
    I.data = rng.random(I.nnz)
    if explicit_zeros and I.nnz:
        I.data[::7] = 0.0               # stored zeros must act like missing ones
    return I.astype(dtype)


def _containers(I):
    dense = I.toarray()
    yield "csr_matrix", sp.csr_matrix(I)
    yield "csc_matrix", sp.csc_matrix(I)
    yield "csr_array", sp.csr_array(I)
    yield "coo_matrix", sp.coo_matrix(I)
    yield "torch_csr", torch.from_numpy(dense).to_sparse_csr()
    yield "torch_coo", torch.from_numpy(dense).to_sparse()


def _eq(out, want, dtype):
    out = to_numpy(out)
    if dtype == np.float64:
        np.testing.assert_array_equal(out, want)
    else:
        np.testing.assert_allclose(out, want, rtol=0, atol=2 * EPS[np.float32])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("G,M,density", [(1, 1, 1.0), (7, 97, 0.05), (129, 13, 0.02), (300, 200, 0.01),
                                         (40, 30, 0.9), (20, 10, 0.0)])
def test_sparse_equals_dense(backend, isa, rng, dtype, G, M, density):
    I = _sparse_I(rng, G, M, density, dtype, explicit_zeros=True)
    D = I.toarray()
    A = rng.random((5, G)).astype(dtype)
    A[rng.random(A.shape) < 0.3] = 0
    B = rng.random((4, M)).astype(dtype)
    mu = rng.random((3, M)).astype(dtype)
    _eq(ops.luk_up(A, I, backend=backend), ref.luk_up(A, D), dtype)
    _eq(ops.luk_down(B, I, backend=backend), ref.luk_down(B, D), dtype)
    _eq(ops.fuzzy_route(mu, I, backend=backend), ref.fuzzy_route(mu, D), dtype)
    # and the densified op gives the same answer
    _eq(ops.luk_up(A, I, backend=backend), to_numpy(ops.luk_up(A, D, backend=backend)), dtype)


def test_containers(backend, rng):
    I = _sparse_I(rng, 60, 45, 0.05)
    D = I.toarray()
    A = rng.random((3, 60))
    mu = rng.random((2, 45))
    for name, X in _containers(I):
        up = ops.luk_up(A, X, backend=backend)
        assert isinstance(up, np.ndarray), name
        np.testing.assert_array_equal(up, ref.luk_up(A, D), err_msg=name)
        np.testing.assert_array_equal(ops.luk_down(up, X, backend=backend), ref.luk_down(up, D), err_msg=name)
        np.testing.assert_array_equal(ops.fuzzy_route(mu, X, backend=backend), ref.fuzzy_route(mu, D),
                                      err_msg=name)
    # torch sets in -> torch out, and the closure works end to end
    ext, intent = ops.luk_closure(torch.from_numpy(A), sp.csr_matrix(I), backend=backend)
    assert isinstance(ext, torch.Tensor)
    e_ref, i_ref = ref.luk_closure(A, D)
    np.testing.assert_array_equal(ext.numpy(), e_ref)
    np.testing.assert_array_equal(intent.numpy(), i_ref)


def test_absent_terms_dominate(backend, rng):
    """Hand-made cases where the minimum comes from a missing entry (the 1 − A(g) term)."""
    # column 0 present only at g=0 (value 1); A puts its largest degree on g=1 where I is missing
    I = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.5]]))
    A = np.array([[0.2, 0.9, 0.1], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(ops.luk_up(A, I, backend=backend), ref.luk_up(A, I.toarray()))
    np.testing.assert_allclose(ops.luk_up(A, I, backend=backend)[0], [1 - 0.9, 1 - 0.9])
    # a full line (no absent entry) and an empty one
    I2 = sp.csr_matrix(np.array([[0.3, 0.4, 0.5], [0.0, 0.0, 0.0]]))
    B = np.array([[0.9, 0.8, 0.7]])
    np.testing.assert_array_equal(ops.luk_down(B, I2, backend=backend), ref.luk_down(B, I2.toarray()))


def test_duplicates_are_summed(backend):
    I = sp.coo_matrix((np.array([0.25, 0.5]), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 3))
    A = np.array([[0.5, 0.5]])
    np.testing.assert_array_equal(ops.luk_up(A, I, backend=backend), ref.luk_up(A, I.toarray()))
    with pytest.raises(ValueError, match=r"^I must hold fuzzy degrees"):
        ops.luk_up(A, sp.coo_matrix((np.array([0.75, 0.5]), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 3)))


def test_vocabulary_scale(rng):
    """5,000 chunks × 50,000 attributes at ~0.1% density: the CPU kernel against a sampled dense check."""
    G, M = 5000, 50000
    I = _sparse_I(rng, G, M, 0.001, np.float32)
    A = rng.random((4, G)).astype(np.float32)
    A[rng.random(A.shape) < 0.5] = 0
    up = ops.luk_up(A, I, backend="cpu")
    cols = rng.choice(M, 300, replace=False)
    sub = I[:, cols].toarray()
    np.testing.assert_allclose(up[:, cols], ref.luk_up(A, sub), rtol=0, atol=2 * EPS[np.float32])
    mu = rng.random((2, M)).astype(np.float32)
    mu[rng.random(mu.shape) < 0.99] = 0
    Ic = I.T.tocsr()                                 # chunks × nodes = 50,000 × 5,000
    r = ops.fuzzy_route(mu[:, :5000], Ic, backend="cpu")
    rows = rng.choice(M, 300, replace=False)
    np.testing.assert_allclose(r[:, rows], ref.fuzzy_route(mu[:, :5000], Ic[rows].toarray()),
                               rtol=0, atol=2 * EPS[np.float32])


def test_sparse_validation():
    A = np.full((2, 3), 0.5)
    bad = sp.csr_matrix(np.array([[0.0, np.nan], [0.0, 0.0], [0.1, 0.0]]))
    with pytest.raises(ValueError, match=r"^I contains NaN"):
        ops.luk_up(A, bad)
    with pytest.raises(TypeError, match=r"^I must be float32 or float64"):
        ops.luk_up(A, sp.csr_matrix(np.ones((3, 2), dtype=np.int64)))
    with pytest.raises(ValueError, match=r"^A has 3 objects but I has 4"):
        ops.luk_up(A, sp.csr_matrix(np.ones((4, 2))))
    with pytest.raises(ValueError, match=r"^mu has 3 nodes but I has 2"):
        ops.fuzzy_route(A, sp.csr_matrix(np.ones((4, 2))))
    with pytest.raises(ValueError, match=r"^I must hold fuzzy degrees"):
        ops.luk_down(A, sp.csr_matrix(np.full((4, 3), 2.0)))
