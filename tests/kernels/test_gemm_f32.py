"""Our fp32 distance tiles (csrc/cpu/gemm_f32.cpp, microkernel per ISA): gemm_f32 and kmeans_assign_f32
against the float64 reference, on odd shapes (row and 16-column tails, one row, one centre), under
each instruction set."""
import numpy as np
import pytest

from contextrag import ops, ref
from contextrag.ops import native

Cn = native()
needs_f32 = pytest.mark.skipif(Cn is None or not hasattr(Cn, "gemm_f32"), reason="no native fp32 tiles")


@needs_f32
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (7, 3, 2), (9, 17, 16), (33, 384, 47), (130, 385, 96), (8, 5, 49)])
def test_gemm_f32_matches_float64(rng, isa, M, K, N):
    A = rng.standard_normal((M, K)).astype(np.float32)
    B = rng.standard_normal((N, K)).astype(np.float32)            # a centre matrix: out = bias − 2 A·Bᵀ
    bias = rng.standard_normal(N).astype(np.float32)
    out = np.full((M, N), np.nan, np.float32)
    Cn.gemm_f32(A, Cn.f32_pack_b(B), N, out, -2.0, bias)
    want = bias - 2.0 * (A.astype(np.float64) @ B.astype(np.float64).T)
    bound = 2.0 * (K + 2) * 2.0 ** -24 * (np.abs(A) @ np.abs(B).T) * 2 + 2.0 ** -23 * np.abs(want) + 1e-30
    assert np.all(np.abs(out - want) <= bound)
    Cn.gemm_f32(A, Cn.f32_pack_b(B), N, out)                     # alpha 1, no bias
    np.testing.assert_allclose(out, A.astype(np.float64) @ B.astype(np.float64).T, rtol=1e-4, atol=1e-4 * K)


@needs_f32
def test_gemm_f32_bad_input(rng):
    A = rng.standard_normal((4, 6)).astype(np.float32)
    Bp = Cn.f32_pack_b(rng.standard_normal((5, 6)).astype(np.float32))
    assert Bp.shape == (6, 16) and np.all(Bp[:, 5:] == 0)
    with pytest.raises(ValueError, match="out must be"):
        Cn.gemm_f32(A, Bp, 5, np.empty((4, 4), np.float32))
    with pytest.raises(ValueError, match="N must be"):
        Cn.gemm_f32(A, Bp, 17, np.empty((4, 17), np.float32))
    with pytest.raises(ValueError, match="number of columns"):
        Cn.gemm_f32(A[:, :5], Bp, 5, np.empty((4, 5), np.float32))
    with pytest.raises(ValueError, match="bias"):
        Cn.gemm_f32(A, Bp, 5, np.empty((4, 5), np.float32), 1.0, np.ones(3, np.float32))


@needs_f32
@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (7, 3, 2), (97, 5, 7), (129, 17, 13), (1001, 385, 33), (64, 96, 100)])
def test_kmeans_assign_f32_matches_ref(rng, isa, n, d, k):
    """Well-separated clusters (no rounding-level ties): the float64 reference's labels; d² exact or,
    with xn, the GEMM form; duplicate centres go to the first index."""
    centres = rng.standard_normal((k, d)) * 3
    X = (centres[rng.integers(0, k, n)] + 0.05 * rng.standard_normal((n, d))).astype(np.float32)
    C = np.concatenate([centres, centres[:1]]).astype(np.float32)        # last = a duplicate of 0
    want_l, want_d2 = ref.kmeans_assign(X.astype(np.float64), C.astype(np.float64))
    lab = np.empty(n, np.int64)
    d2 = np.empty(n, np.float32)
    cn = np.einsum("ij,ij->i", C, C)
    Cn.kmeans_assign_f32(X, Cn.f32_pack_b(C), C, cn, lab, d2)
    np.testing.assert_array_equal(lab, want_l)
    assert k not in set(lab.tolist())
    np.testing.assert_allclose(d2, want_d2, rtol=1e-6, atol=1e-6)
    xn = np.einsum("ij,ij->i", X, X)
    Cn.kmeans_assign_f32(X, Cn.f32_pack_b(C), C, cn, lab, d2, xn)
    np.testing.assert_array_equal(lab, want_l)
    scale = xn + cn.max()
    assert np.all(np.abs(d2 - want_d2) <= 4 * (d + 4) * 2.0 ** -24 * scale + 1e-6)
    with pytest.raises(ValueError, match="Cp must be C packed"):
        Cn.kmeans_assign_f32(X, Cn.f32_pack_b(np.ones((k + 17, d), np.float32)), C, cn, lab, d2)
    if d > 1:
        with pytest.raises(ValueError, match="Cp must have X's number of columns"):
            Cn.kmeans_assign_f32(X, Cn.f32_pack_b(C[:, 1:]), C, cn, lab, d2)


@needs_f32
def test_kmeans_assign_routes_to_f32_tiles(rng, monkeypatch, isa):
    """ops.kmeans_assign on float32 CPU rows runs the fp32 tiles when the bf16 path is off, and gives the
    same labels as the float64 reference and as torch's GEMM path."""
    from contextrag.ops import kmeans as K
    monkeypatch.setenv("CONTEXTRAG_PRECISION", "fp32")
    X = rng.standard_normal((500, 24)).astype(np.float32)
    C = X[:9].copy() + 0.01
    calls = []
    real = K._f32_assign
    monkeypatch.setattr(K, "_f32_assign", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    lab, _ = ops.kmeans_assign(X, C)
    assert calls
    np.testing.assert_array_equal(lab, ref.kmeans_assign(X.astype(np.float64), C.astype(np.float64))[0])
    monkeypatch.setattr(K, "use_native_f32", lambda X: False)
    np.testing.assert_array_equal(ops.kmeans_assign(X, C)[0], lab)
