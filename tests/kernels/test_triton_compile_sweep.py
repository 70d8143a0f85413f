"""The offline compile sweep (contextrag.kernels.sweep): Triton kernels compiled for sm_90 with the
installed Triton, no GPU. CI runs the whole sweep with the newest Triton and with 3.6.0 (the device
machines'); here a few configurations compile and the sweep's own logic is checked."""
from __future__ import annotations

import os

import pytest

triton = pytest.importorskip("triton")
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("compiles kernels: needs a process without TRITON_INTERPRET", allow_module_level=True)

from contextrag.kernels import fcm, kmeans, resources, semiring, spread, sweep  # noqa: E402


def test_every_jitted_kernel_has_configurations():
    names = [c["name"] for c in sweep.configurations(90)]
    assert len(names) == len(set(names)) and len(names) >= 50
    kernels = {c["kernel"] for c in sweep.configurations(90)}
    assert kernels == {semiring._semiring_kernel, semiring._meet_levels_kernel, kmeans._assign_kernel,
                       kmeans._update_kernel, fcm._fcm_kernel, spread._spread_kernel}
    # the recorded figures name real configurations, for both the device's Triton and the newest
    for version in ("3.6", "3.9"):
        assert set(sweep.EXPECTED_SHARED[version]) == set(names)


def test_semiring_and_int8_meet_compile_with_their_recorded_shared_memory():
    rows = sweep.sweep(90, only="semiring/float32/minsum/64x64") + sweep.sweep(90, only="meet_levels")
    assert [r["name"] for r in rows] == ["semiring/float32/minsum/64x64x4", "meet_levels/int8/64x64x64"]
    assert all("error" not in r and r["registers"] > 0 for r in rows), rows
    # rank-1 updates reduce nothing across warps: at most the epilogue's one BM×BN fp32 tile
    assert rows[0]["shared_bytes"] <= 64 * 64 * 4
    assert sweep.problems(rows, 90) == []
    if sweep.version_key() in sweep.EXPECTED_SHARED:
        assert rows[0]["shared_bytes"] == sweep.EXPECTED_SHARED[sweep.version_key()][rows[0]["name"]]


def test_problems_name_compile_errors_and_shared_memory_drift():
    ok = {"name": "semiring/float32/minplus/64x64x4", "shared_bytes": 0, "registers": 100, "num_warps": 8,
          "num_stages": 3}
    want36 = sweep.EXPECTED_SHARED["3.6"]["semiring/float32/minplus/64x64x4"]
    assert sweep.problems([dict(ok, shared_bytes=want36)], 90, "3.6.0") == []
    drift = sweep.problems([dict(ok, shared_bytes=want36 + 4096)], 90, "3.6.0")
    assert len(drift) == 1 and "expected on Triton 3.6" in drift[0]
    over = sweep.problems([dict(ok, name="x", shared_bytes=resources.SMEM_OPTIN[90] + 1)], 90, "9.9")
    assert len(over) == 1 and "opt-in limit" in over[0]
    assert "does not compile" in sweep.problems([{"name": "y", "error": "does not compile"}], 90)[0]
    assert sweep.problems([dict(ok, spill_store_bytes=64)], 90, "9.9") == []  # spills are reported only
    assert "| semiring/float32/minplus/64x64x4 | 8 | 3 | 0 | 100 | 0 |" in sweep.markdown_table([ok])
