"""The parent side of the GPU check: group order, the time budget handed down, the merged report.

Each group runs in its own subprocess (``bench/gpu_check.py OUTDIR --group NAME``) with a timeout
clipped to what is left of ``--budget-s``; the child gets that same figure (``--budget-s``) and
hands it on to whatever it runs under its own timeout (the inner pytest of the test groups, the
sanitizer's tools), so a group clipped after a slow build still writes its results. ``main`` exits
1 when any group failed, timed out or recorded an error.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from .common import NO_CUDA_ENV, REPO, Ctx, _atomic_write, _run, _smi


ENTRY = REPO / "bench" / "gpu_check.py"
# in run order: correctness first, then the headline benchmarks, then what a cut run can lose. The
# scale probe (int64 offsets) and the sanitizer's memcheck come before the whole-pipeline groups so
# a run clipped by a slow build still checks them.
GROUPS = ("tests_cuda", "tests_triton", "peaks", "kmeans", "semiring", "scale", "sanitizer", "graph", "rq_kmeans",
          "spread", "cupy", "compile_sweep")
# selectable by name, not in the default run: the device has no copy of the embedding model package
OPTIONAL_GROUPS = ("embedding",)
ALIASES = {"tests": ("tests_cuda", "tests_triton"), "slow": ("scale", "sanitizer", "compile_sweep")}
# seconds each group may take on the GPU; --budget-s (default 420) clips the later ones and skips
# groups once it is spent. Triton compiling is most of tests_triton, cached on disk for the later groups.
GROUP_TIMEOUT = {"tests_cuda": 50, "tests_triton": 100, "peaks": 15, "kmeans": 50, "semiring": 40, "scale": 60,
                 "sanitizer": 90, "graph": 40, "rq_kmeans": 45, "spread": 40, "cupy": 40, "compile_sweep": 45,
                 "embedding": 45}
# below this many seconds a group is not started (it could not finish anything useful)
MIN_GROUP_S = 10.0


def plan_timeout(group: str, left_s: float, smoke: bool) -> float | None:
    """Seconds group ``group`` may run with ``left_s`` of the budget left (None: do not start it)."""
    if left_s < MIN_GROUP_S:
        return None
    return min(GROUP_TIMEOUT[group] * (4 if smoke else 1), left_s)


def _record_fallbacks(out: dict) -> None:
    """Precision and FCM-plan fallbacks this group's process made (they change what is measured)."""
    km, fc = sys.modules.get("contextrag.kernels._utils"), sys.modules.get("contextrag.kernels.fcm")
    out["fallbacks"] = {"precision": list(getattr(km, "PRECISION_FALLBACKS", [])),
                        "fcm_plans": list(getattr(fc, "FALLBACKS", []))}


_MODULES = {"peaks": ("peaks", "group_peaks"), "kmeans": ("kmeans", "group_kmeans"),
            "rq_kmeans": ("rq", "group_rq"), "semiring": ("semiring", "group_semiring"),
            "graph": ("graph", "group_graph"), "embedding": ("embedding", "group_embedding"),
            "compile_sweep": ("compile_sweep", "group_compile_sweep"), "scale": ("scale", "group_scale"),
            "spread": ("spread", "group_spread"), "cupy": ("cupy", "group_cupy")}


def run_group(name: str, smoke: bool, part: Path, budget_s: float) -> None:
    """The child: run one group with ``budget_s`` seconds left, its results in ``part``."""
    import importlib
    if smoke and name != "compile_sweep":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported anywhere in this process
    if name in ("tests_cuda", "tests_triton"):
        from .tests import group_tests
        return group_tests(name, smoke, part, budget_s)
    if name == "sanitizer":
        from .sanitizer import group_sanitizer
        return group_sanitizer(smoke, part, budget_s)
    ctx = Ctx(smoke, part)
    mod, fn = _MODULES[name]
    getattr(importlib.import_module(f"{__package__}.{mod}"), fn)(ctx)
    _record_fallbacks(ctx.out)
    ctx.flush()


# =============================================================================================
# parent side
# =============================================================================================

