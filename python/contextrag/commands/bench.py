"""`contextrag bench [--op NAME] [--backend B] [--quick] [--out FILE]`: the kernel microbenchmarks.

Runs the pytest-benchmark suites that ship inside the package (``contextrag/bench/bench_<family>.py``),
writes their JSON (machine profile, CPU dispatch, versions and load average included) to ``--out``
or ``microbench_<isa>[_quick].json`` in the working directory (never into the install), and prints
the machine profile and, per benchmark group, each contextrag backend's best time and the ratio
peer / ours (> 1: contextrag is faster). ``--suites`` runs the suites of another directory.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FAMILIES = {
    "kmeans": ("kmeans_assign", "kmeans_fit", "rq_kmeans"),
    "fcm": ("fcm_memberships", "fcm_fit"),
    "semiring": ("luk_up", "luk_down", "fuzzy_route", "meet_cardinality"),
    "lattice": ("tnorm", "residuum", "soft_join", "soft_meet"),
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
    p.add_argument("--out", help="pytest-benchmark JSON to write (default: microbench_<isa>[_quick].json "
                                 "in the working directory)")
    p.add_argument("--suites", help="directory of bench_<family>.py suites (default: the ones shipped "
                                    "in contextrag.bench)")


def _suites_dir(arg: str | None) -> Path:
    from contextrag.bench import SUITES_DIR, suite_files
    d = Path(arg) if arg else SUITES_DIR
    if not suite_files(d):
        raise FileNotFoundError(f"--suites: no bench_<family>.py suites ({', '.join(FAMILIES)}) in {d}")
    return d


def _files_and_filter(d: Path, op: str | None) -> tuple[list[str], str | None]:
    from contextrag.bench import suite_files
    if op is None:
        return [str(p) for p in suite_files(d)], None
    if op in FAMILIES:
        return [str(d / f"bench_{op}.py")], None
    if op in OP_FAMILY:
        # the op's own entries and its peers' (test names or parameter ids hold the op's name)
        return [str(d / f"bench_{OP_FAMILY[op]}.py")], op
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
        from contextrag.ops import native
        C = native()
        return C.cpu_isa() if C is not None else "n/a"
    except ValueError:
        raise
    except Exception:
        return "n/a"


def profile_line(p: dict) -> str:
    """One line for the table's head: the CPU, what the kernels dispatch to, the GEMM rates."""
    if not p:
        return "machine: no profile recorded"
    rates = ", ".join(f"{k} {v:.0f}" for k, v in p["gemm_gflops"].items() if v is not None) or "not probed"
    wide = [f for f in p["isa"] if f.startswith(("avx512", "amx")) or "vnni" in f or f in ("avx2", "fma")]
    return (f"machine: {p['cpu']}; kernels: {p['dispatch'] or 'n/a'}{' (forced)' if p['isa_forced'] else ''}; "
            f"ISA: {' '.join(wide) or '-'}; torch GEMM GFLOP/s: {rates}")


def run(args) -> int:
    d = _suites_dir(args.suites)
    files, kexpr = _files_and_filter(d, args.op)
    isa = _isa()   # raises the ValueError of a bad CONTEXTRAG_ISA before anything runs
    out = Path(args.out) if args.out else Path.cwd() / f"microbench_{isa}{'_quick' if args.quick else ''}.json"
    if not out.parent.is_dir():
        raise FileNotFoundError(f"--out: directory {out.parent} does not exist")
    try:
        import pytest_benchmark  # noqa: F401
    except ImportError:
        print("contextrag bench needs pytest-benchmark, FAISS and scikit-fuzzy: pip install 'contextrag[bench]'",
              file=sys.stderr)
        return 2
    fd, tmp = tempfile.mkstemp(prefix=".microbench-", suffix=".json", dir=out.parent)
    os.close(fd)
    storage = tempfile.mkdtemp(prefix="contextrag-bench-")   # pytest-benchmark's own store: not the cwd
    try:
        # the shipped suites' own options and hooks (-p), no ini file of wherever they sit (-c), and
        # nothing written beside them (no cache, no bytecode)
        cmd = [sys.executable, "-m", "pytest", *files, "-q", "-p", "contextrag.bench.plugin", "-p", "no:cacheprovider",
               "-c", os.devnull, "--rootdir", str(d), f"--benchmark-json={tmp}",
               f"--benchmark-storage=file://{storage}", "--benchmark-sort=fullname",
               "--benchmark-columns=min,median,max,rounds"]
        if args.quick:
            cmd.append("--bench-quick")
        if args.backend:
            cmd += ["--bench-backend", args.backend]
        if kexpr:
            cmd += ["-k", kexpr]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        rc = subprocess.call(cmd, env=env)
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
        shutil.rmtree(storage, ignore_errors=True)
    print()
    print(profile_line(report.get("machine_info", {}).get("contextrag", {}).get("profile") or {}))
    print(table(rows))
    print(f"wrote {out}")
    return 0
