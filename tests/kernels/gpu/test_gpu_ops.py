"""Every GPU backend (triton, cuda) against the float64 reference, on a CUDA device.

Skipped without one (see conftest.py). Shapes are odd and cross the kernels' tile sizes (128-wide
semiring tiles, 64-centroid chunks, split reductions); the whole module is sized to run in well
under a minute on one H200, Triton compilation included.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import contextrag.ops as ops
from contextrag import ref
from contextrag.ops import _cuda, _fcm_gpu, _kmeans_gpu
from contextrag.ops import semiring as ops_semiring
from contextrag.ops._registry import IMPLS

from minsum_order import tolerance as minsum_tolerance

BACKENDS = ["triton", "cuda"]


def _need(backend):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    info = ops.backends()[backend]
    if not info["available"]:
        pytest.skip(f"{backend}: {info['detail']}")


def _rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.float64).to(dtype).cuda()


# (255, 17, 383) takes the 128×128 CUDA tiles; the others the 66×66 ones
SEMI_SHAPES = [(1, 1, 1), (7, 33, 65), (129, 7, 257), (33, 5001, 7), (130, 300, 131), (255, 17, 383)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("s,G,M", SEMI_SHAPES)
def test_semiring_ops_exact(backend, s, G, M):
    _need(backend)
    A, I, B = _rand(s, G, seed=1), _rand(G, M, seed=2), _rand(s, M, seed=3)
    up = ops.luk_up(A, I, backend=backend)
    assert torch.equal(up, torch.clamp_max(1.0 + (I[None] - A[:, :, None]).amin(dim=1), 1.0))
    down = ops.luk_down(B, I, backend=backend)
    assert torch.equal(down, torch.clamp_max(1.0 + (I[None] - B[:, None, :]).amin(dim=2), 1.0))
    mu, J = _rand(s, G, seed=4), _rand(M, G, seed=5)
    route = ops.fuzzy_route(mu, J, backend=backend)
    assert torch.equal(route, torch.clamp_min((mu[:, None, :] + J[None]).amax(dim=2) - 1.0, 0.0))
    mc = ops.meet_cardinality(mu, J, backend=backend)
    want = ref.meet_cardinality(mu.cpu().numpy(), J.cpu().numpy())
    err = np.abs(mc.double().cpu().numpy() - want)
    tol = minsum_tolerance(want, G, _minsum_split(backend, s, M, G))
    assert np.all(err <= tol), (err.max(), tol.min())


def _minsum_split(backend, M, N, K):
    """The reduction split each backend takes for an (M, K) × (K, N) product on this device."""
    if backend == "cuda":
        return _cuda.cu().semiring_default_split(M, N, K, torch.cuda.get_device_properties(0).multi_processor_count)
    from contextrag.kernels import semiring
    return semiring.choose_blocks(M, N, K, torch.float32, torch.device("cuda", 0))[4]


@pytest.mark.parametrize("backend", BACKENDS)
def test_semiring_float64_and_splits(backend):
    _need(backend)
    A, I = _rand(9, 20000, dtype=torch.float64, seed=6), _rand(20000, 11, dtype=torch.float64, seed=7)
    assert np.array_equal(ops.luk_up(A, I, backend=backend).cpu().numpy(), ref.luk_up(A.cpu().numpy(), I.cpu().numpy()))
    f32 = A.float(), I.float()
    for split in (1, 7):
        if backend == "cuda":
            got = ops_semiring._cuda_semiring("min_plus", f32[0], f32[1], split=split)
        else:
            from contextrag.kernels import semiring
            got = semiring.luk_up(f32[0], f32[1], split=split)
        assert torch.equal(got, torch.clamp_max(1.0 + (f32[1][None] - f32[0][:, :, None]).amin(dim=1), 1.0))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("n,d,k", [(1, 1, 1), (97, 33, 5), (1000, 129, 200), (4099, 64, 96)])
def test_kmeans_assign(backend, dtype, n, d, k):
    _need(backend)
    g = torch.Generator().manual_seed(n + k)
    X = torch.randn(n, d, generator=g).to(dtype)
    C = torch.randn(k, d, generator=g)
    labels, d2 = ops.kmeans_assign(X.cuda(), C.cuda(), backend=backend)
    Xd, Cd = X.double().numpy(), C.to(dtype).double().numpy()
    D = ref.kmeans.sq_distances(Xd, Cd)
    rl, rd = ref.kmeans_assign(Xd, Cd)
    lab = labels.cpu().numpy()
    scale = (Xd ** 2).sum(1) + (Cd ** 2).sum(1)[lab]
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    gap = D[np.arange(n), lab] - D[np.arange(n), rl]
    assert np.all(gap <= tol * (1 + scale))
    np.testing.assert_allclose(d2.double().cpu().numpy(), rd, rtol=0, atol=tol * (1 + scale.max()))
    assert (lab == rl).mean() > 0.99


@pytest.mark.parametrize("tensor_cores", [True, False])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("n,d,k", [(1, 8, 1), (300, 20, 7), (2049, 1024, 96), (1000, 64, 130)])
def test_cuda_assign_tensor_core_and_simt_paths(tensor_cores, dtype, n, d, k):
    _need("cuda")
    g = torch.Generator().manual_seed(n + d + k)
    X = torch.randn(n, d, generator=g).to(dtype)
    C = torch.randn(k, d, generator=g)
    C[k // 2] = C[0]  # a duplicated centroid: ties go to the lower index
    labels, d2 = _kmeans_gpu._cuda_assign(X.cuda(), C.cuda(), tensor_cores=tensor_cores)
    Xd, Cd = X.double().numpy(), C.to(dtype).double().numpy()
    D = ref.kmeans.sq_distances(Xd, Cd)
    rl, rd = ref.kmeans_assign(Xd, Cd)
    lab = labels.cpu().numpy()
    scale = (Xd ** 2).sum(1) + (Cd ** 2).sum(1)[lab]
    assert np.all(D[np.arange(n), lab] - D[np.arange(n), rl] <= 2e-5 * (1 + scale))
    np.testing.assert_allclose(d2.double().cpu().numpy(), rd, rtol=0, atol=2e-5 * (1 + scale.max()))
    if k > 1:
        assert not np.any(lab == k // 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kmeans_update(backend, dtype):
    _need(backend)
    g = torch.Generator().manual_seed(11)
    # d = 0: no features, but the counts must still be counted
    for n, d, k in [(1, 3, 1), (5000, 65, 96), (3000, 1024, 12), (300, 0, 7)]:
        X = torch.randn(n, d, generator=g).to(dtype)
        labels = torch.randint(0, k, (n,), generator=g)
        sums, counts = IMPLS["kmeans_update"][backend](X.cuda(), labels.cuda(), k)
        want = np.zeros((k, d))
        np.add.at(want, labels.numpy(), X.double().numpy())
        np.testing.assert_allclose(sums.double().cpu().numpy(), want, rtol=0, atol=1e-5 * n ** 0.5 + 1e-5)
        assert np.array_equal(counts.cpu().numpy(), np.bincount(labels.numpy(), minlength=k))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("n,d,c", [(1, 1, 1), (97, 33, 5), (1000, 129, 200)])
def test_fcm_memberships(backend, dtype, n, d, c):
    _need(backend)
    g = torch.Generator().manual_seed(n + c)
    X = torch.randn(n, d, generator=g).to(dtype)
    C = torch.randn(c, d, generator=g)
    if n > 3 and c > 1:
        C[1] = X[2].float()
    U = ops.fcm_memberships(X.cuda(), C.cuda(), 2.0, backend=backend)
    R = ref.fcm_memberships(X.double().numpy(), C.to(dtype).double().numpy(), 2.0)
    atol = {torch.float64: 1e-9, torch.float32: 1e-4}.get(dtype, 2e-3)
    np.testing.assert_allclose(U.double().cpu().numpy(), R, rtol=0, atol=atol)
    U2 = ops.fcm_memberships(X.cuda(), C.cuda(), 1.5, top_k=3, backend=backend)
    np.testing.assert_allclose(U2.double().cpu().numpy(),
                               ref.fcm_memberships(X.double().numpy(), C.to(dtype).double().numpy(), 1.5, 3),
                               rtol=0, atol=max(atol, 1e-4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_kmeans_fit_and_rq_batched(backend, monkeypatch):
    _need(backend)
    rng = np.random.default_rng(0)
    X = torch.from_numpy(rng.standard_normal((3000, 32)).astype(np.float32)).cuda()
    C0 = X[:24].clone()
    a = ops.kmeans_fit(X, 24, n_iter=10, init=C0, backend=backend)
    b = ops.kmeans_fit(X.cpu(), 24, n_iter=10, init=C0.cpu(), backend="cpu")
    assert (a.labels.cpu().numpy() == b.labels.numpy()).mean() > 0.99
    assert abs(a.inertia - b.inertia) <= 1e-3 * b.inertia
    problems = [torch.from_numpy(rng.standard_normal((n, 16)).astype(np.float32)).cuda() for n in (500, 7, 1300, 90)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        monkeypatch.setenv("CONTEXTRAG_BACKEND", backend)
        got = ops.rq_kmeans_batched(problems, (12, 6, 3), n_iter=8, seed=1, backend=backend)
        for p, rb in zip(problems, got):
            rs = ops.rq_kmeans(p, (12, 6, 3), n_iter=8, seed=1, backend=backend)
            assert rb.sizes == rs.sizes
            agree = (rb.codes.cpu().numpy() == rs.codes.cpu().numpy()).mean()
            assert agree > 0.95, agree
            np.testing.assert_allclose(rb.inertia, rs.inertia, rtol=2e-2)


def test_meet_cardinality_levels_int8():
    _need("triton")
    g = torch.Generator().manual_seed(3)
    for p, G, q, L in [(7, 33, 65, 16), (64, 20_000, 40, 16), (5, 3000, 9, 100)]:
        A = (torch.randint(0, L + 1, (p, G), generator=g).float() / L).cuda()
        B = (torch.randint(0, L + 1, (q, G), generator=g).float() / L).cuda()
        got = ops_semiring.meet_cardinality_levels(A, B, L)
        want = ref.meet_cardinality(A.cpu().numpy(), B.cpu().numpy())
        np.testing.assert_allclose(got.double().cpu().numpy(), want, rtol=1e-6, atol=1e-6)


# ---- launch limits and input contracts ------------------------------------------------------

def test_cuda_probe_runs_a_kernel():
    _need("cuda")
    info = _cuda.cu().probe()
    assert info["error"] == "" and info["kernel_ran"] is True, info
    assert info["driver_version"] > 0 and info["runtime_version"] > 0 and info["sms"] > 0, info


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_cuda_fcm_at_the_shared_memory_limit(dtype):
    """c at the device's limit runs the kernel; c + 1 is refused by the launcher with the error
    cleared (the next launch succeeds), and the op falls back to torch for it."""
    _need("cuda")
    cu = _cuda.cu()
    limit = _fcm_gpu.cuda_fcm_max_centres(torch.device("cuda", 0), dtype)
    optin = cu.probe()["smem_optin_bytes"]
    assert limit == cu.fcm_centres_limit(_cuda.DTYPE_CODE[dtype], optin) > 0
    g = torch.Generator().manual_seed(5)
    X = torch.randn(70, 8, generator=g).to(dtype).cuda()
    for c in (limit, limit + 1):
        C = torch.randn(c, 8, generator=g).cuda()
        U = ops.fcm_memberships(X, C, 2.0, backend="cuda")
        R = ref.fcm_memberships(X.double().cpu().numpy(), C.to(dtype).double().cpu().numpy(), 2.0)
        np.testing.assert_allclose(U.double().cpu().numpy(), R, rtol=0, atol=1e-9 if dtype == torch.float64 else 2e-3)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    C = torch.randn(limit + 1, 8, generator=g).cuda().to(dtype)
    U = torch.empty((70, limit + 1), dtype=acc, device="cuda")
    cn = (C.to(acc) ** 2).sum(1)
    with pytest.raises(RuntimeError, match="shared memory"):
        cu.fcm_memberships(_cuda.DTYPE_CODE[dtype], X.data_ptr(), C.data_ptr(), cn.data_ptr(), U.data_ptr(), 70,
                           limit + 1, 8, 1.0, 1e-6, torch.cuda.current_stream().cuda_stream)
    out = ops_semiring._cuda_semiring("min_plus", torch.rand(3, 4, device="cuda"), torch.rand(4, 5, device="cuda"))
    torch.cuda.synchronize()
    assert out.shape == (3, 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_takes_int32_labels_and_rejects_out_of_range(backend):
    _need(backend)
    g = torch.Generator().manual_seed(2)
    X = torch.randn(300, 40, generator=g).cuda()
    lab = torch.randint(0, 7, (300,), generator=g)
    s64, c64 = IMPLS["kmeans_update"][backend](X, lab.cuda(), 7)
    s32, c32 = IMPLS["kmeans_update"][backend](X, lab.to(torch.int32).cuda(), 7)
    assert torch.equal(c64, c32) and torch.allclose(s64, s32, atol=1e-5)
    bad = lab.clone()
    bad[17] = 7
    with pytest.raises(ValueError, match="labels"):
        IMPLS["kmeans_update"][backend](X, bad.cuda(), 7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fcm_memberships_stay_in_the_unit_interval(backend):
    """A fast division may round w/Σw above 1; memberships feed unit-interval ops directly."""
    _need(backend)
    from contextrag.ops._tensor import as_tensor
    g = torch.Generator().manual_seed(9)
    C = torch.randn(37, 24, generator=g)
    X = torch.cat([C + 1e-3 * torch.randn(37, 24, generator=g), torch.randn(500, 24, generator=g)])
    U = ops.fcm_memberships(X.cuda(), C.cuda(), 1.1, backend=backend)
    assert float(U.min()) >= 0.0 and float(U.max()) <= 1.0
    as_tensor(U, "U", ndim=(2,), unit_interval=True)
    ops.luk_up(U[:5], U.t(), backend=backend)  # validates both operands as memberships


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
@pytest.mark.parametrize("backend", BACKENDS)
def test_tensors_on_the_second_device_launch_there(backend):
    _need(backend)
    torch.cuda.set_device(0)
    A, I = _rand(5, 40, seed=1).to("cuda:1"), _rand(40, 9, seed=2).to("cuda:1")
    up = ops.luk_up(A, I, backend=backend)
    assert up.device == torch.device("cuda:1")
    assert torch.equal(up, torch.clamp_max(1.0 + (I[None] - A[:, :, None]).amin(dim=1), 1.0))
    X = torch.randn(200, 16).to("cuda:1")
    labels, _ = ops.kmeans_assign(X, X[:7], backend=backend)
    sums, counts = IMPLS["kmeans_update"][backend](X, labels, 7)
    assert sums.device == torch.device("cuda:1") and int(counts.sum()) == 200
