"""kmeans_assign / kmeans_fit / rq_kmeans / rq_kmeans_batched against contextrag.ref."""
import logging
import warnings

import numpy as np
import pytest
import torch

from contextrag import ops, ref
from kernel_helpers import KINDS, as_kind, check_kind, to_numpy


def blobs(rng, n, d, k, spread=0.05, dtype=np.float64):
    """Well-separated clusters: no near-ties, so float32 and float64 agree on every label."""
    centres = rng.standard_normal((k, d)) * 3
    lab = rng.integers(0, k, n)
    return (centres[lab] + spread * rng.standard_normal((n, d))).astype(dtype), centres


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (7, 3, 2), (97, 5, 7), (129, 17, 13), (1000, 33, 9)])
def test_assign_matches_ref(backend, rng, dtype, n, d, k):
    X, centres = blobs(rng, n, d, k, dtype=dtype)
    C = centres + 0.01
    lab, d2 = ops.kmeans_assign(X, C.astype(dtype), backend=backend)
    l_ref, d_ref = ref.kmeans_assign(X, C.astype(dtype))
    np.testing.assert_array_equal(lab, l_ref)
    assert lab.dtype == np.int64 and d2.dtype == dtype
    np.testing.assert_allclose(d2, d_ref, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-6)


def test_assign_ties_and_zero_distance(backend, rng):
    X = rng.standard_normal((50, 4))
    C = np.vstack([X[3], X[3], X[10]])            # duplicate centroids: ties go to the lowest index
    lab, d2 = ops.kmeans_assign(X, C, backend=backend)
    assert lab[3] == 0 and lab[10] == 2
    assert not np.any(lab == 1)
    assert d2[3] == 0.0 and d2[10] == 0.0          # exact zero for a point on a centroid
    np.testing.assert_array_equal(lab, ref.kmeans_assign(X, C)[0])


def test_assign_empty_and_large_block(backend, rng):
    lab, d2 = ops.kmeans_assign(np.zeros((0, 3)), np.ones((2, 3)), backend=backend)
    assert lab.shape == (0,) and d2.shape == (0,)
    X, centres = blobs(rng, 50000, 4, 3, dtype=np.float32)   # spans several CPU tiles
    C = (centres + 0.01).astype(np.float32)
    np.testing.assert_array_equal(ops.kmeans_assign(X, C, backend=backend)[0], ref.kmeans_assign(X, C)[0])


@pytest.mark.parametrize("kind", KINDS)
def test_assign_kinds(backend, rng, kind):
    X, _ = blobs(rng, 60, 6, 4)
    C = X[:4].copy()
    lab, d2 = ops.kmeans_assign(as_kind(X, kind), as_kind(C, kind), backend=backend)
    check_kind(lab, kind)
    check_kind(d2, kind)
    np.testing.assert_array_equal(to_numpy(lab), ref.kmeans_assign(X, C)[0])


@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fit_same_init_gives_ref_labels(backend, rng, dtype, bounded):
    X, _ = blobs(rng, 600, 8, 6, spread=0.5, dtype=dtype)
    init = X[rng.choice(600, 6, replace=False)].copy()
    res = ops.kmeans_fit(X, 6, init=init, n_iter=30, tol=1e-6, backend=backend,
                         options=ops.LloydOptions(bounded=bounded))
    C_ref, l_ref, inertia_ref, it_ref = ref.kmeans_fit(X, 6, init=init, n_iter=30, tol=1e-6)
    np.testing.assert_array_equal(res.labels, l_ref)
    assert res.n_iter == it_ref
    np.testing.assert_allclose(res.centroids, C_ref, rtol=1e-10 if dtype == np.float64 else 1e-4, atol=1e-5)
    assert res.inertia == pytest.approx(inertia_ref, rel=1e-10 if dtype == np.float64 else 1e-5)
    assert res.centroids.dtype == dtype


