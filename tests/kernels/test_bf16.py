"""The bf16-input / fp32-output GEMM (AVX512-BF16) and fcm_fit(precision='bf16' | 'mixed')."""
import numpy as np
import pytest
import torch

from contextrag import ops, ref
from contextrag.ops import fcm as F
from contextrag.ops._backend import native

Cn = native()
needs_bf16 = pytest.mark.skipif(Cn is None or not Cn.bf16_supported(), reason="CPU without AVX512-BF16")


def bf16_round(a):
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).bfloat16().double().numpy()


@needs_bf16
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (7, 3, 5), (9, 2, 17), (97, 129, 16), (129, 7, 97),
                                   (13, 2049, 33), (96, 2500, 385)])
def test_gemm_bf16_matches_float64_of_rounded_inputs(rng, M, K, N):
    """Exactly the products of the bf16-rounded inputs, summed in fp32: within fp32 accumulation
    error of the float64 result, for odd shapes (row and column remainders, odd K, K chunks)."""
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32)
    want = bias - 2.0 * (bf16_round(A) @ bf16_round(B))
    bound = 2.0 * (K + 4) * 2.0 ** -24 * (np.abs(bf16_round(A)) @ np.abs(bf16_round(B))) + 1e-6 * np.abs(bias)
    out = np.full((M, N), np.nan, np.float32)
    Cn.gemm_bf16(Cn.bf16_pack_a(A), Cn.bf16_pack_b(B), N, out, -2.0, bias)
    assert np.all(np.abs(out - want) <= bound)
    # the transposed packers give the same operands, hence the same bits
    out_t = np.empty_like(out)
    Cn.gemm_bf16(Cn.bf16_pack_a(np.ascontiguousarray(A.T), True), Cn.bf16_pack_b(np.ascontiguousarray(B.T), True),
                 N, out_t, -2.0, bias)
    np.testing.assert_array_equal(out_t, out)


@needs_bf16
def test_gemm_bf16_rounding_and_bad_input(rng):
    # round to nearest even on the bf16 grid, like torch's conversion; NaN stays NaN
    x = np.array([[1.0, 1.00390625, 1.01171875, -3.3e-39, np.inf, np.nan, 65504.0]], np.float32)
    packed = Cn.bf16_pack_b(np.ascontiguousarray(x.T))          # (K2=4, 16) pairs
    halves = packed.view(np.uint16).reshape(4, 16, 2)[:, 0, :].reshape(-1)[:7]
    want = torch.from_numpy(x[0]).bfloat16().view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(halves[:5], want[:5])
    assert (halves[5] & 0x7F80) == 0x7F80 and (halves[5] & 0x7F) != 0   # a NaN
    A = Cn.bf16_pack_a(rng.standard_normal((4, 6)).astype(np.float32))
    B = Cn.bf16_pack_b(rng.standard_normal((6, 5)).astype(np.float32))
    with pytest.raises(ValueError, match="out"):
        Cn.gemm_bf16(A, B, 5, np.empty((4, 4), np.float32))
    with pytest.raises(ValueError, match="packed for N"):
        Cn.gemm_bf16(A, B, 17, np.empty((4, 17), np.float32))
    with pytest.raises(ValueError, match="k-pairs"):
        Cn.gemm_bf16(A, Cn.bf16_pack_b(np.ones((8, 5), np.float32)), 5, np.empty((4, 5), np.float32))
    # pack_a into a caller's buffer (the bounded k-means puts it on ordinary pages): same bits
    X = rng.standard_normal((5, 7)).astype(np.float32)
    buf = np.full((5, 4), 7, np.uint32)
    assert Cn.bf16_pack_a(X, False, buf) is not None
    np.testing.assert_array_equal(buf, Cn.bf16_pack_a(X))
    with pytest.raises(ValueError, match="out must be"):
        Cn.bf16_pack_a(X, False, np.empty((5, 3), np.uint32))
    with pytest.raises(TypeError, match="uint32"):
        Cn.bf16_pack_a(X, False, np.empty((5, 4), np.int32))


def _clusters(rng, n=3000, d=24, k=6, noise=0.2):
    cent = rng.standard_normal((k, d)) * 2
    X = cent[rng.integers(0, k, n)] + noise * rng.standard_normal((n, d))
    return X.astype(np.float32)


