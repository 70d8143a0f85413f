"""Runs tests/kernels/test_triton_ops.py in a fresh process with TRITON_INTERPRET=1.

Triton decides between compiled and interpreted kernels when it (and each @triton.jit function) is
first imported, so the interpreter tests get their own process; this process is left untouched.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_triton_kernels_under_interpreter():
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("already in an interpreter process: test_triton_ops.py runs directly here")
    env = dict(os.environ)
    env["TRITON_INTERPRET"] = "1"
    env.pop("CONTEXTRAG_BACKEND", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
           str(HERE / "test_triton_ops.py")]
    proc = subprocess.run(cmd, cwd=HERE.parent.parent, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"interpreter tests failed:\n{out[-8000:]}"
    m = re.search(r"(\d+) passed", out)
    assert m and int(m.group(1)) >= 50, f"expected the interpreter tests to run, got:\n{out[-3000:]}"
    assert "skipped" not in out.split("\n")[-2] or "passed" in out