def test_fit_torch_in_torch_out(rng):
    X, _ = blobs(rng, 200, 5, 3)
    res = ops.kmeans_fit(torch.from_numpy(X).t().contiguous().t(), 3, seed=1)
    assert isinstance(res.centroids, torch.Tensor) and isinstance(res.labels, torch.Tensor)
    np.testing.assert_array_equal(res.labels.numpy(), ref.kmeans_assign(X, res.centroids.numpy())[0])


@pytest.mark.parametrize("bounded", [False, True])
def test_empty_cluster_split(backend, rng, bounded):
    """A centroid far from every point gets no points; it takes half of the largest cluster (as the ref)."""
    X, _ = blobs(rng, 300, 4, 3, spread=0.3)
    init = np.vstack([X[:3], np.full((1, 4), 1e3)])
    res = ops.kmeans_fit(X, 4, init=init, n_iter=10, tol=0.0, backend=backend,
                         options=ops.LloydOptions(bounded=bounded))
    C_ref, l_ref, _, _ = ref.kmeans_fit(X, 4, init=init, n_iter=10, tol=0.0)
    np.testing.assert_array_equal(res.labels, l_ref)
    np.testing.assert_allclose(res.centroids, C_ref, rtol=1e-9)
    assert np.all(np.bincount(res.labels, minlength=4) > 0)           # the empty cluster was refilled
    # one Lloyd step from that init really splits
    C1, _, _ = ref.lloyd_step(X, init)
    assert np.abs(C1[3]).max() < 100