@needs_bf16
def test_fcm_fit_bf16_close_to_full(rng):
    X = _clusters(rng)
    init = X[rng.choice(len(X), 6, replace=False)]
    full = ops.fcm_fit(X, 6, 2.0, n_iter=40, tol=0.0, init=init)
    half = ops.fcm_fit(X, 6, 2.0, n_iter=40, tol=0.0, init=init, precision="bf16")
    assert half.memberships.dtype == np.float32 and half.centers.shape == full.centers.shape
    assert half.partition_coefficient == pytest.approx(full.partition_coefficient, rel=1e-3)
    assert half.objective == pytest.approx(full.objective, rel=1e-3)
    assert np.abs(half.memberships - full.memberships).max() < 1e-2
    np.testing.assert_allclose(half.memberships.sum(axis=1), 1.0, atol=1e-5)
    # the reference at the bf16 fit's centres gives (close to) its memberships
    np.testing.assert_allclose(half.memberships, ref.fcm_memberships(X, half.centers, 2.0), atol=5e-3)


@needs_bf16
def test_fcm_fit_bf16_points_on_centres(rng):
    """Every point sits on one of 3 centres. The bf16 centre sums land within bf16 rounding of the
    points, where the distances are recomputed exactly: memberships crisp to ~1e-5, not smeared by
    the GEMM form's cancellation."""
    X = _clusters(rng, n=400, d=8, k=3, noise=0.0)
    res = ops.fcm_fit(X, 3, 2.0, n_iter=5, tol=0.0, init=np.unique(X, axis=0)[:3], precision="bf16")
    assert res.memberships.max(axis=1).min() > 1 - 1e-4
    assert res.partition_coefficient > 1 - 1e-4



@needs_bf16
def test_fcm_fit_mixed_as_close_as_full(rng):
    """precision='mixed' (bf16, then full precision for the last iterations) lands as close to the
    float64 fit as the float32 one does, far closer than bf16 throughout."""
    X = _clusters(rng)
    init = X[rng.choice(len(X), 6, replace=False)]
    f64 = ops.fcm_fit(X.astype(np.float64), 6, 2.0, n_iter=40, tol=0.0, init=init.astype(np.float64))
    dev = {}
    for p in ("full", "bf16", "mixed"):
        r = ops.fcm_fit(X, 6, 2.0, n_iter=40, tol=0.0, init=init, precision=p)
        assert r.n_iter == 40 and r.memberships.dtype == np.float32
        dev[p] = np.abs(r.memberships - f64.memberships).max()
        if p == "mixed":
            assert r.partition_coefficient == pytest.approx(f64.partition_coefficient, rel=1e-6)
            assert r.objective == pytest.approx(f64.objective, rel=1e-5)   # J sums in float32 rows
    assert dev["mixed"] < 3 * dev["full"] + 1e-6
    assert dev["mixed"] < dev["bf16"] / 10


@needs_bf16
def test_fcm_fit_mixed_stops_on_a_full_iteration(rng):
    """With tol > 0, a bf16 iteration meeting tol is not the end: the fit goes on in full precision
    until a full iteration meets it, so one more full iteration barely moves the memberships."""
    X = _clusters(rng)
    init = X[rng.choice(len(X), 6, replace=False)]
    res = ops.fcm_fit(X, 6, 2.0, n_iter=300, tol=1e-5, init=init, precision="mixed")
    assert res.n_iter < 300
    nxt = ops.fcm_fit(X, 6, 2.0, n_iter=1, tol=0.0, init=res.centers)
    assert np.abs(nxt.memberships - res.memberships).max() < 2e-5

def test_fcm_fit_precision_validation_and_fallback(rng, monkeypatch):
    X = _clusters(rng, n=200, d=5, k=3)
    with pytest.raises(ValueError, match="precision"):
        ops.fcm_fit(X, 3, precision="fp8")
    with pytest.raises(ValueError, match="float32"):
        ops.fcm_fit(X.astype(np.float64), 3, precision="bf16")
    with pytest.raises(ValueError, match="float32"):
        ops.fcm_fit(X.astype(np.float64), 3, precision="mixed")
    monkeypatch.setattr(F, "bf16_available", lambda: False)
    full = ops.fcm_fit(X, 3, seed=1, n_iter=10)
    with pytest.warns(RuntimeWarning, match="bf16"):
        fallback = ops.fcm_fit(X, 3, seed=1, n_iter=10, precision="bf16")
    np.testing.assert_array_equal(fallback.memberships, full.memberships)
    with pytest.warns(RuntimeWarning, match="AVX512-BF16"):
        fallback = ops.fcm_fit(X, 3, seed=1, n_iter=10, precision="mixed")
    np.testing.assert_array_equal(fallback.memberships, full.memberships)


