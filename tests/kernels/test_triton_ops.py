"""Every Triton kernel under the Triton interpreter (TRITON_INTERPRET=1) on the CPU, against contextrag.ref.

The interpreter must be chosen before triton is first imported, so these tests run only in a
process started with TRITON_INTERPRET=1: ``tests/kernels/test_triton_interpreter.py`` starts one
(``TRITON_INTERPRET=1 pytest tests/kernels/test_triton_ops.py``); in any other process they skip,
and the rest of the suite never sees the variable.

Semiring products (min/max never round) must equal a float32 torch computation that uses the same
association exactly, and the float64 reference exactly in float64; sums (meet cardinality, GEMM
distances) get tolerances that grow with the reduction length.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

INTERP = os.environ.get("TRITON_INTERPRET") == "1"
pytestmark = pytest.mark.skipif(
    not INTERP, reason="needs TRITON_INTERPRET=1 from process start (run by test_triton_interpreter.py)")

from contextrag import ref  # noqa: E402
import contextrag.ops as ops  # noqa: E402
from contextrag.ops._registry import IMPLS  # noqa: E402


@pytest.fixture(scope="module")
def K():
    pytest.importorskip("triton")
    import contextrag.kernels.fcm as fcm
    import contextrag.kernels.kmeans as kmeans
    import contextrag.kernels.semiring as semiring
    return semiring, kmeans, fcm


SHAPES = [(1, 1, 1), (7, 33, 65), (65, 7, 33), (33, 65, 7), (2, 129, 3)]


def _rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.float64).to(dtype)


# ---- semiring products -----------------------------------------------------------------------

@pytest.mark.parametrize("s,G,M", SHAPES)
@pytest.mark.parametrize("split", [None, 3])
def test_luk_up_down_exact_float32(K, s, G, M, split):
    semiring = K[0]
    A, I, B = _rand(s, G, seed=1), _rand(G, M, seed=2), _rand(s, M, seed=3)
    up = semiring.luk_up(A, I, split=split)
    want_up = torch.clamp_max(1.0 + (I[None, :, :] - A[:, :, None]).amin(dim=1), 1.0)
    assert up.dtype == torch.float32 and torch.equal(up, want_up)
    down = semiring.luk_down(B, I, split=split)
    want_down = torch.clamp_max(1.0 + (I[None, :, :] - B[:, None, :]).amin(dim=2), 1.0)
    assert torch.equal(down, want_down)


@pytest.mark.parametrize("s,G,M", SHAPES)
def test_semiring_float64_equals_reference(K, s, G, M):
    semiring = K[0]
    A, I = _rand(s, G, dtype=torch.float64, seed=4), _rand(G, M, dtype=torch.float64, seed=5)
    B, J = _rand(s, M, dtype=torch.float64, seed=6), _rand(M, G, dtype=torch.float64, seed=7)
    assert np.array_equal(semiring.luk_up(A, I).numpy(), ref.luk_up(A.numpy(), I.numpy()))
    assert np.array_equal(semiring.luk_down(B, I).numpy(), ref.luk_down(B.numpy(), I.numpy()))
    assert np.array_equal(semiring.fuzzy_route(A, J).numpy(), ref.fuzzy_route(A.numpy(), J.numpy()))
    got = semiring.meet_cardinality(A, J, split=2).numpy()
    np.testing.assert_allclose(got, ref.meet_cardinality(A.numpy(), J.numpy()), rtol=0, atol=1e-13 * max(G, 1))


@pytest.mark.parametrize("Q,V,C", SHAPES)
@pytest.mark.parametrize("split", [None, 2])
def test_fuzzy_route_and_meet_float32(K, Q, V, C, split):
    semiring = K[0]
    mu, I = _rand(Q, V, seed=8), _rand(C, V, seed=9)
    got = semiring.fuzzy_route(mu, I, split=split)
    want = torch.clamp_min((mu[:, None, :] + I[None, :, :]).amax(dim=2) - 1.0, 0.0)
    assert torch.equal(got, want)
    mc = semiring.meet_cardinality(mu, I, split=split)
    np.testing.assert_allclose(mc.double().numpy(), ref.meet_cardinality(mu.numpy(), I.numpy()),
                               rtol=0, atol=4e-7 * max(V, 1))


@pytest.mark.parametrize("p,G,q,L", [(1, 1, 1, 1), (7, 33, 65, 16), (20, 100, 3, 8), (17, 70, 5, 127)])
@pytest.mark.parametrize("split", [None, 3])
def test_meet_cardinality_levels_exact_on_quantised(K, p, G, q, L, split):
    semiring = K[0]
    g = torch.Generator().manual_seed(p * G + q)
    A = torch.randint(0, L + 1, (p, G), generator=g).float() / L
    B = torch.randint(0, L + 1, (q, G), generator=g).float() / L
    got = semiring.meet_cardinality_levels(A, B, L, split=split).double().numpy()
    want = ref.meet_cardinality(A.numpy(), B.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9)
    # unquantised input: the meet cardinality of the rounded memberships
    Ar = torch.rand(p, G, generator=g)
    got = semiring.meet_cardinality_levels(Ar, B, L, split=split).double().numpy()
    Aq = np.floor(Ar.double().numpy() * L + 0.5) / L
    np.testing.assert_allclose(got, ref.meet_cardinality(Aq, B.numpy()), rtol=1e-7, atol=1e-6)
    assert np.all(np.abs(got - ref.meet_cardinality(Ar.numpy(), B.numpy())) <= G / (2 * L) + 1e-6)
    with pytest.raises(ValueError, match="levels"):
        semiring.meet_cardinality_levels(A, B, 0)


def test_semiring_noncontiguous_and_empty(K):
    semiring = K[0]
    At = _rand(33, 7, seed=10)          # A = At.t() is a (7, 33) non-contiguous view
    I = _rand(65, 33, seed=11).t()      # (33, 65) non-contiguous
    want = ref.luk_up(At.t().double().numpy(), I.double().numpy())
    got = semiring.luk_up(At.t(), I).double().numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert torch.equal(semiring.luk_up(torch.zeros(3, 0), torch.zeros(0, 4)), torch.ones(3, 4))
    assert torch.equal(semiring.fuzzy_route(torch.zeros(3, 0), torch.zeros(4, 0)), torch.zeros(3, 4))
    assert semiring.meet_cardinality(torch.zeros(0, 5), torch.zeros(2, 5)).shape == (0, 2)


def test_semiring_ops_through_dispatcher(K):
    rng = np.random.default_rng(0)
    A, I = rng.random((7, 33)), rng.random((33, 65))
    assert np.array_equal(ops.luk_up(A, I, backend="triton"), ref.luk_up(A, I))
    assert np.array_equal(ops.luk_up(A[0], I, backend="triton"), ref.luk_up(A[0], I))
    B = rng.random((5, 65))
    assert np.array_equal(ops.luk_down(B, I, backend="triton"), ref.luk_down(B, I))
    ext, intent = ops.luk_closure(A, I, backend="triton")
    rext, rint = ref.luk_closure(A, I)
    assert np.array_equal(ext, rext) and np.array_equal(intent, rint)
    assert np.all(ext >= A - 1e-12)  # A ⊆ A↑↓
    mu, J = rng.random((3, 65)), rng.random((20, 65))
    assert np.array_equal(ops.fuzzy_route(mu, J, backend="triton"), ref.fuzzy_route(mu, J))
    Bm = rng.random((9, 33))
    np.testing.assert_allclose(ops.meet_cardinality(A, Bm, backend="triton"), ref.meet_cardinality(A, Bm),
                               rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="fuzzy degrees"):
        ops.luk_up(A * 2.0, I, backend="triton")


# ---- k-means -----------------------------------------------------------------------------------

def _check_assign(X, C, labels, d2, atol):
    Xd = X.double().numpy()
    Cd = C.to(X.dtype).double().numpy()
    D = ref.kmeans.sq_distances(Xd, Cd)
    rl, rd = ref.kmeans_assign(Xd, Cd)
    lab = labels.numpy()
    n = Xd.shape[0]
    # any label that differs from the reference must be a near-tie under the GEMM form's rounding
    gap = D[np.arange(n), lab] - D[np.arange(n), rl]
    scale = (Xd ** 2).sum(1) + (Cd ** 2).sum(1)[lab]
    assert np.all(gap <= atol * (1.0 + scale)), gap.max()
    np.testing.assert_allclose(d2.double().numpy(), rd, rtol=0, atol=atol * (1.0 + scale.max()))
    return (lab == rl).mean()


@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (7, 33, 5), (65, 7, 33), (33, 65, 65), (97, 3, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_kmeans_assign(K, n, d, k, dtype):
    kmeans = K[1]
    g = torch.Generator().manual_seed(n * 100 + k)
    X = torch.randn(n, d, generator=g).to(dtype)
    C = torch.randn(k, d, generator=g)
    labels, d2 = kmeans.assign(X, C)
    assert labels.dtype == torch.int64 and labels.shape == (n,)
    atol = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, 1e-5)
    frac = _check_assign(X, C, labels, d2, atol)
    assert frac == 1.0 or n > 30  # random data: exact agreement unless a genuine near-tie


def test_kmeans_assign_ties_go_to_lowest_index(K):
    kmeans = K[1]
    # small integers: every product and sum is exact, so repeated centroids tie exactly whatever order
    # the dot sums in (random floats made BLAS column order decide the interpreter's result)
    g = torch.Generator().manual_seed(0)
    X = torch.randint(-4, 5, (40, 6), generator=g).float()
    # centroids repeated across the BK=32 chunk boundary: 0 == 33 == 50, 7 == 40
    C = torch.randint(-4, 5, (64, 6), generator=g).float()
    C[33] = C[0]
    C[50] = C[0]
    C[40] = C[7]
    X[:10] = C[0]
    X[10:20] = C[40]
    labels, d2 = kmeans.assign(X, C)
    assert torch.all(labels[:10] == 0) and torch.all(labels[10:20] == 7)
    assert torch.all(d2[:20] <= 1e-5)


def test_kmeans_assign_dispatcher_and_fit(K):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((97, 7)).astype(np.float32)
    C = X[:9].copy()
    labels, d2 = ops.kmeans_assign(X, C, backend="triton")
    assert isinstance(labels, np.ndarray) and labels.dtype == np.int64
    assert np.array_equal(labels[:9], np.arange(9))
    a = ops.kmeans_fit(X, 9, n_iter=8, init=C, backend="triton")
    b = ops.kmeans_fit(X, 9, n_iter=8, init=C, backend="cpu")
    assert np.array_equal(a.labels, b.labels)
    np.testing.assert_allclose(a.centroids, b.centroids, rtol=0, atol=1e-5)
    assert a.n_iter == b.n_iter


@pytest.mark.parametrize("n,d,k", [(1, 3, 1), (65, 7, 33), (130, 33, 5), (64, 40, 200), (70, 0, 6)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kmeans_update(K, n, d, k, dtype):
    kmeans = K[1]
    g = torch.Generator().manual_seed(n + d + k)
    X = torch.randn(n, d, generator=g).to(dtype)
    labels = torch.randint(0, k, (n,), generator=g)
    sums, counts = kmeans.update(X, labels, k)
    want = np.zeros((k, d))
    np.add.at(want, labels.numpy(), X.double().numpy())
    np.testing.assert_allclose(sums.double().numpy(), want, rtol=0, atol=1e-5 * max(n, 1) ** 0.5)
    assert counts.dtype == torch.int64
    assert np.array_equal(counts.numpy(), np.bincount(labels.numpy(), minlength=k))


def test_kmeans_update_registered(K):
    X = torch.randn(70, 9)
    labels = torch.randint(0, 4, (70,))
    s1, c1 = IMPLS["kmeans_update"]["triton"](X, labels, 4)
    s2, c2 = IMPLS["kmeans_update"]["cpu"](X, labels, 4)      # float64 sums on the CPU
    torch.testing.assert_close(s1.double(), s2.double(), rtol=0, atol=1e-5)
    assert torch.equal(c1, c2)


def test_rq_kmeans_batched_matches_sequential(K):
    rng = np.random.default_rng(2)
    problems = [rng.standard_normal((n, 6)).astype(np.float32) for n in (40, 3, 70, 25)]
    fn = IMPLS["rq_kmeans_batched"]["triton"]
    for cap in (None, 2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = fn([torch.from_numpy(p) for p in problems], (8, 4, 2), n_iter=10, tol=1e-4, seed=3,
                     max_points_per_centroid=cap)
            for p, rb in zip(problems, got):
                rs = ops.rq_kmeans(p, (8, 4, 2), n_iter=10, seed=3, backend="triton", max_points_per_centroid=cap)
                assert rb.sizes == rs.sizes
                assert np.array_equal(rb.codes.numpy(), rs.codes)
                for a, b in zip(rb.codebooks, rs.codebooks):
                    np.testing.assert_allclose(a.numpy(), b, rtol=0, atol=1e-6)
                np.testing.assert_allclose(rb.inertia, rs.inertia, rtol=1e-5)
    assert got[1].sizes == (3, 3, 2)  # clamped to n=3


def test_assign_segmented_one_launch(K):
    kmeans = K[1]
    g = torch.Generator().manual_seed(5)
    Xs = [torch.randn(n, 9, generator=g) for n in (5, 40, 1, 70)]
    Cs = [torch.randn(k, 9, generator=g) for k in (3, 33, 1, 7)]
    ro = np.cumsum([0] + [x.shape[0] for x in Xs])
    co = np.cumsum([0] + [c.shape[0] for c in Cs])
    labels, d2 = kmeans.assign_segmented(torch.cat(Xs), ro, torch.cat(Cs), co)
    for p in range(4):
        rl, rd = ref.kmeans_assign(Xs[p].double().numpy(), Cs[p].double().numpy())
        assert np.array_equal(labels[ro[p]:ro[p + 1]].numpy(), rl)
        np.testing.assert_allclose(d2[ro[p]:ro[p + 1]].numpy(), rd, rtol=0, atol=1e-4)


# ---- fuzzy c-means -----------------------------------------------------------------------------

@pytest.mark.parametrize("n,d,c", [(1, 1, 1), (7, 33, 5), (65, 7, 33), (33, 65, 65)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("m", [1.5, 2.0, 3.0])
def test_fcm_memberships(K, n, d, c, dtype, m):
    fcm = K[2]
    g = torch.Generator().manual_seed(n + c)
    X = torch.randn(n, d, generator=g).to(dtype)
    C = torch.randn(c, d, generator=g)
    if n > 3 and c > 1:
        C[1] = X[2].float()  # a point on a centre: one-hot row
    U = fcm.memberships(X, C, m)
    R = ref.fcm_memberships(X.double().numpy(), C.to(dtype).double().numpy(), m)
    atol = {torch.float64: 1e-10, torch.float32: 1e-4}.get(dtype, 2e-3)
    np.testing.assert_allclose(U.double().numpy(), R, rtol=0, atol=atol)
    if n > 3 and c > 1:
        assert U[2, 1].item() == 1.0 and U[2].sum().item() == 1.0


def test_fcm_dispatcher_top_k(K):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 5)).astype(np.float32)
    C = rng.standard_normal((7, 5)).astype(np.float32)
    for top_k in (None, 2):
        U = ops.fcm_memberships(X, C, 2.0, top_k=top_k, backend="triton")
        np.testing.assert_allclose(U, ref.fcm_memberships(X, C, 2.0, top_k), rtol=0, atol=1e-5)
    r1 = ops.fcm_fit(X, 4, n_iter=5, backend="triton")
    r2 = ops.fcm_fit(X, 4, n_iter=5, backend="cpu")
    np.testing.assert_allclose(r1.memberships, r2.memberships, rtol=0, atol=1e-4)


# ---- launch limits: row chunks, labels, unit-interval memberships -----------------------------

@pytest.mark.parametrize("split", [1, 3])
def test_semiring_row_chunks(K, monkeypatch, split):
    """More row tiles than grid axis 1 takes: launched in row chunks (axis limit shrunk to 2 tiles)."""
    semiring = K[0]
    monkeypatch.setattr(semiring, "MAX_GRID_YZ", 2)
    A, I = _rand(150, 40, seed=1), _rand(40, 70, seed=2)
    chunks = semiring.launch_plan(150, 70, 40, 32, 32, 16, split)[0]
    assert len(chunks) == 3
    up = semiring.luk_up(A, I, split=split)
    assert torch.equal(up, torch.clamp_max(1.0 + (I[None, :, :] - A[:, :, None]).amin(dim=1), 1.0))
    mu, J = _rand(150, 40, seed=3), _rand(70, 40, seed=4)
    route = semiring.fuzzy_route(mu, J, split=split)
    assert torch.equal(route, torch.clamp_min((mu[:, None, :] + J[None]).amax(dim=2) - 1.0, 0.0))
    q = semiring.meet_cardinality_levels((mu * 16).round() / 16, (J * 16).round() / 16, 16, split=split)
    want = ref.meet_cardinality(((mu * 16).round() / 16).numpy(), ((J * 16).round() / 16).numpy())
    np.testing.assert_allclose(q.double().numpy(), want, rtol=1e-6, atol=1e-6)


def test_update_labels_int32_and_range(K):
    g = torch.Generator().manual_seed(5)
    X = torch.randn(70, 9, generator=g)
    lab = torch.randint(0, 6, (70,), generator=g)
    upd = IMPLS["kmeans_update"]["triton"]
    s64, c64 = upd(X, lab, 6)
    s32, c32 = upd(X, lab.to(torch.int32), 6)
    assert torch.equal(c64, c32) and torch.equal(s64, s32)
    lab[3] = 6
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 6\)"):
        upd(X, lab, 6)


def test_fcm_memberships_in_unit_interval(K):
    from contextrag.ops._tensor import as_tensor
    fcm = K[2]
    g = torch.Generator().manual_seed(9)
    C = torch.randn(37, 24, generator=g)
    X = torch.cat([C + 1e-4 * torch.randn(37, 24, generator=g), C[:3], torch.randn(60, 24, generator=g)])
    for m in (1.05, 2.0):
        U = fcm.memberships(X, C, m)
        assert float(U.min()) >= 0.0 and float(U.max()) <= 1.0
        as_tensor(U, "U", ndim=(2,), unit_interval=True)
        assert torch.equal(U[37:40], torch.eye(37)[:3])  # points on centres: one-hot rows