@pytest.mark.parametrize("bounded", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,d,k,cap", [(2000, 6, 4, 50), (1031, 7, 3, 33), (777, 13, 5, 1)])
def test_max_points_per_centroid(backend, rng, dtype, bounded, n, d, k, cap):
    """Training on the seeded subsample, then every other row assigned: centroids as the reference
    fit on the sampled rows, labels and inertia as the reference's assignment of all rows."""
    X, _ = blobs(rng, n, d, k, spread=0.4, dtype=dtype)
    init = X[:k].copy()
    res = ops.kmeans_fit(X, k, init=init, n_iter=15, seed=3, max_points_per_centroid=cap, backend=backend,
                         options=ops.LloydOptions(bounded=bounded))
    idx = np.sort(np.random.default_rng(3 + 1).choice(n, size=k * cap, replace=False))
    C_ref, _, _, it_ref = ref.kmeans_fit(X[idx].astype(np.float64), k, init=init.astype(np.float64), n_iter=15)
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(res.centroids, C_ref, rtol=rtol, atol=rtol)
    assert res.n_iter == it_ref and res.centroids.dtype == dtype
    l_ref, d_ref = ref.kmeans_assign(X.astype(np.float64), np.asarray(res.centroids, dtype=np.float64))
    np.testing.assert_array_equal(res.labels, l_ref)
    assert res.labels.shape == (n,)
    assert res.inertia == pytest.approx(d_ref.sum(), rel=1e-10 if dtype == np.float64 else 1e-5)


def test_default_trains_on_256_points_per_centroid(rng):
    """The default call subsamples as FAISS does (k·256 seeded rows, then every row assigned); it is
    deterministic for a seed, the sample changes with the seed, and None trains on every row."""
    k = 2
    X, _ = blobs(rng, 1500, 5, 3, spread=1.0)          # 1500 > 2·256: the default samples
    init = X[:k].copy()
    a = ops.kmeans_fit(X, k, init=init, n_iter=8, seed=5)
    b = ops.kmeans_fit(X, k, init=init, n_iter=8, seed=5)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert a.inertia == b.inertia
    explicit = ops.kmeans_fit(X, k, init=init, n_iter=8, seed=5, max_points_per_centroid=256)
    np.testing.assert_array_equal(a.centroids, explicit.centroids)
    idx = np.sort(np.random.default_rng(5 + 1).choice(1500, size=512, replace=False))
    C_ref, _, _, _ = ref.kmeans_fit(X[idx], k, init=init, n_iter=8)
    np.testing.assert_allclose(a.centroids, C_ref, rtol=1e-10)
    np.testing.assert_array_equal(a.labels, ref.kmeans_assign(X, C_ref)[0])
    other = ops.kmeans_fit(X, k, init=init, n_iter=8, seed=6)
    assert not np.array_equal(other.centroids, a.centroids)   # another seed, another sample
    full = ops.kmeans_fit(X, k, init=init, n_iter=8, seed=5, max_points_per_centroid=None)
    C_all, l_all, inertia_all, _ = ref.kmeans_fit(X, k, init=init, n_iter=8)
    np.testing.assert_allclose(full.centroids, C_all, rtol=1e-10)
    np.testing.assert_array_equal(full.labels, l_all)
    assert full.inertia == pytest.approx(inertia_all, rel=1e-10)
    # a cap at or above n/k is all points too
    big = ops.kmeans_fit(X, k, init=init, n_iter=8, seed=5, max_points_per_centroid=750)
    np.testing.assert_array_equal(big.centroids, full.centroids)
    # rq_kmeans passes the same default to every level
    r1 = ops.rq_kmeans(X, (2, 2), seed=4, n_iter=5)
    r2 = ops.rq_kmeans(X, (2, 2), seed=4, n_iter=5, max_points_per_centroid=256)
    np.testing.assert_array_equal(r1.codes, r2.codes)


@pytest.mark.parametrize("bad,err", [(0, ValueError), (-3, ValueError), (1.5, TypeError), (True, TypeError),
                                     ("256", TypeError)])
def test_max_points_per_centroid_rejected(rng, bad, err):
    X = rng.standard_normal((40, 3))
    with pytest.raises(err, match=r"^max_points_per_centroid must be None or an int >= 1"):
        ops.kmeans_fit(X, 2, max_points_per_centroid=bad)
    with pytest.raises(err, match=r"^max_points_per_centroid must be None or an int >= 1"):
        ops.rq_kmeans(X, (2, 2), max_points_per_centroid=bad)


def test_k_greater_than_n():
    with pytest.raises(ValueError, match=r"k=5 exceeds the number of points n=4"):
        ops.kmeans_fit(np.zeros((4, 2)), 5)


def test_kmeans_plus_plus_is_seeded(rng):
    X, _ = blobs(rng, 300, 3, 5)
    a = ops.kmeans_fit(X, 5, seed=7, n_iter=3)
    b = ops.kmeans_fit(X, 5, seed=7, n_iter=3)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    # the seeding draws the same points as the reference's k-means++
    np.testing.assert_array_equal(ops.kmeans.__dict__["_kmeans_plus_plus"](torch.from_numpy(X), 5, 7).numpy(),
                                  ref.kmeans_plus_plus(X, 5, 7))


def test_rq_kmeans_matches_ref(backend, rng):
    X, _ = blobs(rng, 400, 6, 5, spread=0.8)
    sizes = (5, 3, 2)
    inits = [X[:5].copy()]
    # per-level inits as the reference will see them: the first rows of each level's residual
    C0, l0, _, _ = ref.kmeans_fit(X, 5, init=inits[0], n_iter=25, tol=1e-4)
    R1 = X - C0[l0]
    inits.append(R1[:3].copy())
    C1, l1, _, _ = ref.kmeans_fit(R1, 3, init=inits[1], n_iter=25, tol=1e-4)
    inits.append((R1 - C1[l1])[:2].copy())
    books_ref, codes_ref, R_ref = ref.rq_kmeans(X, sizes, inits=inits)
    res = ops.rq_kmeans(X, sizes, init=inits, backend=backend)
    np.testing.assert_array_equal(res.codes, codes_ref)
    for b, br in zip(res.codebooks, books_ref):
        np.testing.assert_allclose(b, br, rtol=1e-9, atol=1e-12)
    assert res.inertia[-1] == pytest.approx(float((R_ref ** 2).sum()), rel=1e-9)
    assert res.inertia[0] >= res.inertia[1] >= res.inertia[2]


def test_rq_kmeans_clamps_with_one_info_line(rng, caplog):
    X = rng.standard_normal((10, 3))
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="contextrag.ops.kmeans"):
        warnings.simplefilter("error")
        res = ops.rq_kmeans(X, (96, 24, 12))
    lines = [r for r in caplog.records if "clamped" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert "clamped to (10, 10, 10)" in lines[0].getMessage()
    assert res.sizes == (10, 10, 10)
    assert res.codes.shape == (10, 3)
    caplog.clear()
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="contextrag.ops.kmeans"):
        warnings.simplefilter("error")
        ops.rq_kmeans(X, (4, 2))   # no clamping, nothing said
    assert not [r for r in caplog.records if "clamped" in r.getMessage()]


