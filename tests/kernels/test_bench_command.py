"""`contextrag bench`: the microbenchmark suites run, and their JSON and ratio table come out whole."""
import json
from pathlib import Path

import pytest

from contextrag.cli import main
from contextrag.commands import bench

SUITES = Path(__file__).resolve().parents[2] / "bench"


def test_quick_run_writes_json_and_ratio_table(tmp_path, capsys):
    pytest.importorskip("pytest_benchmark")
    out = tmp_path / "micro.json"
    rc = main(["bench", "--quick", "--op", "meet_cardinality", "--backend", "cpu", "--out", str(out),
               "--suites", str(SUITES)])
    assert rc == 0
    report = json.loads(out.read_text())
    impls = {b["extra_info"]["impl"] for b in report["benchmarks"]}
    assert impls == {"contextrag", "numpy", "torch_gemm"}           # --backend cpu: no ref entry
    assert {b["extra_info"]["backend"] for b in report["benchmarks"] if b["extra_info"]["impl"] == "contextrag"} == {"cpu"}
    info = report["machine_info"]["contextrag"]
    assert info["cpu_isa"] in ("avx512", "avx2", "generic") and info["quick"] is True
    assert len(info["load_start"]) == 3 and "torch" in info["versions"]
    assert "node" not in report["machine_info"] and set(report["commit_info"]) <= {"id", "time", "dirty"}
    (row,) = report["contextrag_ratios"]
    assert row["backend"] == "cpu" and set(row["peers"]) == {"numpy", "torch_gemm"}
    for p in row["peers"].values():
        assert p["ratio"] == pytest.approx(p["best_s"] / row["best_s"])
    assert "meet_cardinality" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir()] == ["micro.json"]     # no temporary left behind


def test_ratios_pair_every_backend_with_every_peer():
    def entry(group, impl, backend, t):
        return {"group": group, "name": impl, "extra_info": {"impl": impl, "backend": backend},
                "stats": {"min": t, "median": 2 * t}}
    rows = bench.ratios({"benchmarks": [entry("g", "contextrag", "cpu", 1.0), entry("g", "contextrag", "ref", 4.0),
                                        entry("g", "faiss", None, 2.0), entry("h", "contextrag", "cpu", 1.0)]})
    got = {(r["group"], r["backend"]): {k: v["ratio"] for k, v in r["peers"].items()} for r in rows}
    assert got == {("g", "cpu"): {"faiss": 2.0}, ("g", "ref"): {"faiss": 0.5}, ("h", "cpu"): {}}


def test_bad_op_and_suites_are_named(tmp_path, capsys):
    assert main(["bench", "--op", "no_such_op", "--suites", str(SUITES)]) == 2
    assert "--op must be" in capsys.readouterr().err
    assert main(["bench", "--suites", str(tmp_path)]) == 2
    assert "test_bench_*.py" in capsys.readouterr().err
