"""The "tests_cuda" and "tests_triton" groups: the GPU tests in their own pytest process."""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

from .common import NO_CUDA_ENV, REPO, _atomic_write, _run


_OUTCOME = re.compile(r"(\S+::\S+)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)|"
                      r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+::\S+)")
_STARTED = re.compile(r"^(\S+::\S+)\s*$")


def parse_pytest_verbose(text: str) -> dict:
    """Outcome counts, failed/errored test ids and the test still running when the output stops
    (a timeout or a crash), from ``pytest -v`` output (plain or pytest-xdist)."""
    counts: dict = {}
    failed, seen, started = [], set(), []
    for line in text.splitlines():
        m = _OUTCOME.search(line)
        if m:
            node, outcome = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
            if node in seen:
                continue
            seen.add(node)
            counts[outcome.lower()] = counts.get(outcome.lower(), 0) + 1
            if outcome in ("FAILED", "ERROR"):
                failed.append(f"{outcome} {node}")
            continue
        m = _STARTED.match(line.strip())
        if m:
            started.append(m.group(1))
    # -v prints "node" then the outcome on the same line; a node without one was running at the end
    unfinished = [n for n in started if n not in seen]
    return {"counts": counts, "failed": failed[:80], "unfinished": unfinished[-3:]}


def inner_timeout(budget_s: float) -> float:
    """The inner pytest's timeout: the group's remaining budget less a margin to parse and write."""
    return max(1.0, budget_s - 5.0)


def group_tests(which: str, smoke: bool, part: Path, budget_s: float) -> None:
    import importlib.util
    out: dict = {}
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfE", "-o", "faulthandler_timeout=60"]
    if which == "tests_cuda":
        if os.environ.get(NO_CUDA_ENV):
            out["skipped"] = f"CUDA kernels cannot run: {os.environ[NO_CUDA_ENV]}"
            _atomic_write(part, out)
            return
        cmd += ["-k", "cuda", "tests/kernels/gpu", "tests/kernels/test_cuda_build.py"]
    else:
        cmd += ["-k", "not cuda", "tests/kernels/gpu"]
    if not smoke:
        # Triton compiling is most of the Triton tests' time: spread it over processes when xdist is
        # there, and let a hanging test fail alone when pytest-timeout is
        if which == "tests_triton" and importlib.util.find_spec("xdist") is not None:
            cmd += ["-n", "8"]
        if importlib.util.find_spec("pytest_timeout") is not None:
            cmd += ["--timeout", "60"]
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    t = time.perf_counter()
    out["inner_timeout_s"] = round(inner_timeout(budget_s), 1)
    rc, text = _run(cmd, inner_timeout(budget_s), own_group=False, cwd=REPO, env=env)
    out["returncode"] = "timeout" if rc is None else rc
    out["seconds"] = round(time.perf_counter() - t, 2)
    lines = text.strip().splitlines()
    out["summary"] = lines[-1] if lines else ""
    out.update(parse_pytest_verbose(text))
    if rc not in (0, 5):  # 5: nothing collected/selected (no device, all deselected)
        out["error"] = (f"pytest {out['returncode']}: {len(out['failed'])} failed"
                        + (f", running at the end: {out['unfinished']}" if out["unfinished"] else ""))
    out["tail"] = "\n".join(lines[-40:])
    (part.parent / f"pytest_{which}.txt").write_text(text)
    _atomic_write(part, out)