def test_rq_kmeans_batched_equals_single(backend, rng):
    problems = [blobs(rng, n, 4, 3, spread=0.5)[0] for n in (50, 5, 120)]
    batched = ops.rq_kmeans_batched(problems, (6, 3), seed=2, n_iter=10, backend=backend)   # 5 rows: clamped
    for X, b in zip(problems, batched):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            single = ops.rq_kmeans(X, (6, 3), seed=2, n_iter=10, backend=backend)
        assert b.sizes == single.sizes
        np.testing.assert_array_equal(b.codes, single.codes)
        for cb, cs in zip(b.codebooks, single.codebooks):
            np.testing.assert_array_equal(cb, cs)
    assert batched[1].sizes == (5, 3) and batched[0].sizes == (6, 3)
    assert ops.rq_kmeans_batched([], (2,)) == []


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bounded_lloyd_equals_plain(isa, rng, dtype):
    """The CPU loop's Hamerly bounds skip work but not results: same labels/centroids as the plain
    loop and the reference, and it does skip (fewer than all points re-evaluated late in the fit)."""
    X, _ = blobs(rng, 3000, 12, 15, spread=1.5, dtype=dtype)
    init = X[:15].copy()
    skipped, full = [], []
    bounded = ops.kmeans_fit(X, 15, init=init, n_iter=40, tol=0.0, backend="cpu",
                             options=ops.LloydOptions(bounded=True, stats=skipped))
    plain = ops.kmeans_fit(X, 15, init=init, n_iter=40, tol=0.0, backend="cpu",
                           options=ops.LloydOptions(bounded=False, stats=full))
    assert len(skipped) == len(full) == bounded.n_iter - 1 and set(full) == {1.0}
    C_ref, l_ref, inertia_ref, it_ref = ref.kmeans_fit(X, 15, init=init, n_iter=40, tol=0.0)
    np.testing.assert_array_equal(bounded.labels, l_ref)
    np.testing.assert_array_equal(plain.labels, l_ref)
    assert bounded.n_iter == plain.n_iter == it_ref
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(bounded.centroids, C_ref, rtol=rtol, atol=rtol)
    assert bounded.inertia == pytest.approx(inertia_ref, rel=rtol)
    assert skipped and min(skipped) < 0.5


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_bounded_lloyd_snapshot_merging(isa, rng, dtype):
    """With room for only two centre snapshots the oldest epochs are merged (bounds loosened onto
    the next epoch) every iteration: still the reference's labels, centroids and iteration count."""
    X, _ = blobs(rng, 2500, 9, 11, spread=2.0, dtype=dtype)
    init = X[:11].copy()
    res = ops.kmeans_fit(X, 11, init=init, n_iter=40, tol=0.0, backend="cpu",
                         options=ops.LloydOptions(bounded=True, snapshot_bytes=1))
    C_ref, l_ref, inertia_ref, it_ref = ref.kmeans_fit(X, 11, init=init, n_iter=40, tol=0.0)
    np.testing.assert_array_equal(res.labels, l_ref)
    assert res.n_iter == it_ref
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(res.centroids, C_ref, rtol=rtol, atol=rtol)
    assert res.inertia == pytest.approx(inertia_ref, rel=rtol)


