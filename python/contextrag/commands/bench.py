"""`contextrag bench [--op NAME] [--backend B] [--quick]`: the kernel microbenchmarks.

Runs the pytest-benchmark suites of the source tree's ``bench/`` (``test_bench_<family>.py``), writes
their JSON (machine, CPU dispatch, versions and load average included) and prints, per benchmark
group, each contextrag backend's best time and the ratio peer / ours (> 1: contextrag is faster).
The suites live beside the package source, not inside the wheel: from an installed wheel, point
``--suites`` at a checkout's ``bench/``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

FAMILIES = {
    "kmeans": ("kmeans_assign", "kmeans_fit", "rq_kmeans"),
    "fcm": ("fcm_memberships", "fcm_fit"),
    "semiring": ("luk_up", "luk_down"),
    "lattice": ("meet_cardinality",),
    "routing": ("fuzzy_route",),
    "spread": ("spread_hop",),
}
OP_FAMILY = {op: fam for fam, ops in FAMILIES.items() for op in ops}
BACKENDS = ("cpu", "ref", "triton", "cuda")


def add_arguments(p):
    p.add_argument("--op", help=f"an op family ({', '.join(FAMILIES)}) or one op "
                                f"({', '.join(sorted(OP_FAMILY))}); default: all")
    p.add_argument("--backend", choices=BACKENDS, help="only this contextrag backend (the peers always run)")
    p.add_argument("--quick", action="store_true",
                   help="smallest shape, float32, few rounds: a ratio table in about a minute")
    p.add_argument("--out", help="pytest-benchmark JSON to write (default: bench/results/"
                                 "microbench_<isa>[_quick].json in the source tree)")
    p.add_argument("--suites", help="directory of the test_bench_*.py suites (default: the source tree's bench/)")


def _suites_dir(arg: str | None) -> Path:
    if arg:
        d = Path(arg)
    else:
        import contextrag
        d = Path(contextrag.__file__).resolve().parents[2] / "bench"   # python/contextrag/ -> repo root
    if not sorted(d.glob("test_bench_*.py")):
        raise FileNotFoundError(f"no test_bench_*.py suites in {d}: the benchmarks ship with the source tree, "
                                "pass --suites path/to/contextrag/bench")
    return d


def _files_and_filter(d: Path, op: str | None) -> tuple[list[str], str | None]:
    if op is None:
        return [str(p) for p in sorted(d.glob("test_bench_*.py"))], None
    if op in FAMILIES:
        return [str(d / f"test_bench_{op}.py")], None
    if op in OP_FAMILY:
        # the op's own tests and its peers' (test_<op>, test_<op>_<peer>); not e.g. test_<op>_more_op
        return [str(d / f"test_bench_{OP_FAMILY[op]}.py")], f"test_{op}"
    raise ValueError(f"--op must be an op family ({', '.join(FAMILIES)}) or an op ({', '.join(sorted(OP_FAMILY))}), "
                     f"got {op!r}")


def ratios(report: dict) -> list[dict]:
    """Per group and contextrag backend: best and median seconds, and peer best / ours best for each
    peer (the best of the rounds: on a shared machine the other tenants only ever add time)."""
    groups: dict[str, list] = {}
    for b in report.get("benchmarks", []):
        groups.setdefault(b.get("group") or b["name"], []).append(b)
    rows = []
    for g, entries in groups.items():
        ours = [e for e in entries if e.get("extra_info", {}).get("impl") == "contextrag"]
        peers = [e for e in entries if e.get("extra_info", {}).get("impl") not in (None, "contextrag")]
        for o in ours:
            row = {"group": g, "backend": o["extra_info"].get("backend"), "best_s": o["stats"]["min"],
                   "median_s": o["stats"]["median"],
                   "peers": {p["extra_info"]["impl"]: {"best_s": p["stats"]["min"], "median_s": p["stats"]["median"],
                                                       "ratio": p["stats"]["min"] / o["stats"]["min"]}
                             for p in peers}}
            rows.append(row)
    return rows


def _fmt_s(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 1.0 else f"{s:.2f} s"


def table(rows: list[dict]) -> str:
    lines = [f"{'group':<40} {'backend':<8} {'best':>10}  peers: best (peer / ours)"]
    for r in rows:
        peers = "  ".join(f"{k} {_fmt_s(v['best_s'])} ({v['ratio']:.2f}×)" for k, v in r["peers"].items())
        lines.append(f"{r['group']:<40} {r['backend'] or '-':<8} {_fmt_s(r['best_s']):>10}  {peers or '-'}")
    return "\n".join(lines)


def _isa() -> str:
    try:
        from contextrag.ops._backend import native
        C = native()
        return C.cpu_isa() if C is not None else "n/a"
    except ValueError:
        raise
    except Exception:
        return "n/a"


def run(args) -> int:
    d = _suites_dir(args.suites)
    files, kexpr = _files_and_filter(d, args.op)
    isa = _isa()   # raises the ValueError of a bad CONTEXTRAG_ISA before anything runs
    out = Path(args.out) if args.out else d / "results" / f"microbench_{isa}{'_quick' if args.quick else ''}.json"
    if out.parent and not out.parent.is_dir():
        raise FileNotFoundError(f"--out: directory {out.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".microbench-", suffix=".json", dir=out.parent)
    os.close(fd)
    try:
        cmd = [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", f"--benchmark-json={tmp}", "--benchmark-sort=fullname",
               "--benchmark-columns=min,median,max,rounds"]
        if args.quick:
            cmd.append("--bench-quick")
        if args.backend:
            cmd += ["--bench-backend", args.backend]
        if kexpr:
            cmd += ["-k", kexpr]
        rc = subprocess.call(cmd, cwd=d)
        if rc not in (0, 5) or os.path.getsize(tmp) == 0:   # 5: nothing collected (e.g. --backend cuda here)
            print(f"contextrag bench: pytest exited with status {rc}; nothing written", file=sys.stderr)
            return rc or 1
        report = json.loads(Path(tmp).read_text())
        rows = ratios(report)
        report["contextrag_ratios"] = rows
        # the JSON is a result to keep: no host name, no checkout directory or branch name in it
        report.get("machine_info", {}).pop("node", None)
        ci = report.get("commit_info") or {}
        report["commit_info"] = {k: ci[k] for k in ("id", "time", "dirty") if k in ci}
        Path(tmp).write_text(json.dumps(report, indent=2) + "\n")
        os.replace(tmp, out)   # whole or not at all
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print()
    print(table(rows))
    print(f"wrote {out}")
    return 0