def test_fcm_epilogue_outputs(rng, isa):
    """The fused epilogue (each ISA's build): W = U², transposed bf16 W into a column range, J, max |ΔU|."""
    if Cn is None:
        pytest.skip("native extension not built")
    X = rng.standard_normal((37, 5)).astype(np.float32)
    C = rng.standard_normal((7, 5)).astype(np.float32)
    G = ((C * C).sum(1)[None] - 2 * X @ C.T).astype(np.float32)
    xn = (X * X).sum(1).astype(np.float32)
    U, W, prev = (np.empty((37, 7), np.float32) for _ in range(3))
    J = np.empty(37, np.float32)
    prev[:] = 0.5
    Wt = np.zeros((7, 40), np.uint16)
    delta = Cn.fcm_epilogue(G, X, C, xn, 2.0, U, W, prev, J, 0.0, Wt, 3)
    np.testing.assert_allclose(U, ref.fcm_memberships(X, C, 2.0), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(W, U * U, rtol=1e-6)
    assert delta == pytest.approx(np.abs(U - 0.5).max(), rel=1e-6)
    d2 = ((X[:, None, :].astype(np.float64) - C[None]) ** 2).sum(-1)
    np.testing.assert_allclose(J, (U.astype(np.float64) ** 2 * d2).sum(1), rtol=1e-4)
    wt = torch.from_numpy(np.ascontiguousarray(W.T)).bfloat16().view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(Wt[:, 3:40], wt)
    assert not Wt[:, :3].any()
    with pytest.raises(ValueError, match="Wt"):
        Cn.fcm_epilogue(G, X, C, xn, 2.0, U, None, None, None, 0.0, Wt, 4)


# ---- k-means on bf16 tiles (kmeans_assign_bf16) and the precision choice ----------------------

def _mixture(rng, n, d, k, noise):
    """Structured rows (k components, unit norm as sentence embeddings) with Gaussian noise."""
    cent = rng.standard_normal((k, d))
    X = cent[rng.integers(0, k, n)] + noise * rng.standard_normal((n, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)
    return X.astype(np.float32)


@pytest.fixture
def precision(monkeypatch):
    def force(value):
        monkeypatch.setenv("CONTEXTRAG_PRECISION", value)
    return force


@needs_bf16
@pytest.mark.parametrize("n,d,k,noise", [(1, 1, 1, 0.0), (7, 3, 2, 1.0), (97, 5, 7, 0.3), (129, 17, 13, 2.0),
                                         (1000, 33, 9, 0.5), (3001, 384, 96, 1.2), (257, 385, 17, 5.0),
                                         (64, 2050, 3, 1.0)])
def test_kmeans_assign_bf16_equals_float64_reference(rng, precision, n, d, k, noise):
    """Labels of the bf16 tiles after the exact re-check = the float64 reference's, on odd shapes (row
    blocks, 16-column vectors and k-pair remainders, a K chunk), structured and unstructured rows; d² exact."""
    X = _mixture(rng, n, d, max(k, 2), noise)
    C = X[rng.choice(n, k, replace=False)] + 0.01 * rng.standard_normal((k, d)).astype(np.float32)
    want_l, want_d2 = ref.kmeans_assign(X.astype(np.float64), C.astype(np.float64))
    precision("bf16")
    lab, d2 = ops.kmeans_assign(X, C)
    np.testing.assert_array_equal(lab, want_l)
    np.testing.assert_allclose(d2, want_d2, rtol=1e-6, atol=1e-6 * float(want_d2.max() + 1e-30))
    precision("fp32")
    lab32, d2_32 = ops.kmeans_assign(X, C)
    np.testing.assert_array_equal(lab32, lab)
    assert float(d2.sum()) == pytest.approx(float(d2_32.sum()), rel=1e-6)


@needs_bf16
def test_kmeans_assign_bf16_ties_and_bound(rng, precision):
    """Rows the bf16 bound cannot settle are re-checked: duplicated centres (exact ties: the first
    index), centres 1e-5 apart (far inside the bf16 error), a row on a centre, a zero row."""
    from contextrag.ops import kmeans as K
    d = 48
    base = rng.standard_normal((4, d)).astype(np.float32)
    C = np.concatenate([base, base[:1], base[1:2] * (1 + 1e-5)]).astype(np.float32)   # 4 = dup of 0; 5 ≈ 1
    X = np.concatenate([base + 0.3 * rng.standard_normal((4, d)).astype(np.float32), base[2:3],
                        np.zeros((1, d), np.float32), rng.standard_normal((200, d)).astype(np.float32)])
    want_l, want_d2 = ref.kmeans_assign(X.astype(np.float64), C.astype(np.float64))
    precision("bf16")
    stats = []
    lab, d2 = K._bf16_assign(torch.from_numpy(X), torch.from_numpy(C), stats=stats)
    np.testing.assert_array_equal(lab.numpy(), want_l)
    assert 4 not in set(lab.tolist())             # the duplicate never wins a tie
    assert d2[4] == 0.0
    assert 0.0 < stats[0] < 1.0                   # the near-duplicates are re-checked, not every row
    with pytest.raises(ValueError, match="Cp must be C packed"):
        Cn.kmeans_assign_bf16(Cn.bf16_pack_a(X), Cn.bf16_pack_b(np.ascontiguousarray(C[:, :10]), True), X, C, *(np.ones(6, np.float32),) * 4,
                              0.1, np.empty(len(X), np.int64), np.empty(len(X), np.float32))


@pytest.mark.skipif(Cn is None or not hasattr(Cn, "bf16_centre_terms"), reason="native extension not built")
@pytest.mark.parametrize("k,d", [(1, 1), (3, 17), (40, 384), (7, 1000)])
def test_bf16_centre_terms_native_equals_numpy(rng, k, d):
    """The native centre terms are NumPy's up to the float64 sums' order, and the norms stay upper
    bounds of the exact ones (what the error bound needs)."""
    from contextrag.ops._bf16_bound import bf16_centre_terms, centre_terms_numpy
    C = (rng.standard_normal((k, d)) * rng.choice([1e-3, 1.0, 1e3], (k, 1))).astype(np.float32)
    C[0, 0] = 0.0
    got, want = bf16_centre_terms(C), centre_terms_numpy(C)
    for g, w in zip(got, want):
        assert g.dtype == np.float32 and g.shape == (k,)
        np.testing.assert_allclose(g, w, rtol=2e-7, atol=0)
    c64, cb = C.astype(np.float64), bf16_round(C).astype(np.float64)
    assert (got[1].astype(np.float64) >= np.linalg.norm(cb, axis=1)).all()
    assert (got[2].astype(np.float64) >= np.linalg.norm(cb - c64, axis=1)).all()


@needs_bf16
@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (45, 37, 5), (300, 384, 17), (67, 130, 40)])
def test_kmeans_assign_bf16_precomputed_row_terms(rng, isa, n, d, k):
    """A Lloyd loop's once-per-fit row terms (bf16_row_terms) give the bits a call computes itself,
    on the vector tiles and on AMX, whole and partial row blocks, prepacked rows or per-block ones;
    a wrong-shaped XT is a clear error."""
    from contextrag.ops import kmeans as K
    if isa not in ("avx512", "amx"):
        pytest.skip("the bf16 tiles run under AVX-512")
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[n // 2] = 0.0
    C = (X[rng.integers(0, n, k)] + 0.01 * rng.standard_normal((k, d))).astype(np.float32)
    T = Cn.bf16_row_terms(X, K.bf16_error_bound(d))
    assert T.shape == (n, 3) and T.dtype == np.float32 and (T >= 0).all()
    tX, tC = torch.from_numpy(X), torch.from_numpy(C)
    want_l, want_d2 = K._bf16_assign(tX, tC)
    for xp in (None, Cn.bf16_pack_a(X)):
        lab, d2 = K._bf16_assign(tX, tC, xp=xp, xt=T)
        np.testing.assert_array_equal(lab.numpy(), want_l.numpy())
        np.testing.assert_array_equal(d2.numpy(), want_d2.numpy())
    np.testing.assert_array_equal(want_l.numpy(), ref.kmeans_assign(X.astype(np.float64), C.astype(np.float64))[0])
    cn, cnorm, dcnorm, ctau = K.bf16_centre_terms(C)
    with pytest.raises(ValueError, match=r"XT must be bf16_row_terms"):
        Cn.kmeans_assign_bf16(None, Cn.bf16_pack_b(C, True), X, C, cn, cnorm, dcnorm, ctau, 0.1,
                              np.empty(n, np.int64), np.empty(n, np.float32), T[:, :2].copy())


@needs_bf16
def test_kmeans_assign_bf16_worst_rounding(rng, precision):
    """Rows and centres whose every element bf16 rounds by (almost) its unit roundoff 2^-8, all in one
    direction, so x̃·c̃ is off by ~2^-7‖x‖‖c‖ (twice a bound that took 2^-9 per operand), with pairs
    of centres whose true distances differ by far less: labels still equal the float64 reference's,
    and the bound is not so loose that every row is re-checked on plain data."""
    from contextrag.ops import kmeans as K
    d, n = 40, 300
    up = np.float32(1 + 2.0 ** -8 - 2.0 ** -20)          # rounds down to 1 (error ≈ 2^-8)
    signs = np.where(rng.random((n, d)) < 0.5, -1.0, 1.0).astype(np.float32)
    X = (signs * up * rng.integers(1, 3, (n, d))).astype(np.float32)
    base = X[:8].copy()
    # c_a = x exactly (its bf16 tile error is the largest) and c_b a representable point a hair farther
    C = np.concatenate([base, base * np.float32(1.0078125)]).astype(np.float32)
    want_l, want_d2 = ref.kmeans_assign(X.astype(np.float64), C.astype(np.float64))
    precision("bf16")
    lab, d2 = K._bf16_assign(torch.from_numpy(X), torch.from_numpy(C))
    np.testing.assert_array_equal(lab.numpy(), want_l)
    np.testing.assert_allclose(d2.numpy(), want_d2, rtol=1e-6, atol=1e-6)
    Y = _mixture(rng, 2000, 96, 12, 0.3)
    stats = []
    K._bf16_assign(torch.from_numpy(Y), torch.from_numpy(Y[:12].copy()), stats=stats)
    assert stats[0] < 0.5
    # rows packed up front (Xp, as a fit does) and rows rounded per block (Xp None) give the same
    from contextrag.ops._bf16_bound import bf16_centre_terms, bf16_error_bound
    Z = np.concatenate([Y[:37], np.full((1, 96), 3e19, np.float32)])    # ‖x‖² overflows float: bound ∞
    Cz = np.concatenate([Y[:5], np.zeros((1, 96), np.float32)])
    outs = []
    for xp in (Cn.bf16_pack_a(Z), None):
        lab, d2 = np.empty(len(Z), np.int64), np.empty(len(Z), np.float32)
        Cn.kmeans_assign_bf16(xp, Cn.bf16_pack_b(Cz, True), Z, Cz, *bf16_centre_terms(Cz), bf16_error_bound(96), lab, d2)
        outs.append(lab)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], ref.kmeans_assign(Z.astype(np.float64), Cz.astype(np.float64))[0])


