#!/usr/bin/env python
"""The GPU check's build step: contextrag._C with the CUDA kernels, guarded.

    python bench/gpu/build.py DEST [--arch 90] [--timeout-s 300]

* nvcc is looked for on PATH, in $CUDA_HOME/bin and /usr/local/cuda/bin (and handed to CMake as
  CUDACXX); without one the CUDA build is not attempted and the status says why;
* each build runs under a timeout, with pip's version check and prompts off (the device has no network);
* if the CUDA build fails or times out, the extension is built without CUDA so Triton is still measured.

Writes DEST/build_result.json ({"cuda_build", "fallback_build", "nvcc", "build_s", "steps"}) and
DEST/build_<ON|OFF>.log; exits 1 only when no build succeeded.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIRS = ("/usr/local/cuda/bin",)


def find_nvcc(env: dict | None = None, default_dirs: tuple = DEFAULT_DIRS) -> str | None:
    """The nvcc a build would use: PATH first, then $CUDA_HOME/bin, then ``default_dirs``."""
    env = os.environ if env is None else env
    found = shutil.which("nvcc", path=env.get("PATH", ""))
    if found:
        return found
    for d in (os.path.join(env["CUDA_HOME"], "bin") if env.get("CUDA_HOME") else None, *default_dirs):
        if d and os.access(os.path.join(d, "nvcc"), os.X_OK):
            return os.path.join(d, "nvcc")
    return None


def build_env(mode: str, arch: str, nvcc: str | None, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update(CONTEXTRAG_CUDA=mode, CMAKE_ARGS=f"-DCMAKE_CUDA_ARCHITECTURES={arch}",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    if mode == "ON" and nvcc:
        env["CUDACXX"] = nvcc
        env["PATH"] = os.path.dirname(nvcc) + os.pathsep + env.get("PATH", "")
    return env


def pip_install_cmd(py: str = sys.executable) -> list:
    return [py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "-e", "."]


def run_step(cmd: list, env: dict, log: Path, timeout_s: float) -> str:
    """'ok', 'failed (exit N)' or 'timeout after N s'; the output goes to ``log``."""
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            return f"timeout after {timeout_s:.0f} s"
    return "ok" if rc == 0 else f"failed (exit {rc})"


def build(dest: Path, arch: str = "90", timeout_s: float = 300.0, cmd: list | None = None,
          env: dict | None = None, default_dirs: tuple = DEFAULT_DIRS) -> dict:
    """Build with CUDA if nvcc is there, else (or when that fails) without; the status of each step."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = cmd or pip_install_cmd()
    t0 = time.perf_counter()
    nvcc = find_nvcc(env, default_dirs)
    out = {"nvcc": nvcc, "steps": {}, "fallback_build": None}
    if nvcc is None:
        out["cuda_build"] = "skipped: nvcc not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)"
    else:
        out["cuda_build"] = out["steps"]["ON"] = run_step(cmd, build_env("ON", arch, nvcc, env),
                                                           dest / "build_ON.log", timeout_s)
    if out["cuda_build"] != "ok":
        if nvcc is not None and cmd == pip_install_cmd():
            shutil.rmtree(REPO / "build", ignore_errors=True)  # a half-configured CUDA tree must not leak
        out["steps"]["OFF"] = run_step(cmd, build_env("OFF", arch, None, env), dest / "build_OFF.log", timeout_s)
        out["fallback_build"] = "CONTEXTRAG_CUDA=OFF" if out["steps"]["OFF"] == "ok" else "failed"
    out["build_s"] = round(time.perf_counter() - t0, 1)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--arch", default=os.environ.get("CUDA_ARCH", "90"))
    ap.add_argument("--timeout-s", type=float, default=300.0, help="per build step")
    args = ap.parse_args(argv)
    r = build(args.dest, args.arch, args.timeout_s)
    (args.dest / "build_result.json").write_text(json.dumps(r, indent=2))
    print(f"[gpu_device] build: CUDA {r['cuda_build']}; fallback {r['fallback_build']}; {r['build_s']} s", flush=True)
    for step, st in r["steps"].items():
        if st != "ok":
            print(f"[gpu_device] build {step} {st}; tail of build_{step}.log:")
            print("\n".join((args.dest / f"build_{step}.log").read_text(errors="replace").splitlines()[-30:]))
    return 0 if r["cuda_build"] == "ok" or r["fallback_build"] == "CONTEXTRAG_CUDA=OFF" else 1


if __name__ == "__main__":
    sys.exit(main())