def test_bounded_lloyd_native_helpers_reject_bad_state(rng):
    """The in-place state must have exactly the documented dtypes: a converted copy would lose updates."""
    from contextrag.ops._backend import native
    C = native()
    if C is None:
        pytest.skip("native extension not built")
    X = rng.random((5, 3)).astype(np.float32)
    Cc = X[:2].copy()
    st = [np.zeros(5, np.int64), np.zeros(5), np.zeros(5, np.int32), np.zeros((5, 2), np.float32),
          np.zeros(5, np.int32), np.zeros(5, np.float32)]
    disp = np.zeros((1, 2))
    assert C.elkan_filter(X, Cc, tuple(st), disp, 0).dtype == np.int64
    bad = list(st)
    bad[1] = np.zeros(5, np.float32)
    with pytest.raises(TypeError, match="upper"):
        C.elkan_filter(X, Cc, tuple(bad), disp, 0)
    bad = list(st)
    bad[4] = np.full(5, 3, np.int32)                  # an epoch with no displacement row
    with pytest.raises(ValueError, match="epochs"):
        C.elkan_filter(X, Cc, tuple(bad), disp, 0)
    np.testing.assert_array_equal(C.gather_rows(X, np.array([4, 0, 4])), X[[4, 0, 4]])
    with pytest.raises(ValueError, match="rows"):
        C.gather_rows(X, np.array([5]))
    np.testing.assert_allclose(C.sq_dist_to(X, np.ones(3)), ((X.astype(np.float64) - 1) ** 2).sum(1))
    V = rng.random((2, 3))
    np.testing.assert_allclose(C.sq_dist_to(X, V), ((X.astype(np.float64)[:, None] - V) ** 2).sum(2))
    with pytest.raises(ValueError, match="v must be"):
        C.sq_dist_to(X, np.ones(4))



@pytest.mark.parametrize("share", [0.0, 0.05, 0.4, 0.9])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_move_stats_equals_fresh_sums(rng, share, dtype):
    """Moving rows between clusters in place gives the sums, Σq and counts computed afresh for the new
    labels, for a few moved rows (add and subtract), most rows (rebuilt from scratch) and with a row
    subset; float32 rows sum exactly in float64, so those sums are equal to the last bit."""
    from contextrag.ops._backend import native
    C = native()
    if C is None or not hasattr(C, "move_stats"):
        pytest.skip("native extension not built")
    n, d, k = 1001, 37, 13
    X = rng.standard_normal((n, d)).astype(dtype)
    q = rng.random(n)
    old = rng.integers(0, k, n)
    new = old.copy()
    mv = rng.random(n) < share
    new[mv] = rng.integers(0, k, int(mv.sum()))
    S, cnt = C.centroid_sums(X, old, k, True)
    Q = np.bincount(old, weights=q, minlength=k)
    moved = C.move_stats(X, None, old, new, q, S, Q, cnt)
    assert moved == int((old != new).sum())
    S_ref, cnt_ref = C.centroid_sums(X, new, k, True)
    np.testing.assert_array_equal(cnt, cnt_ref)
    if dtype == np.float32:
        np.testing.assert_array_equal(S, S_ref)
    else:
        np.testing.assert_allclose(S, S_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Q, np.bincount(new, weights=q, minlength=k), rtol=1e-12, atol=1e-12)
    # the same through a row subset: old and new are then the subset's labels
    rows = np.flatnonzero(rng.random(n) < 0.5)
    lab = new.copy()
    sub_new = rng.integers(0, k, rows.size)
    C.move_stats(X, rows, lab[rows], sub_new, q, S, Q, cnt)
    lab[rows] = sub_new
    S_ref, cnt_ref = C.centroid_sums(X, lab, k, True)
    np.testing.assert_array_equal(cnt, cnt_ref)
    np.testing.assert_allclose(S, S_ref, rtol=1e-12, atol=1e-12)


