"""Launch arithmetic and limits of the GPU kernels, checked on the CPU before any device run.

* the min-sum tolerance of the GPU tests against an exact float32 simulation of the CUDA kernel's
  summation order;
* the CUDA FCM's shared-memory limit (A100 and H100 opt-in figures) and the wrapper's fallback;
* Triton grid axes (N on the unlimited axis, row chunks), int64 address arithmetic in the compiled
  semiring kernel (compiled for sm_90 here, no device needed), FCM tile plans per device;
* ``launch_with_fallback`` falls back to IEEE fp32 only for the precision compile error;
* labels reaching the update kernels are int64 and in range.

Runs in an ordinary process (Triton compiles, nothing launches); the interpreter tests are in
test_triton_ops.py.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest
import torch

triton = pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("compiles kernels: needs a process without TRITON_INTERPRET", allow_module_level=True)

from contextrag import ref  # noqa: E402
from contextrag.kernels import _utils, fcm, semiring  # noqa: E402
from contextrag.ops import _cuda, _fcm_gpu, _kmeans_gpu  # noqa: E402
from contextrag.ops import semiring as ops_semiring  # noqa: E402

HERE = Path(__file__).resolve().parent
A100_OPTIN, H100_OPTIN = 166912, 232448  # shared memory a block may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin)


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HERE / "gpu" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cuda_ext():
    from contextrag import _C
    if not _C.cuda_compiled():
        pytest.skip("contextrag._C built without CUDA")
    return _C.cuda


def _rand(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g, dtype=torch.float64).to(torch.float32)


# ---- 1. min-sum tolerance from the summation order ------------------------------------------

@pytest.mark.parametrize("s,G,M", [(130, 300, 131), (33, 5001, 7)])
def test_minsum_tolerance_covers_the_cuda_summation_order(s, G, M):
    """The data of test_gpu_ops.test_semiring_ops_exact, summed in semiring.cu's exact order."""
    cu = _cuda_ext()
    order = _load("minsum_order")
    mu, J = _rand(s, G, seed=4), _rand(M, G, seed=5)
    split = cu.semiring_default_split(s, M, G, 132)
    got = order.simulate_cuda_minsum(mu.numpy(), J.numpy(), split)
    want = ref.meet_cardinality(mu.numpy(), J.numpy())
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= order.tolerance(want, G, split))
    if (s, G, M) == (130, 300, 131):
        # sequential over 300 steps (no split below 512 per part): the old 2e-7·G + 1e-6 cannot hold
        assert split == 1 and err.max() > 2e-7 * G + 1e-6


def test_minsum_tolerance_rejects_a_missing_term():
    order = _load("minsum_order")
    mu, J = _rand(9, 300, seed=1), _rand(11, 300, seed=2)
    want = ref.meet_cardinality(mu.numpy(), J.numpy())
    dropped = ref.meet_cardinality(mu.numpy()[:, 1:], J.numpy()[:, 1:])
    assert np.any(np.abs(dropped - want) > order.tolerance(want, 300, 1))


# ---- 2. CUDA FCM shared memory -------------------------------------------------------------

def test_cuda_fcm_centres_follow_the_optin_limit():
    cu = _cuda_ext()
    # 8,960 B static (fp32 accumulators; 17,920 B fp64) + 64 rows × c × 4 (8) bytes ≤ opt-in
    assert cu.fcm_centres_limit(0, A100_OPTIN) == 617 and cu.fcm_centres_limit(3, A100_OPTIN) == 617
    assert cu.fcm_centres_limit(1, A100_OPTIN) == 291
    assert cu.fcm_centres_limit(0, H100_OPTIN) == 873 and cu.fcm_centres_limit(1, H100_OPTIN) == 419
    assert cu.fcm_centres_limit(0, 8000) == 0
    if not torch.cuda.is_available():
        assert cu.fcm_max_centres(0) == -1  # no device to ask: the wrapper then uses torch


class _FakeCuda:
    """Stands in for contextrag._C.cuda: reports an A100's FCM limit and records launches."""

    def __init__(self, limit):
        self.limit, self.launches = limit, []

    def fcm_max_centres(self, dtype):
        return self.limit

    def fcm_memberships(self, dtype, x, c, cn, u, n, nc, d, p, snap, stream):
        self.launches.append(nc)


