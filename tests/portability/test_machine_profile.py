"""The machine profile: flags read from /proc/cpuinfo, the forced ISA view, the GEMM probe cached once
per machine, the precision override, and what reports it (ops.backends())."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from contextrag import machine

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512bw avx512_bf16 avx512_fp16 avx512_vnni avx_vnni amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu
"""
ARM = """processor\t: 0
BogoMIPS\t: 2000.00
Features\t: fp asimd evtstrm aes sve bf16 i8mm
CPU implementer\t: 0x41
"""


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty profile cache and no override: every test probes (or not) from scratch."""
    monkeypatch.setenv("CONTEXTRAG_CACHE_DIR", str(tmp_path))
    for v in ("CONTEXTRAG_ISA", "CONTEXTRAG_CPU_ISA", "CONTEXTRAG_PRECISION"):
        monkeypatch.delenv(v, raising=False)
    machine.clear()
    yield tmp_path
    machine.clear()


def test_cpuinfo_flags_and_model():
    model, flags = machine.read_cpuinfo(X86)
    assert model == "Intel(R) Xeon(R) Platinum 8488C"
    assert {"avx512_bf16", "amx_bf16", "amx_int8", "avx_vnni", "avx512_fp16"} <= flags and len(flags) == 15
    _, arm = machine.read_cpuinfo(ARM)
    assert {"asimd", "sve", "bf16", "i8mm"} <= arm


def test_forced_isa_view_drops_what_the_level_lacks():
    _, flags = machine.read_cpuinfo(X86)
    assert machine.isa_view(flags, None) == flags == machine.isa_view(flags, "amx")
    avx512 = machine.isa_view(flags, "avx512")
    assert {"avx512_bf16", "avx512_fp16"} <= avx512 and not any(f.startswith("amx") for f in avx512)
    avx2 = machine.isa_view(flags, "avx2")
    assert {"avx2", "fma", "avx_vnni"} <= avx2 and not any(f.startswith(("avx512", "amx")) for f in avx2)
    generic = machine.isa_view(flags, "generic")
    assert "sse4_2" in generic and not any(f.startswith(("avx", "amx", "fma", "f16c")) for f in generic)


def test_profile_probes_once_per_machine(fresh, monkeypatch):
    calls = []

    def fake_probe(budget_s=0.08):
        calls.append(1)
        return {"fp32": 100.0, "bf16": 700.0, "int8": 1400.0}
    monkeypatch.setattr(machine, "probe_gemm", fake_probe)
    p = machine.profile()
    cpu, flags = machine.read_cpuinfo()
    assert p.cpu == cpu and p.cpu_flags == flags and p.isa == flags and p.isa_forced is None
    assert dict(p.gemm_gflops) == {"fp32": 100.0, "bf16": 700.0, "int8": 1400.0} and calls == [1]
    assert machine.profile() is p
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.cpu = "other"
    with pytest.raises(TypeError):
        p.gemm_gflops["fp32"] = 1.0
    (f,) = (fresh / "machine").glob("*.json")
    assert f == machine.cache_file(cpu, flags, p.torch)
    assert json.loads(f.read_text())["gemm_gflops"]["bf16"] == 700.0
    machine.clear()                                  # a new process: read from disk, no probe
    assert dict(machine.profile().gemm_gflops) == dict(p.gemm_gflops) and calls == [1]
    from contextrag import ops
    if ops._backend.native() is not None:
        assert p.dispatch == ops._backend.native().cpu_isa()
    d = p.to_dict()
    assert d["cpu"] == cpu and d["gemm_gflops"]["int8"] == 1400.0 and set(d["isa"]) <= flags
    assert json.loads(json.dumps(d)) == d


def test_a_torn_cache_file_is_probed_again(fresh, monkeypatch):
    monkeypatch.setattr(machine, "probe_gemm", lambda budget_s=0.08: {"fp32": 1.0, "bf16": 3.0, "int8": None})
    p = machine.profile()
    f = machine.cache_file(p.cpu, p.cpu_flags, p.torch)
    f.write_text('{"gemm_gflops": {"fp32": ')
    machine.clear()
    monkeypatch.setattr(machine, "probe_gemm", lambda budget_s=0.08: {"fp32": 2.0, "bf16": 1.0, "int8": None})
    assert machine.profile().gemm_gflops["fp32"] == 2.0
    assert json.loads(f.read_text())["gemm_gflops"]["fp32"] == 2.0


@pytest.mark.skipif(not machine._is_x86(), reason="the x86 bf16 flags")
def test_bf16_matrix_needs_the_rate_and_the_flag(fresh, monkeypatch):
    monkeypatch.setattr(machine, "probe_gemm", lambda budget_s=0.08: {"fp32": 100.0, "bf16": 250.0, "int8": None})
    p = machine.profile()
    assert p.bf16_matrix == bool(p.isa & {"avx512_bf16", "amx_bf16"})
    slow = dataclasses.replace(p, gemm_gflops={"fp32": 100.0, "bf16": 150.0, "int8": None})
    assert not slow.bf16_matrix                      # a bf16 path under twice fp32's rate is no engine
    monkeypatch.setenv("CONTEXTRAG_ISA", "avx2")     # the forced view has no bf16 flag: no bf16 path
    forced = machine.profile()
    assert forced.isa_forced == "avx2" and not forced.bf16_matrix
    assert not any(f.startswith(("avx512", "amx")) for f in forced.isa) and forced.cpu_flags == p.cpu_flags


def test_bad_overrides_name_the_variable(fresh, monkeypatch):
    monkeypatch.setenv("CONTEXTRAG_ISA", "sse9")
    with pytest.raises(ValueError, match="CONTEXTRAG_ISA must be one of amx, avx512, avx2, generic, auto, got 'sse9'"):
        machine.profile()
    monkeypatch.delenv("CONTEXTRAG_ISA")
    assert machine.precision() == "auto"
    for v in ("fp32", "BF16", "auto", ""):
        monkeypatch.setenv("CONTEXTRAG_PRECISION", v)
        assert machine.precision() == (v.lower() or "auto")
    monkeypatch.setenv("CONTEXTRAG_PRECISION", "fp16")
    with pytest.raises(ValueError, match="CONTEXTRAG_PRECISION must be one of fp32, bf16, auto, got 'fp16'"):
        machine.precision()


def test_real_probe_measures_every_dtype_torch_has():
    pytest.importorskip("torch")
    rates = machine.probe_gemm(budget_s=0.02)
    assert set(rates) == {"fp32", "bf16", "int8"}
    assert rates["fp32"] > 0 and rates["bf16"] > 0
    assert rates["int8"] is None or rates["int8"] > 0


def test_reading_the_profile_imports_no_torch(tmp_path):
    """profile(probe=False) in a fresh process with an empty cache imports no torch; ops.backends()
    (which asks torch about CUDA devices) carries the profile."""
    code = ("import sys\nfrom contextrag import machine, ops\n"
            "p = machine.profile(probe=False)\nprint('torch' in sys.modules, p.gemm_gflops['fp32'])\n"
            "b = ops.backends()\nprint(b['cpu']['machine']['cpu'] == p.cpu, sorted(b))\n")
    env = {**__import__("os").environ, "CONTEXTRAG_CACHE_DIR": str(tmp_path)}
    env.pop("CONTEXTRAG_ISA", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["False None", "True ['cpu', 'cuda', 'ref', 'triton']"]