def test_move_stats_rejects_bad_input(rng):
    from contextrag.ops._backend import native
    C = native()
    if C is None or not hasattr(C, "move_stats"):
        pytest.skip("native extension not built")
    X = rng.random((6, 3)).astype(np.float32)
    lab = np.zeros(6, np.int64)
    q = np.zeros(6)
    S, Q, cnt = np.zeros((2, 3)), np.zeros(2), np.zeros(2, np.int64)
    with pytest.raises(TypeError, match="S"):       # a converted copy would lose the update
        C.move_stats(X, None, lab, lab, q, S.astype(np.float32), Q, cnt)
    with pytest.raises(TypeError, match="cnt"):
        C.move_stats(X, None, lab, lab, q, S, Q, cnt.astype(np.int32))
    with pytest.raises(ValueError, match="labels"):
        C.move_stats(X, None, lab, np.full(6, 2, np.int64), q, S, Q, cnt)
    with pytest.raises(ValueError, match="rows"):
        C.move_stats(X, np.array([0, 9]), lab[:2], lab[:2] + 1, q, S, Q, cnt)
    with pytest.raises(ValueError, match="rows must be a 1-D"):
        C.move_stats(X, np.array([0, 1, 2]), lab[:2], lab[:2] + 1, q, S, Q, cnt)
    with pytest.raises(ValueError, match="one entry per row"):
        C.move_stats(X, None, lab[:3], lab[:3], q, S, Q, cnt)
    assert C.move_stats(X, None, lab, lab, q, S, Q, cnt) == 0

@pytest.mark.parametrize("screen", [True, False])
def test_bounded_lloyd_near_ties_exact(isa, rng, screen):
    """Points a hair off the bisectors of centre pairs (1e-4 apart, far below the bf16 GEMM's error):
    with bf16 screening (where the CPU has it) the near-tied candidates are compared by exact
    distance, so every label is the float64 reference's nearest centre of the returned centroids."""
    k, d = 9, 64
    C = rng.standard_normal((k, d)).astype(np.float32)
    a, b = rng.integers(0, k, 4000), rng.integers(0, k, 4000)
    t = 0.5 + rng.choice([-1e-4, 1e-4], 4000)[:, None]
    X = (t * C[a] + (1 - t) * C[b] + 1e-3 * rng.standard_normal((4000, d))).astype(np.float32)
    res = ops.kmeans_fit(X, k, init=C, n_iter=6, tol=0.0, backend="cpu", max_points_per_centroid=None,
                         options=ops.LloydOptions(bounded=True, bf16_screen=screen))
    lab_ref, _ = ref.kmeans_assign(X, res.centroids)
    np.testing.assert_array_equal(res.labels, lab_ref)
    C_ref, l_ref, _, it_ref = ref.kmeans_fit(X, k, init=C, n_iter=6, tol=0.0)
    np.testing.assert_array_equal(res.labels, l_ref)
    np.testing.assert_allclose(res.centroids, C_ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,k,d,spread", [(5000, 7, 5, 6.0), (333, 40, 5, 6.0), (50, 50, 5, 6.0),
                                          (3000, 40, 384, 0.3), (2000, 24, 33, 0.05)])