def _versions() -> dict:
    v = {"python": platform.python_version(), "platform": platform.platform()}
    for mod in ("torch", "triton", "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:
            v[mod] = f"unavailable ({type(e).__name__})"
    try:
        import torch
        v["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            v["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    v["driver"] = _smi("driver_version")
    v["gpu_smi"] = _smi("name")
    try:
        v["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                                         text=True, timeout=10).stdout.strip()
    except Exception:
        pass
    return v


def _summarise(groups: dict, meta: dict | None = None) -> dict:
    """The headline figures, lifted out of the groups, and every failure (the build's included)."""
    s: dict = {}
    for g in ("tests_cuda", "tests_triton"):
        r = groups.get(g, {}).get("results") or {}
        if r:
            s[g] = r.get("skipped") or {"counts": r.get("counts"), "failed": r.get("failed"),
                                        "unfinished": r.get("unfinished")}
    km = groups.get("kmeans", {}).get("results", {})
    for key, val in km.items():
        if isinstance(val, dict) and "s_per_iter" in val and "/" in key and not key.endswith("torch"):
            s[f"kmeans/{key}"] = {x: val.get(x) for x in ("s_per_iter", "speedup_vs_torch", "assign_frac_of_bound",
                                                          "assign_bound")}
    for key, val in groups.get("semiring", {}).get("results", {}).items():
        if isinstance(val, dict) and "terms_per_s" in val and not key.endswith("torch"):
            s[f"semiring/{key}"] = {x: val.get(x) for x in ("terms_per_s", "frac_of_ceiling",
                                                            "speedup_vs_torch_broadcast")}
    for key, val in groups.get("rq_kmeans", {}).get("results", {}).items():
        if isinstance(val, dict) and ("speedup_vs_torch" in val or "speedup" in val):
            s[f"rq/{key}"] = {x: val.get(x) for x in ("s", "speedup_vs_torch", "s_batched", "speedup")}
    for key, val in groups.get("cupy", {}).get("results", {}).items():
        if isinstance(val, dict) and "cupy_over_torch" in val:
            s[f"cupy/{key}"] = {x: val.get(x) for x in ("on_cupy_stream", "max_rel_diff", "cupy_over_torch")}
    for key, val in groups.get("graph", {}).get("results", {}).items():
        if isinstance(val, dict) and "total_s" in val:
            s[key] = {"total_s": val["total_s"], "meets_goal": val["meets_goal"]}
    san = groups.get("sanitizer", {}).get("results") or {}
    for tool in ("memcheck", "synccheck", "racecheck"):
        if isinstance(san.get(tool), dict):
            s[f"sanitizer/{tool}"] = san[tool].get("summary") or san[tool].get("skipped")
    errors, fallbacks = [], []
    build = (meta or {}).get("build") or {}
    if build.get("cuda_build") not in (None, "ok"):
        errors.append(f"build: CUDA build {build.get('cuda_build')}, measured with {build.get('fallback_build')} "
                      "(see build_result.json)")
    if (meta or {}).get("cuda_skipped"):
        errors.append(f"build: CUDA groups skipped: {meta['cuda_skipped']}")
    for g, gv in groups.items():
        res = gv.get("results") or {}
        for key, val in res.items():
            if isinstance(val, dict) and "error" in val:
                errors.append(f"{g}/{key}: {str(val['error'])[:400]}")
        if "error" in res and not isinstance(res["error"], dict):
            errors.append(f"{g}: {str(res['error'])[:600]}")
        fb = res.get("fallbacks") or {}
        for kind, items in fb.items():
            fallbacks += [f"{g}/{kind}: {it}" for it in items]
        if gv.get("status") not in ("ok", None) and not str(gv.get("status")).startswith("skipped"):
            errors.append(f"{g}: {gv.get('status')}")
    s["fallbacks"] = fallbacks
    s["errors"] = errors
    return s


def _expand(groups_arg: str) -> list:
    out = []
    for g in (x.strip() for x in groups_arg.split(",")):
        if not g:
            continue
        for h in ALIASES.get(g, (g,)):
            if h not in GROUPS + OPTIONAL_GROUPS:
                raise SystemExit(f"unknown group {h!r}; choose from {GROUPS + OPTIONAL_GROUPS} or {tuple(ALIASES)}")
            if h not in out:
                out.append(h)
    return out


def _report_lines(report: dict) -> list:
    """What a person reading the device tool's output tail needs: each group's status, then failures."""
    lines = ["[gpu_check] ---- summary ----"]
    for g, gv in report["groups"].items():
        lines.append(f"[gpu_check] {g:14s} {gv.get('status')} ({gv.get('seconds', 0)}s)")
    summ = report.get("summary", {})
    for g in ("tests_cuda", "tests_triton"):
        if g in summ:
            lines.append(f"[gpu_check] {g}: {json.dumps(summ[g])[:1500]}")
    for e in summ.get("errors", []):
        lines.append(f"[gpu_check] FAILED {e[:600]}")
    for f in summ.get("fallbacks", []):
        lines.append(f"[gpu_check] FALLBACK {f[:300]}")
    if not summ.get("errors"):
        lines.append("[gpu_check] no failures recorded")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path, help="folder for gpu_check.json (created)")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU under TRITON_INTERPRET=1")
    ap.add_argument("--groups", default=",".join(GROUPS),
                    help=f"comma-separated subset of {GROUPS + OPTIONAL_GROUPS} (default: all but "
                         f"{OPTIONAL_GROUPS}, in this order); 'tests' and 'slow' name {ALIASES}")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting groups after this many seconds")
    ap.add_argument("--group", help=argparse.SUPPRESS)
    ap.add_argument("--part", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--sanitize-payload", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.sanitize_payload:
        from .sanitizer import sanitize_payload
        return sanitize_payload(args.cpu_smoke)
    if args.group:  # child
        run_group(args.group, args.cpu_smoke, args.part, args.budget_s)
        return 0

    out_dir = args.outdir
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "gpu_check.json"
    t_start = time.perf_counter()
    meta = {"date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "mode": "cpu-smoke" if args.cpu_smoke else "gpu", "versions": _versions(), "budget_s": args.budget_s}
    build = out_dir / "build_status.json"  # written by gpu_device.sh: CUDA build, fallback, kernel probe
    if build.exists():
        try:
            meta["build"] = json.loads(build.read_text())
        except Exception as e:
            meta["build"] = {"error": repr(e)}
    if os.environ.get(NO_CUDA_ENV):
        meta["cuda_skipped"] = os.environ[NO_CUDA_ENV]
    report = {"meta": meta, "groups": {}}
    _atomic_write(path, report)
    groups = _expand(args.groups)
    for g in groups:
        left = args.budget_s - (time.perf_counter() - t_start)
        entry: dict = {}
        report["groups"][g] = entry
        timeout = plan_timeout(g, left, args.cpu_smoke)
        if timeout is None:
            entry["status"] = "skipped: time budget spent"
            report["summary"] = _summarise(report["groups"], report["meta"])
            report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
            _atomic_write(path, report)
            print(f"[gpu_check] {g}: {entry['status']}", flush=True)
            continue
        entry["timeout_s"] = round(timeout, 1)
        part = out_dir / f"part_{g}.json"
        part.unlink(missing_ok=True)
        cmd = [sys.executable, str(ENTRY), str(out_dir), "--group", g, "--part", str(part),
               "--budget-s", str(max(5.0, timeout - 5))]
        if args.cpu_smoke:
            cmd.append("--cpu-smoke")
        env = dict(os.environ)
        env.pop("CONTEXTRAG_BACKEND", None)
        t = time.perf_counter()
        rc, text = _run(cmd, timeout, cwd=REPO, env=env)
        if rc is None:
            entry["status"] = f"timeout after {timeout:.0f}s"
            entry["output_tail"] = text[-4000:]
        else:
            entry["status"] = "ok" if rc == 0 else f"exit {rc}"
            if rc != 0:
                entry["output_tail"] = text[-4000:]
        entry["seconds"] = round(time.perf_counter() - t, 2)
        if part.exists():
            try:
                entry["results"] = json.loads(part.read_text())
            except Exception as e:
                entry["results_error"] = repr(e)
            part.unlink(missing_ok=True)
        report["summary"] = _summarise(report["groups"], report["meta"])
        report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
        _atomic_write(path, report)
        print(f"[gpu_check] {g}: {entry['status']} in {entry['seconds']}s", flush=True)
    report["summary"] = _summarise(report["groups"], report["meta"])
    report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
    _atomic_write(path, report)
    print("\n".join(_report_lines(report)), flush=True)
    print(f"[gpu_check] wrote {path} ({report['meta']['elapsed_s']}s)")
    return exit_code(report)


def exit_code(report: dict) -> int:
    """0 when every group that ran finished ok and nothing recorded an error; 1 otherwise (a group
    skipped for want of budget is not an error: the summary names it)."""
    if report.get("summary", {}).get("errors"):
        return 1
    for gv in report.get("groups", {}).values():
        st = gv.get("status")
        if st not in ("ok", None) and not str(st).startswith("skipped"):
            return 1
    return 0