def test_cuda_fcm_wrapper_falls_back_above_the_device_limit(monkeypatch):
    fake = _FakeCuda(617)
    monkeypatch.setattr(_cuda, "cu", lambda: fake)
    monkeypatch.setattr(_fcm_gpu, "_FCM_LIMITS", {})
    X = _rand(5, 3, seed=7)
    C = _rand(618, 3, seed=8)
    from contextrag.ops.fcm import _torch_memberships
    U = _fcm_gpu._cuda_fcm(X, C, 2.0, None)  # one over the limit: torch, no launch
    assert fake.launches == [] and torch.equal(U, _torch_memberships(X, C, 2.0, None))
    _fcm_gpu._cuda_fcm(X, C[:617], 2.0, None)
    assert fake.launches == [617]


# ---- 3. Triton at scale ---------------------------------------------------------------------

def test_semiring_grid_keeps_large_n_on_axis_0_and_chunks_rows():
    chunks, grid, kps, split = semiring.launch_plan(132, 5_000_000, 64, 64, 64, 4, 1)
    assert grid[0] == triton.cdiv(5_000_000, 64) > 65535 and grid[1] == 3 and chunks == [(0, 132)]
    M = 5_000_000
    chunks, grid, kps, split = semiring.launch_plan(M, 132, 64, 64, 64, 4, 3)
    assert grid[1] <= 65535 and len(chunks) == 2
    assert chunks[0][0] == 0 and sum(r for _, r in chunks) == M
    assert all(triton.cdiv(r, 64) <= 65535 for _, r in chunks)
    assert all(a + r == b for (a, r), (b, _) in zip(chunks, chunks[1:]))
    _, grid, kps, split = semiring.launch_plan(3, 3, 10_000_000, 64, 64, 4, 10**6)
    assert split <= 65535 and grid[2] == split and kps * split >= 10_000_000 and kps % 4 == 0
    assert ops_semiring.ROWS_PER_LAUNCH <= 65535 * 64  # the CUDA wrapper's row chunks, for its smallest tile


def test_semiring_kernel_address_arithmetic_is_int64():
    """Compiled for sm_90 without a device: every pointer offset is 64-bit, so index × stride
    cannot wrap past 2³¹ elements (A of 2,148 × 1M; Iᵀ of 10M chunks)."""
    from contextrag.kernels import resources
    k, sig, ce, attrs = resources.semiring_kernel_args("float32", op=1)
    rep = resources.compile_report(k, sig, ce, attrs, arch=90, num_warps=8)
    assert resources.addptr_offset_types(rep["ttir"]) == {"i64"}
    assert rep["shared_bytes"] <= resources.SMEM_OPTIN[90]


@pytest.mark.parametrize("limit", [A100_OPTIN, H100_OPTIN])
def test_fcm_plans_fit_the_device(limit):
    for mode in (0, 1):
        elem = 2 if mode == 0 else 4
        for c in (1, 16, 100, 256, 300, 512, 1000, 1024):
            ps = fcm.plans(c, mode, limit)
            assert ps, (c, mode)
            for BN, CP, BD, warps, stages in ps:
                assert CP >= c and fcm.smem_bytes(BN, CP, BD, stages, elem) <= limit
        assert fcm.plans(fcm.MAX_C + 1, mode, limit) == []
    # the untrimmed CP = 1024 fp32 tiles (3 stages of 32 features) need more than any device has
    assert fcm.smem_bytes(16, 1024, 32, 3, 4) > H100_OPTIN
    assert fcm.plans(1024, 1, limit)[0] != (16, 1024, 32, 8, 3)
    if limit == A100_OPTIN:  # 512 centres in fp32 take fewer stages on an A100 than on an H100
        assert fcm.plans(512, 1, A100_OPTIN)[0] != fcm.plans(512, 1, H100_OPTIN)[0]


def test_fcm_max_centres_shrinks_with_shared_memory(monkeypatch):
    monkeypatch.setattr(fcm, "smem_limit", lambda device: 48 * 1024)
    c = fcm.max_centres(torch.device("cuda", 0), torch.float32)
    assert 16 <= c < fcm.MAX_C and fcm.plans(c, 1, 48 * 1024) and not fcm.plans(2 * c, 1, 48 * 1024)


def test_fcm_smem_estimate_bounds_the_compiled_kernel():
    """The plan for 512 centres in bf16 on an A100, compiled for sm_80: what Triton allocates is
    within the plan's estimate, which is within the opt-in limit."""
    from contextrag.kernels import resources
    BN, CP, BD, warps, stages = fcm.plans(512, 0, A100_OPTIN)[0]
    k, sig, ce, attrs = resources.fcm_kernel_args("bfloat16", BN, CP, BD)
    rep = resources.compile_report(k, sig, ce, attrs, arch=80, num_warps=warps, num_stages=stages)
    assert rep["shared_bytes"] <= fcm.smem_bytes(BN, CP, BD, stages, 2) <= A100_OPTIN


