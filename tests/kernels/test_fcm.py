"""fcm_memberships / fcm_fit against contextrag.ref."""
import numpy as np
import pytest
import torch

from contextrag import ops, ref
from kernel_helpers import KINDS, as_kind, check_kind, to_numpy


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("m", [1.5, 2.0, 3.0])
@pytest.mark.parametrize("n,d,c", [(1, 1, 1), (7, 3, 2), (97, 5, 7), (129, 17, 13)])
def test_memberships_match_ref(backend, isa, rng, dtype, m, n, d, c):
    X = rng.standard_normal((n, d)).astype(dtype)
    C = (rng.standard_normal((c, d)) * 2).astype(dtype)
    U = ops.fcm_memberships(X, C, m, backend=backend)
    U_ref = ref.fcm_memberships(X, C, m)
    assert U.shape == (n, c) and U.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(U, U_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(U.sum(axis=1), 1.0, rtol=0, atol=10 * np.finfo(dtype).eps * c)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_point_on_centre_is_one_hot(backend, rng, dtype):
    X = rng.standard_normal((40, 6)).astype(dtype) * 10
    C = np.vstack([X[5], X[17], X[5] + 1]).astype(dtype)
    U = ops.fcm_memberships(X, C, 2.0, backend=backend)
    np.testing.assert_array_equal(U[5], [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(U[17], [0.0, 1.0, 0.0])
    others = np.delete(np.arange(40), [5, 17])
    assert np.all(U[others].max(axis=1) < 1.0)
    # duplicate centres: the first one takes the point
    U2 = ops.fcm_memberships(X, np.vstack([X[5], X[5]]).astype(dtype), 2.0, backend=backend)
    np.testing.assert_array_equal(U2[5], [1.0, 0.0])


@pytest.mark.parametrize("top_k", [1, 2, 5, 50])
def test_top_k_rows(backend, rng, top_k):
    X = rng.standard_normal((60, 4))
    C = rng.standard_normal((6, 4))
    U = ops.fcm_memberships(X, C, 2.0, top_k=top_k, backend=backend)
    k = min(top_k, 6)
    assert np.all((U > 0).sum(axis=1) == k)
    np.testing.assert_allclose(U.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(U, ref.fcm_memberships(X, C, 2.0, top_k=k), rtol=1e-12, atol=1e-15)
    full = ops.fcm_memberships(X, C, 2.0, backend=backend)
    # the kept entries are the row's k largest memberships
    kept_min = np.where(U > 0, full, np.inf).min(axis=1)
    dropped_max = np.where(U > 0, -np.inf, full).max(axis=1)
    assert np.all(kept_min >= dropped_max)


@pytest.mark.parametrize("kind", KINDS)
def test_kinds(backend, rng, kind):
    X = rng.standard_normal((30, 5))
    C = rng.standard_normal((4, 5))
    U = ops.fcm_memberships(as_kind(X, kind), as_kind(C, kind), backend=backend)
    check_kind(U, kind)
    np.testing.assert_allclose(to_numpy(U), ref.fcm_memberships(X, C), rtol=1e-12)


def test_empty(backend):
    U = ops.fcm_memberships(np.zeros((0, 3)), np.ones((2, 3)), backend=backend)
    assert U.shape == (0, 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_matches_ref(backend, rng, dtype):
    X = np.vstack([rng.standard_normal((80, 3)) + o for o in (0, 6, 12)]).astype(dtype)
    init = X[[0, 100, 200]].copy()
    res = ops.fcm_fit(X, 3, 2.0, n_iter=40, tol=1e-7, init=init, backend=backend)
    C_ref, U_ref, it_ref, J_ref, fpc_ref = ref.fcm_fit(X, 3, 2.0, n_iter=40, tol=1e-7, init=init)
    tol = 1e-9 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(res.centers, C_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(res.memberships, U_ref, rtol=tol, atol=tol)
    assert res.partition_coefficient == pytest.approx(fpc_ref, rel=tol)
    assert res.objective == pytest.approx(J_ref, rel=10 * tol)
    if dtype == np.float64:
        assert res.n_iter == it_ref
    assert res.partition_coefficient > 0.8       # three well-separated groups: a crisp partition


def test_fit_seeded_and_torch(rng):
    X = torch.from_numpy(rng.standard_normal((100, 4)))
    a = ops.fcm_fit(X, 4, seed=3, n_iter=20)
    b = ops.fcm_fit(X.numpy(), 4, seed=3, n_iter=20)
    assert isinstance(a.centers, torch.Tensor) and isinstance(b.centers, np.ndarray)
    np.testing.assert_allclose(a.centers.numpy(), b.centers, rtol=1e-12)
    assert 1 / 4 <= a.partition_coefficient <= 1.0


def test_c_greater_than_n():
    with pytest.raises(ValueError, match=r"c=4 exceeds the number of points n=3"):
        ops.fcm_fit(np.zeros((3, 2)), 4)
