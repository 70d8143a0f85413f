"""Versions, machine, and a fingerprint of the library code that builds indexes (cache invalidation)."""
from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path


def _hash_sources(subdirs: tuple[str, ...], files: tuple[str, ...]) -> str:
    import contextrag
    root = Path(contextrag.__file__).parent
    h = hashlib.sha256(contextrag.__version__.encode())
    paths = []
    for sub in subdirs:
        d = root / sub
        if d.is_dir():
            paths += sorted(d.rglob("*.py"))
    paths += [root / n for n in files if (root / n).exists()]
    for f in paths:
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """Hash of the sources that decide an index's content (index/, embed/ and rag.py), so a cached index is
    rebuilt when that code changes even if the version string does not. The kernels (ops/) are left
    out: their backends are tested equal to the reference, and they change often without changing
    what an index holds. Config values are hashed separately."""
    return _hash_sources(("index", "embed"), ("rag.py",))


@lru_cache(maxsize=1)
def query_code_fingerprint() -> str:
    """Hash of the query code: part of each system's fingerprint, so per-question rows are recomputed
    (but the index is kept) when the query code changes."""
    return _hash_sources(("query",), ())


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("contextrag", "numpy", "torch", "bm25s", "sentence_transformers", "transformers", "scipy",
                 "matplotlib"):
        try:
            m = importlib.import_module(name)
            out[name] = getattr(m, "__version__", "?")
        except Exception:
            continue
    # Versions of optional runtimes from their metadata: importing llama_cpp loads native code that
    # may not run on this CPU.
    for dist in ("gguf", "llama-cpp-python"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
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