needs_amx = pytest.mark.skipif(Cn is None or not hasattr(Cn, "matrix_engine") or not Cn.cpu_isa_supported("amx"),
                               reason="CPU (or OS) without AMX-BF16 tiles")


@needs_amx
@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (31, 33, 17), (32, 32, 16), (33, 384, 96), (65, 385, 100),
                                   (257, 31, 5), (1000, 2050, 48), (3001, 64, 200)])
def test_amx_tiles_equal_vector_tiles(rng, n, d, k):
    """The AMX tile path against the AVX512-BF16 one, on shapes with every remainder (rows past a
    32-row block, k-pairs past a 16-pair tile, an odd 16-column tile): the GEMM within fp32
    accumulation error of the float64 product of the rounded inputs (only the summation order
    differs), and the k-means assignment's labels and exact d² bit-equal (both settle every row the
    bound leaves open exactly), with X packed up front and rounded per block."""
    from contextrag.ops._bf16_bound import bf16_centre_terms, bf16_error_bound
    X = rng.standard_normal((n, d)).astype(np.float32)
    C = X[rng.choice(n, min(k, n), replace=False)] + 0.01 * rng.standard_normal((min(k, n), d)).astype(np.float32)
    k = len(C)
    cn = np.einsum("ij,ij->i", C, C).astype(np.float32)
    want = cn - 2.0 * (bf16_round(X) @ bf16_round(C).T)
    bound = 2.0 * (d + 4) * 2.0 ** -24 * (np.abs(bf16_round(X)) @ np.abs(bf16_round(C)).T) * 2 + 1e-6 * np.abs(cn)
    Xp, Cp = Cn.bf16_pack_a(X), Cn.bf16_pack_b(C, True)
    got = {}
    try:
        for engine in ("amx", "avx512"):
            Cn.set_cpu_isa(engine)
            assert Cn.matrix_engine() == ("amx" if engine == "amx" else "none")
            out = np.full((n, k), np.nan, np.float32)
            Cn.gemm_bf16(Xp, Cp, k, out, -2.0, cn)
            assert np.all(np.abs(out - want) <= bound), engine
            for xp in (Xp, None):
                lab, d2 = np.empty(n, np.int64), np.empty(n, np.float32)
                Cn.kmeans_assign_bf16(xp, Cp, X, C, *bf16_centre_terms(C), bf16_error_bound(d), lab, d2)
                got[engine, xp is None] = (lab, d2)
    finally:
        Cn.set_cpu_isa("auto")
    want_l, want_d2 = ref.kmeans_assign(X.astype(np.float64), C.astype(np.float64))
    for (lab, d2) in got.values():
        np.testing.assert_array_equal(lab, want_l)
        np.testing.assert_array_equal(d2, got["avx512", False][1])