def test_kmeans_plus_plus_native_equals_torch_and_ref(isa, rng, monkeypatch, dtype, n, k, d, spread):
    """The native seeding (which skips the candidate distances its triangle test settles) and the
    GEMM-per-step torch path draw the same rows as the reference (subsample, candidates, greedy
    choice), for k·64 < n and for the whole set; well-separated clusters (most pairs skipped) and
    clusters close to their own spread in 384 and 33 dimensions (the test's rounding margin matters)."""
    from contextrag.ops import kmeans as K
    if K._native_fn("kmeanspp") is None:
        pytest.skip("native extension not built")
    X = (rng.standard_normal((n, d)) + spread * rng.standard_normal((k, d))[rng.integers(0, k, n)]).astype(dtype)
    native = K._kmeans_plus_plus(torch.from_numpy(X), k, 11).numpy()
    np.testing.assert_array_equal(native, ref.kmeans_plus_plus(X, k, 11).astype(dtype))
    real = K._native_fn
    monkeypatch.setattr(K, "_native_fn", lambda name: None if name == "kmeanspp" else real(name))
    np.testing.assert_array_equal(K._kmeans_plus_plus(torch.from_numpy(X), k, 11).numpy(), native)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_kmeans_plus_plus_picks_do_not_depend_on_the_thread_count(threads):
    """The native seeding runs its steps on one thread or several (several from ~4M element operations
    a step, falling back to one after two stalled steps): the picks equal the float64 reference's
    with any OpenMP team, here a sample in that band (2,560 rows × 5 candidates × 384)."""
    import os
    import subprocess
    import sys
    from contextrag.ops import kmeans as K
    if K._native_fn("kmeanspp") is None:
        pytest.skip("native extension not built")
    code = (
        "import numpy as np, torch\n"
        "from contextrag import ref\n"
        "from contextrag.ops import kmeans as K\n"
        "rng = np.random.default_rng(5)\n"
        "X = (rng.standard_normal((3000, 384)) + 0.3 * rng.standard_normal((40, 384))[rng.integers(0, 40, 3000)])"
        ".astype(np.float32)\n"
        "got = K._kmeans_plus_plus(torch.from_numpy(X), 40, 11).numpy()\n"
        "np.testing.assert_array_equal(got, ref.kmeans_plus_plus(X, 40, 11).astype(np.float32))\n"
        "print('ok')\n")
    env = dict(os.environ, OMP_NUM_THREADS=threads)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_kmeans_plus_plus_degenerate_and_bad_draws():
    """All points equal: ΣD² = 0 after the first centre, draws fall back to uniform rows (as the ref)."""
    from contextrag.ops import kmeans as K
    X = np.ones((30, 3))
    np.testing.assert_array_equal(K._kmeans_plus_plus(torch.from_numpy(X), 4, 0).numpy(), ref.kmeans_plus_plus(X, 4, 0))
    fn = K._native_fn("kmeanspp")
    if fn is None:
        pytest.skip("native extension not built")
    with pytest.raises(ValueError, match="first"):
        fn(X, 30, np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"U must hold draws in \[0, 1\)"):
        fn(X, 0, np.ones((3, 2)))


def test_kmeans_plus_plus_spreads_and_random_init(rng):
    """Greedy k-means++ (on its subsample) puts one seed in each of 8 well-separated blobs, and the
    fit from it reaches the blobs' partition; init='random' draws k distinct rows."""
    from contextrag.ops import kmeans as K
    centres = rng.standard_normal((8, 16)) * 50
    X = (centres[np.repeat(np.arange(8), 700)] + rng.standard_normal((5600, 16))).astype(np.float32)
    C0 = K._kmeans_plus_plus(torch.from_numpy(X), 8, 3).numpy()
    assert len(set(ref.kmeans_assign(centres, C0.astype(np.float64))[0].tolist())) == 8 or \
        len(set(ref.kmeans_assign(C0.astype(np.float64), centres)[0].tolist())) == 8
    res = ops.kmeans_fit(X, 8, seed=3)
    truth = np.repeat(np.arange(8), 700)
    assert all(len(set(res.labels[truth == b].tolist())) == 1 for b in range(8))
    Cr = K._initial_centroids(torch.from_numpy(X), 8, "random", 5).numpy()
    assert len({tuple(r) for r in Cr}) == 8 and all((X == r).all(axis=1).any() for r in Cr)


def test_lloyd_options_rejected():
    with pytest.raises(TypeError, match="options must be an ops.LloydOptions"):
        ops.kmeans_fit(np.zeros((4, 2)), 2, options={"bounded": False})


def _run_isa(env_isa: str, code: str):
    import os
    import subprocess
    import sys
    env = dict(os.environ, CONTEXTRAG_ISA=env_isa)
    env.pop("CONTEXTRAG_CPU_ISA", None)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


