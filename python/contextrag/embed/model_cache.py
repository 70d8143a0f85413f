"""Where derived embedding models live: ONNX exports and distilled static models, made once, locally.

Each derived model is a folder under ``$CONTEXTRAG_CACHE_DIR/embedders`` (default
``~/.cache/contextrag/embedders``) named by the source model and a key of the source weights' files
(name, size, modification time) and the derivation's format version, so a new source or a new
exporter makes a new folder. A folder is built in a temporary sibling and renamed into place in one
step: readers see a whole model or none, and two processes exporting at once both end with one
folder (the second rename fails and its copy is dropped).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable


def cache_base() -> Path:
    """``$CONTEXTRAG_CACHE_DIR`` (default ``~/.cache/contextrag``): the embedder caches and the
    machine profile (``contextrag.machine``) live under it."""
    return Path(os.environ.get("CONTEXTRAG_CACHE_DIR") or os.path.join(Path.home(), ".cache", "contextrag"))


def cache_root() -> Path:
    return cache_base() / "embedders"


def _source_key(source: str) -> str:
    """The source model's identity: its weight and config files (name, size, mtime) for a local
    folder, the name otherwise (a hub model is versioned by its own cache)."""
    p = Path(source)
    if not p.is_dir():
        return source
    parts = []
    for f in sorted(p.rglob("*")):
        if f.is_file() and f.suffix in (".safetensors", ".bin", ".json", ".txt", ".model"):
            st = f.stat()
            parts.append((str(f.relative_to(p)), st.st_size, st.st_mtime_ns))
    return json.dumps([str(p.resolve()), parts])


def derived_dir(source: str, kind: str, version: int) -> Path:
    """The cache folder of ``kind`` (e.g. "onnx-fp32") derived from ``source`` at format ``version``."""
    key = hashlib.sha256(f"{_source_key(source)}\x00{kind}\x00{version}".encode()).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(source).name if Path(source).is_dir() else source)[-48:]
    return cache_root() / f"{slug}-{kind}-{key}"


def ensure_dir(final: Path, make: Callable[[Path], None], marker: str) -> Path:
    """``final`` when it holds ``marker``; else ``make(tmp)`` fills a temporary folder that is then
    renamed to ``final`` atomically. Returns ``final``."""
    if (final / marker).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        make(tmp)
        if not (tmp / marker).is_file():
            raise RuntimeError(f"the model derivation wrote no {marker} in {tmp}")
        if final.exists() and not (final / marker).is_file():
            shutil.rmtree(final, ignore_errors=True)     # a stale, incomplete folder (older layout)
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / marker).is_file():           # not another process's finished copy
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final