def test_bf16_round_matches_torch(rng):
    from contextrag.ops._bf16_bound import bf16_round
    x = (rng.standard_normal(4096) * 10.0 ** rng.integers(-30, 30, 4096)).astype(np.float32)
    x[:4] = [1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -0.0, 1e-40]      # ties to even both ways, zero, denormal
    np.testing.assert_array_equal(bf16_round(x), torch.from_numpy(x).to(torch.bfloat16).float().numpy())


@pytest.mark.parametrize("forced", ["fp32", "bf16"])
@pytest.mark.parametrize("bounded", [True, False])
def test_kmeans_fit_both_precisions_equal_reference(rng, precision, isa, forced, bounded):
    """kmeans_fit with the precision forced, under each instruction set: the float64 reference's
    labels and centroids (well-separated mixture), inertia within 1e-4 relative. Where bf16 is not
    available (CONTEXTRAG_ISA below avx512) a forced bf16 runs fp32."""
    X = _mixture(rng, 1537, 67, 11, 0.4)
    C0 = X[rng.choice(len(X), 11, replace=False)].copy()
    precision(forced)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the one fallback warning (bf16 under avx2/generic)
        res = ops.kmeans_fit(X, 11, n_iter=15, tol=0.0, init=C0, max_points_per_centroid=None,
                             options=ops.LloydOptions(bounded=bounded))
    C_ref, lab_ref, inertia_ref, _ = ref.kmeans_fit(X.astype(np.float64), 11, n_iter=15, tol=0.0,
                                                    init=C0.astype(np.float64))
    np.testing.assert_array_equal(res.labels, lab_ref)
    np.testing.assert_allclose(res.centroids, C_ref, rtol=1e-5, atol=1e-6)
    assert res.inertia == pytest.approx(inertia_ref, rel=1e-4)


