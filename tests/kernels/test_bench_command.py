"""`contextrag bench`: the shipped microbenchmark suites run from any directory, and their JSON and
ratio table come out whole, in the working directory and nowhere else."""
import json
import os
import subprocess
import sys

import pytest

from contextrag.bench import FAMILIES, SUITES_DIR, suite_files
from contextrag.cli import main
from contextrag.commands import bench


def _tree(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_quick_run_writes_json_and_ratio_table(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pytest_benchmark")
    monkeypatch.chdir(tmp_path)
    shipped = _tree(SUITES_DIR)
    rc = main(["bench", "--quick", "--op", "meet_cardinality", "--backend", "cpu"])
    assert rc == 0
    out = tmp_path / "microbench_avx512_quick.json"
    if not out.is_file():
        (out,) = tmp_path.glob("microbench_*_quick.json")
    report = json.loads(out.read_text())
    impls = {b["extra_info"]["impl"] for b in report["benchmarks"]}
    assert impls == {"contextrag", "numpy", "torch_gemm"}           # --backend cpu: no ref entry
    assert {b["extra_info"]["backend"] for b in report["benchmarks"] if b["extra_info"]["impl"] == "contextrag"} == {"cpu"}
    info = report["machine_info"]["contextrag"]
    assert info["cpu_isa"] in ("avx512", "avx2", "generic") and info["quick"] is True
    assert out.name == f"microbench_{info['cpu_isa']}_quick.json"
    prof = info["profile"]
    assert prof["dispatch"] == info["cpu_isa"] and set(prof["gemm_gflops"]) == {"fp32", "bf16", "int8"}
    assert len(info["load_start"]) == 3 and "torch" in info["versions"]
    assert "node" not in report["machine_info"] and set(report["commit_info"]) <= {"id", "time", "dirty"}
    (row,) = report["contextrag_ratios"]
    assert row["backend"] == "cpu" and set(row["peers"]) == {"numpy", "torch_gemm"}
    for p in row["peers"].values():
        assert p["ratio"] == pytest.approx(p["best_s"] / row["best_s"])
    printed = capsys.readouterr().out
    assert "meet_cardinality" in printed and f"machine: {prof['cpu']}" in printed
    assert [p.name for p in tmp_path.iterdir()] == [out.name]     # no temporary or benchmark store left
    assert _tree(SUITES_DIR) == shipped                           # nothing written beside the suites


def test_every_family_ships_a_suite_that_collects():
    """One suite per family inside the package, each importable from the install (no source tree),
    and every op of the table, lattice ops included, has entries of its own."""
    pytest.importorskip("pytest_benchmark")
    files = suite_files()
    assert [p.stem for p in files] == sorted(f"bench_{f}" for f in FAMILIES)
    assert set(FAMILIES) == set(bench.FAMILIES)
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "contextrag.bench.plugin",
                        "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(SUITES_DIR), "--bench-quick",
                        *map(str, files)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    for op in bench.OP_FAMILY:      # every op of the table has entries of its own
        assert op in r.stdout, op


def test_ratios_pair_every_backend_with_every_peer():
    def entry(group, impl, backend, t):
        return {"group": group, "name": impl, "extra_info": {"impl": impl, "backend": backend},
                "stats": {"min": t, "median": 2 * t}}
    rows = bench.ratios({"benchmarks": [entry("g", "contextrag", "cpu", 1.0), entry("g", "contextrag", "ref", 4.0),
                                        entry("g", "faiss", None, 2.0), entry("h", "contextrag", "cpu", 1.0)]})
    got = {(r["group"], r["backend"]): {k: v["ratio"] for k, v in r["peers"].items()} for r in rows}
    assert got == {("g", "cpu"): {"faiss": 2.0}, ("g", "ref"): {"faiss": 0.5}, ("h", "cpu"): {}}


def test_bad_op_and_suites_are_named(tmp_path, capsys):
    assert main(["bench", "--op", "no_such_op"]) == 2
    assert "--op must be" in capsys.readouterr().err
    assert main(["bench", "--suites", str(tmp_path)]) == 2
    assert "--suites" in capsys.readouterr().err
    assert main(["bench", "--out", str(tmp_path / "no" / "such" / "dir.json")]) == 2
    assert "--out: directory" in capsys.readouterr().err