_FORCED_FIT = """
import numpy as np
from contextrag import ops, ref
from contextrag.ops._backend import native
rng = np.random.default_rng(5)
X = (rng.standard_normal((1500, 24)) + 4 * rng.standard_normal((10, 24))[rng.integers(0, 10, 1500)]).astype(np.float32)
init = X[:10].copy()
res = ops.kmeans_fit(X, 10, init=init, n_iter=30, tol=0.0, options=ops.LloydOptions(bounded=True))
C_ref, l_ref, _, it_ref = ref.kmeans_fit(X, 10, init=init, n_iter=30, tol=0.0)
assert (np.asarray(res.labels) == l_ref).all() and res.n_iter == it_ref
U = ops.fcm_memberships(X, init, m=2.0)
U_ref = ref.fcm_memberships(X, init, m=2.0)
assert np.abs(np.asarray(U) - U_ref).max() < 1e-4
print(native().cpu_isa(), native().bf16_supported(), native().matrix_engine())
"""


@pytest.mark.parametrize("want", ["generic", "avx2", "avx512", "amx"])
def test_forced_isa_in_subprocess(want):
    """CONTEXTRAG_ISA forces the dispatch for the whole process: the bounded fit and the FCM
    epilogue still give the reference's results, bf16 screening is off below AVX-512, and the AMX
    tiles run only under "amx" (or auto), never under a forced "avx512"."""
    from contextrag.ops._backend import native
    C = native()
    if C is None or not hasattr(C, "isa_env_error"):
        pytest.skip("native extension not built")
    if not C.cpu_isa_supported(want):
        pytest.skip(f"{want} not supported on this CPU")
    r = _run_isa(want, _FORCED_FIT)
    assert r.returncode == 0, r.stderr
    if want in ("generic", "avx2"):
        assert r.stdout.split() == [want, "False", "none"]
    else:
        assert r.stdout.split() == ["avx512", str(C.bf16_supported()), "amx" if want == "amx" else "none"]


@pytest.mark.parametrize("bad,msg", [("sse9", "must be one of"), ("avx512", "does not support"),
                                     ("amx", "does not support")])
def test_forced_isa_rejected(bad, msg):
    """An unknown ISA, or one the CPU lacks, is a clear ValueError on first use, not a silent fallback."""
    from contextrag.ops._backend import native
    C = native()
    if C is None or not hasattr(C, "isa_env_error"):
        pytest.skip("native extension not built")
    if bad in ("avx512", "amx") and C.cpu_isa_supported(bad):
        pytest.skip(f"this CPU runs {bad}")
    r = _run_isa(bad, "import numpy as np\nfrom contextrag import ops\nops.kmeans_fit(np.ones((4, 2)), 2)")
    assert r.returncode != 0
    assert "ValueError" in r.stderr and "CONTEXTRAG_ISA" in r.stderr and msg in r.stderr



@pytest.mark.filterwarnings("ignore:kmeans. CONTEXTRAG_PRECISION=bf16 needs")
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_assign_rejects_nonfinite_rows_after_the_kernel(isa, rng, monkeypatch, precision, dtype, bad):
    """kmeans_assign checks X through the rows' exact d² (the CPU kernels run first): a NaN or inf
    anywhere, on any tile path and in any row or column remainder, is still the ValueError naming X,
    and a finite X whose d² overflows float32 is returned, not rejected."""
    monkeypatch.setenv("CONTEXTRAG_PRECISION", precision)
    X = rng.standard_normal((77, 37)).astype(dtype)
    C = X[:5].copy()
    for r, c in ((0, 0), (76, 36), (40, 17)):
        Y = X.copy()
        Y[r, c] = bad
        with pytest.raises(ValueError, match=r"^X contains NaN or inf"):
            ops.kmeans_assign(Y, C, backend="cpu")
    if dtype == np.float32:
        Y = X.copy()
        Y[3] = 3e19   # finite, but ‖x − c‖² is past float32's range
        labels, d2 = ops.kmeans_assign(Y, C, backend="cpu")
        lab_ref, _ = ref.kmeans_assign(Y.astype(np.float64), C.astype(np.float64))
        np.testing.assert_array_equal(labels, lab_ref)
        assert np.isinf(d2[3]) and np.isfinite(np.delete(d2, 3)).all()