def test_precision_choice(monkeypatch, isa):
    """CONTEXTRAG_PRECISION forces the choice, CONTEXTRAG_ISA bounds it, auto follows the machine
    profile's rates; a bad value is an error naming the variable."""
    from contextrag.ops import _precision as P
    has = Cn is not None and Cn.bf16_supported()      # under the forced ISA
    monkeypatch.setenv("CONTEXTRAG_PRECISION", "fp32")
    assert P.choose("kmeans", exact=True) == "fp32"
    monkeypatch.setenv("CONTEXTRAG_PRECISION", "bf16")
    monkeypatch.setattr(P, "_warned", set())
    if has:
        assert P.choose("kmeans", exact=True) == "bf16"
        assert P.choose("fcm", exact=False) == "bf16"   # asked for: given even where approximate
    else:
        with pytest.warns(RuntimeWarning, match="CONTEXTRAG_PRECISION=bf16"):
            assert P.choose("kmeans", exact=True) == "fp32"
    monkeypatch.setenv("CONTEXTRAG_PRECISION", "auto")
    monkeypatch.setattr(P, "bf16_faster", lambda: True)
    engine = P.bf16_on_matrix_engine()
    assert engine == (isa == "amx")                      # the vector units' bf16 is not a matrix engine
    assert P.choose("kmeans", exact=True) == ("bf16" if has and engine else "fp32")
    monkeypatch.setattr(P, "bf16_on_matrix_engine", lambda: True)
    assert P.choose("kmeans", exact=True) == ("bf16" if has else "fp32")
    assert P.choose("fcm", exact=False) == "fp32"        # auto never picks an approximate path
    monkeypatch.setattr(P, "bf16_faster", lambda: False)
    assert P.choose("kmeans", exact=True) == "fp32"      # a probe showing bf16 slower wins
    monkeypatch.setenv("CONTEXTRAG_PRECISION", "fp16")
    with pytest.raises(ValueError, match="CONTEXTRAG_PRECISION must be one of fp32, bf16, auto"):
        P.choose("kmeans", exact=True)


