"""Versions, machine, and a fingerprint of the library code that builds indexes (cache invalidation)."""
from __future__ import annotations

import hashlib
import importlib
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of the sources that decide an index's content (index/, ops/, ref/, rag.py, config.py), so a
    cached index is rebuilt when that code changes even if the version string does not."""
    import contextrag
    root = Path(contextrag.__file__).parent
    h = hashlib.sha256(contextrag.__version__.encode())
    files = []
    for sub in ("index", "ops", "ref", "query"):
        d = root / sub
        if d.is_dir():
            files += sorted(d.rglob("*.py"))
    files += [root / n for n in ("rag.py", "config.py") if (root / n).exists()]
    for f in files:
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("contextrag", "numpy", "torch", "bm25s", "sentence_transformers", "transformers", "scipy",
                 "matplotlib", "llama_cpp"):
        try:
            m = importlib.import_module(name)
            out[name] = getattr(m, "__version__", "?")
        except Exception:
            continue
    try:
        import contextrag
        root = Path(contextrag.__file__).resolve().parents[2]
        r = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                           text=True, timeout=5)
        if r.returncode == 0:
            out["git"] = r.stdout.strip()
    except Exception:
        pass
    return out


def machine() -> dict:
    out = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
           "cpus": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                out["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                out["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    except OSError:
        pass
    try:
        out["load_average_1m"] = round(os.getloadavg()[0], 2)   # a shared machine skews latency: say how busy
    except OSError:
        pass
    try:
        import torch
        out["torch_threads"] = torch.get_num_threads()
        out["cuda"] = torch.cuda.is_available()
        if out["cuda"]:
            out["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    return out