# ---- 4. no silent precision downgrade -------------------------------------------------------

class _FakeKernel:
    """kernel[grid](*args, **kw): raises ``errors[PREC]`` if present, else records the launch."""
    __name__ = "_fake_kernel"

    def __init__(self, errors):
        self.errors, self.calls = errors, []

    def __getitem__(self, grid):
        def run(*args, **kw):
            self.calls.append(kw.get("PREC"))
            if kw.get("PREC") in self.errors:
                raise self.errors[kw["PREC"]]
        return run


@pytest.fixture
def fresh_precision(monkeypatch):
    monkeypatch.setattr(_utils, "_PREC_FALLBACK", {})
    monkeypatch.setattr(_utils, "PRECISION_FALLBACKS", [])


def test_out_of_resources_is_not_a_precision_fallback(fresh_precision):
    from triton.runtime.errors import OutOfResources
    k = _FakeKernel({"tf32x3": OutOfResources(300000, 232448, "shared memory")})
    with pytest.raises(OutOfResources):
        _utils.launch_with_fallback(k, (1,), (), {"PREC": "tf32x3"}, fp32=True)
    assert k.calls == ["tf32x3"] and _utils.PRECISION_FALLBACKS == [] and _utils._PREC_FALLBACK == {}


def test_other_errors_and_non_fp32_modes_propagate(fresh_precision):
    k = _FakeKernel({"tf32x3": RuntimeError("CUDA error: an illegal memory access was encountered")})
    with pytest.raises(RuntimeError, match="illegal"):
        _utils.launch_with_fallback(k, (1,), (), {"PREC": "tf32x3"}, fp32=True)
    k = _FakeKernel({"tf32x3": ValueError("input_precision must be one of ('tf32', 'ieee')")})
    with pytest.raises(ValueError):  # a bf16 or fp64 kernel: its dot never used PREC
        _utils.launch_with_fallback(k, (1,), (), {"PREC": "tf32x3"}, fp32=False)
    assert _utils.PRECISION_FALLBACKS == [] and _utils._PREC_FALLBACK == {}


def test_precision_compile_error_falls_back_once_and_is_recorded(fresh_precision):
    from triton.compiler.errors import CompilationError
    err = CompilationError("src", None, "input_precision must be one of ('tf32', 'tf32x3'...): tf32x3 unsupported")
    k = _FakeKernel({"tf32x3": err})
    _utils.launch_with_fallback(k, (1,), (), {"PREC": "tf32x3"}, fp32=True)
    assert k.calls == ["tf32x3", "ieee"]
    assert [f["kernel"] for f in _utils.PRECISION_FALLBACKS] == ["_fake_kernel"]
    assert _utils._PREC_FALLBACK == {"tf32x3": "ieee"}


# ---- 5. input contracts at the raw-pointer boundary ------------------------------------------

def test_labels_become_int64_and_are_range_checked():
    lab = torch.tensor([0, 4, 2], dtype=torch.int32)
    out = _kmeans_gpu.check_labels(lab, 3, 5)
    assert out.dtype == torch.int64 and out.is_contiguous() and out.tolist() == [0, 4, 2]
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 4\)"):
        _kmeans_gpu.check_labels(lab, 3, 4)
    with pytest.raises(ValueError, match="labels"):
        _kmeans_gpu.check_labels(torch.tensor([-1, 0, 1]), 3, 5)
    with pytest.raises(ValueError, match="1-D tensor of 4"):
        _kmeans_gpu.check_labels(lab, 4, 5)
    with pytest.raises(TypeError, match="integers"):
        _kmeans_gpu.check_labels(lab.float(), 3, 5)
    assert _kmeans_gpu.check_labels(torch.zeros(0, dtype=torch.int16), 0, 3).dtype == torch.int64


def test_cuda_update_wrapper_rejects_bad_labels_before_launch(monkeypatch):
    class Fake:
        calls = 0

        def kmeans_update(self, *a):
            Fake.calls += 1

    monkeypatch.setattr(_cuda, "cu", lambda: Fake())
    X = _rand(4, 3)
    with pytest.raises(ValueError, match="labels"):
        _kmeans_gpu._cuda_update(X, torch.tensor([0, 1, 5, 2], dtype=torch.int32), 5)
    assert Fake.calls == 0
