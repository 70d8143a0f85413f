"""bench/gpu_check.py --cpu-smoke: the GPU check's logic on tiny shapes under the Triton interpreter.

Runs three of its groups (k-means, semiring products, whole graph construction) exactly as the GPU
run would, each in its own subprocess, and checks the JSON it leaves behind.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_cpu_smoke(tmp_path):
    pytest.importorskip("triton")
    out = tmp_path / "gc"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), str(out), "--cpu-smoke",
                           "--groups", "kmeans,semiring,graph"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rep = json.loads((out / "gpu_check.json").read_text())
    assert rep["meta"]["mode"] == "cpu-smoke"
    assert rep["meta"]["versions"]["torch"] and rep["meta"]["date_utc"]
    assert set(rep["groups"]) == {"kmeans", "semiring", "graph"}
    for name, g in rep["groups"].items():
        assert g["status"] == "ok", (name, g)
    assert rep["summary"]["errors"] == []
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