def test_precision_reads_the_machine_profile(monkeypatch):
    """auto's rate comparison comes from contextrag.machine.profile() where that module exists."""
    import sys
    import types
    from contextrag.ops import _precision as P

    def fake(rates, isa=()):
        mod = types.ModuleType("contextrag.machine")
        mod.profile = lambda: types.SimpleNamespace(isa=set(isa), gemm_gflops=rates)
        monkeypatch.setitem(sys.modules, "contextrag.machine", mod)
        P.bf16_faster.cache_clear()

    try:
        fake({"fp32": 100.0, "bf16": 600.0, "int8": None})
        assert P.bf16_faster() is True
        fake({"fp32": 100.0, "bf16": 60.0, "int8": None}, {"avx512_bf16"})
        assert P.bf16_faster() is False
        fake({"fp32": None, "bf16": None, "int8": None}, {"avx2", "amx_bf16"})
        assert P.bf16_faster() is True
        fake({"fp32": None, "bf16": None}, {"avx2"})
        assert P.bf16_faster() is False
        # AVX512-BF16's 2.5-3x GEMM is not enough for the k-means tiles (their per-row work costs as
        # much again): bf16 from MIN_GEMM_RATIO on, and by flags only with a matrix engine
        fake({"fp32": 100.0, "bf16": 300.0}, {"avx512_bf16"})
        assert P.bf16_faster() is False
        fake({"fp32": 100.0, "bf16": 100.0 * P.MIN_GEMM_RATIO}, {"avx512_bf16"})
        assert P.bf16_faster() is True
        fake({"fp32": None, "bf16": None}, {"avx2", "avx512_bf16"})
        assert P.bf16_faster() is False
    finally:
        monkeypatch.undo()
        P.bf16_faster.cache_clear()


def test_fcm_fit_default_precision_follows_the_choice(rng, precision):
    """fcm_fit's default runs full precision under auto and fp32, bf16 only when
    CONTEXTRAG_PRECISION=bf16 asks for it (where the CPU has the kernels)."""
    X = _clusters(rng, n=300, d=9, k=4)
    full = ops.fcm_fit(X, 4, seed=1, n_iter=10, precision="full")
    for forced in ("auto", "fp32"):
        precision(forced)
        np.testing.assert_array_equal(ops.fcm_fit(X, 4, seed=1, n_iter=10).memberships, full.memberships)
    if Cn is not None and Cn.bf16_supported():
        precision("bf16")
        got = ops.fcm_fit(X, 4, seed=1, n_iter=10).memberships
        np.testing.assert_array_equal(got, ops.fcm_fit(X, 4, seed=1, n_iter=10, precision="bf16").memberships)
        assert not np.array_equal(got, full.memberships)
        np.testing.assert_allclose(got, full.memberships, atol=3e-2)   # bf16 memberships: approximate
