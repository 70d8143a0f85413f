"""The install runs on x86-64 CPUs this machine is not: the probe script (cpu_probe.py) runs under QEMU
user-mode emulation as a Haswell (AVX2, no AVX-512) and as a Nehalem (SSE4.2, no AVX at all), and
every native kernel family must take that CPU's path and match the float64 reference there.

The embedded LLM under emulation takes minutes (docs/LLM.md), so it is a separate step of the CI
script (.ci/run), not part of this test. Needs Debian's qemu-user (`apt-get install qemu-user`).
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("cpu_probe.py")
QEMU = shutil.which("qemu-x86_64") or shutil.which("qemu-x86_64-static")

# model -> (the ISA the native kernels must choose, the instruction sets that must be refused)
MODELS = {
    "Haswell": ("avx2", ("avx512",)),
    "Nehalem": ("generic", ("avx512", "avx2")),
}

pytestmark = [
    pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                       reason="x86-64 CPU models are emulated from an x86-64 host only"),
    pytest.mark.skipif(QEMU is None, reason="QEMU user-mode emulation is not installed "
                                            "(Debian: apt-get install qemu-user)"),
]


def run_probe(model: str, *extra: str, timeout: float = 1200) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="2", PYTHONDONTWRITEBYTECODE="1")
    env.pop("CONTEXTRAG_BACKEND", None)
    r = subprocess.run([QEMU, "-cpu", model, sys.executable, str(PROBE), *extra], capture_output=True,
                       text=True, timeout=timeout, env=env)
    lines = [x for x in r.stdout.splitlines() if x.startswith("{")]
    assert r.returncode in (0, 1) and lines, (
        f"the probe under -cpu {model} ended with code {r.returncode} (negative: killed by that signal):\n"
        f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return json.loads(lines[-1])


@pytest.mark.parametrize("model", sorted(MODELS))
def test_native_kernels_take_the_cpus_path_and_match_the_reference(model):
    isa, refused = MODELS[model]
    res = run_probe(model)
    native = res["native"]
    assert native["isa"] == isa, f"-cpu {model}: the kernels chose {native['isa']}, expected {isa}"
    assert set(refused).isdisjoint(native["supported"])
    for r in refused:                          # a forced instruction set the CPU lacks: a sentence, no SIGILL
        assert native["refused"][r] and "not supported by this CPU" in native["refused"][r]
    assert not native["bf16_gemm"]
    failed = {k: v for k, v in res["checks"].items() if v is not True}
    assert not failed, f"-cpu {model}: {failed}"
    assert {"kmeans_assign", "fcm_memberships", "luk_up", "luk_up_sparse", "meet_cardinality",
            "fuzzy_route", "kmeans_fit"} <= set(res["checks"])
