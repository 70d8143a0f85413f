"""The CUDA extension: compiled wherever nvcc exists, importable and well-behaved without a GPU.

The numerical GPU tests (every backend against the reference on a device) live in tests/kernels/gpu/
and skip cleanly when no CUDA device is visible.
"""
from __future__ import annotations

import os
import shutil

import pytest
import torch

import contextrag.ops as ops

C = pytest.importorskip("contextrag._C")
CUDA_FUNCS = ("semiring", "semiring_default_split", "kmeans_assign", "kmeans_assign_tc", "assign_rows_per_block",
              "kmeans_update", "fcm_memberships", "fcm_max_centres", "fcm_centres_limit", "probe")


def _nvcc_build_expected() -> bool:
    return shutil.which("nvcc") is not None and os.environ.get("CONTEXTRAG_CUDA", "AUTO").upper() != "OFF"


def test_cuda_compiled_when_nvcc_present():
    if not _nvcc_build_expected():
        pytest.skip("nvcc not on PATH (or CONTEXTRAG_CUDA=OFF): CUDA kernels are not expected to be compiled")
    assert C.cuda_compiled() is True
    for name in CUDA_FUNCS:
        assert callable(getattr(C.cuda, name)), name
    assert C.cuda.DTYPE_CODES == {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}


MIN_PLUS = C.SemiringMode.min_plus


def _cuda():
    if not C.cuda_compiled():
        pytest.skip("contextrag._C built without CUDA")
    return C.cuda


def test_semiring_modes_are_named():
    M = C.SemiringMode
    assert {m: int(getattr(M, m)) for m in ("min_plus", "max_plus", "min_sum")} == \
        {"min_plus": 0, "max_plus": 1, "min_sum": 2}
    assert len(M.__members__) == 3
    from contextrag.ops.semiring import semiring_mode
    assert semiring_mode("max_plus") is M.max_plus
    with pytest.raises(AttributeError):
        semiring_mode("plus_times")


def test_cuda_argument_errors_raise_before_any_launch():
    cu = _cuda()
    with pytest.raises(TypeError):           # the product is a SemiringMode, never a bare integer
        cu.semiring(0, 0, 1, 1, 1, 2, 2, 2, 2, 1, 2, 1, 1, 0, 0)
    with pytest.raises(RuntimeError, match="float32 or float64"):
        cu.semiring(MIN_PLUS, 3, 1, 1, 1, 2, 2, 2, 2, 1, 2, 1, 1, 0, 0)
    with pytest.raises(RuntimeError, match="positive"):
        cu.semiring(MIN_PLUS, 0, 1, 1, 1, 0, 2, 2, 2, 1, 2, 1, 1, 0, 0)
    with pytest.raises(RuntimeError, match="workspace"):
        cu.semiring(MIN_PLUS, 0, 1, 1, 1, 2, 2, 2, 2, 1, 2, 1, 4, 0, 0)
    with pytest.raises(RuntimeError, match="k must be positive"):
        cu.kmeans_assign(0, 1, 1, 1, 1, 1, 4, 0, 3, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(RuntimeError, match="unsupported dtype"):
        cu.kmeans_assign(9, 1, 1, 1, 1, 1, 4, 2, 3, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(RuntimeError, match="float16 or bfloat16"):
        cu.kmeans_assign_tc(0, 1, 1, 1, 1, 1, 4, 2, 3, 0)
    with pytest.raises(RuntimeError, match="k must be positive"):
        cu.kmeans_assign_tc(3, 1, 1, 1, 1, 1, 4, 0, 3, 0)
    with pytest.raises(RuntimeError, match="k must be positive"):
        cu.kmeans_update(0, 1, 1, 1, 1, 4, 0, 3, 0)
    with pytest.raises(RuntimeError, match="n_centres must be positive"):
        cu.fcm_memberships(0, 1, 1, 1, 1, 4, 0, 3, 1.0, 1e-6, 0)
    with pytest.raises(RuntimeError, match="split must be at most 65535"):
        cu.semiring(MIN_PLUS, 0, 1, 1, 1, 2, 2, 2, 2, 1, 2, 1, 70000, 1, 0)


def test_cuda_launch_parameters():
    cu = _cuda()
    # FCM: what fits the device's shared-memory opt-in (A100 163 KB, H100 227 KB) after the static tiles
    assert cu.fcm_centres_limit(0, 166912) == 617 and cu.fcm_centres_limit(1, 166912) == 291
    assert cu.assign_rows_per_block() > 0
    # a 132×132 output over a million-long reduction splits to fill 132 SMs; a big square does not
    assert cu.semiring_default_split(132, 132, 1_000_000, 132) > 16
    assert cu.semiring_default_split(4096, 4096, 4096, 132) == 1
    assert cu.semiring_default_split(10, 10, 100, 132) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-device path")
def test_cuda_launch_without_device_raises_cleanly():
    cu = _cuda()
    with pytest.raises(RuntimeError):
        cu.semiring(MIN_PLUS, 0, 0, 0, 0, 4, 4, 4, 4, 1, 4, 1, 1, 0, 0)
    with pytest.raises(RuntimeError, match="no device"):
        cu.fcm_memberships(0, 0, 0, 0, 0, 4, 5, 3, 1.0, 1e-6, 0)
    assert cu.fcm_max_centres(0) == -1
    info = cu.probe()
    assert info["kernel_ran"] is False and info["error"]
    avail = ops.backends()["cuda"]
    assert avail["available"] is False and "no CUDA device" in avail["detail"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-device path")
def test_cuda_backend_rejects_cpu_tensors():
    with pytest.raises((RuntimeError, ValueError)):
        ops.luk_up(torch.rand(2, 3), torch.rand(3, 4), backend="cuda")
