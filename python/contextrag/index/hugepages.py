"""Fresh memory for an index write in ordinary pages, not in transparent huge pages.

NumPy advises the kernel to back each large array with transparent huge pages (``madvise(
MADV_HUGEPAGE)``, NumPy's ``NUMPY_MADVISE_HUGEPAGE``, on by default on Linux), which the kernel
follows when its huge pages are in ``madvise`` mode, the common default. A fault in such an array
takes a whole free 2 MB block: where free memory is fragmented the kernel may compact memory first,
and in a virtual machine whose host takes back the guest's free memory (free page reporting, which
hands back free blocks of that size) the host backs the block anew. Either is a stall whose length
depends on the machine's state, not on the work. An index write makes gigabytes of new arrays at a
million chunks. On the 2-core AMX Xeon virtual machine (``bench/results/fresh_memory.json``) a new
1 GB array took 2.3-2.6 s with the advice and 0.4-0.5 s without it, with no compaction counted: the
host's faults; without it a delete at a million chunks in a fresh process spent about 70 % less
system time (docs/SCALING.md). Ordinary pages cost a steady few microseconds each instead (the
k-means kernels chose them for the same reason, docs/KERNELS.md).

So while an index is updated or saved (:func:`small_pages`), NumPy's advice is off where the kernel
follows it, and it is put back as it was afterwards. (A build's stages before its save keep the
advice: run both ways, they gained nothing measurable, docs/SCALING.md.) Nothing else changes: it
is a hint about page size, not about contents. A user who set ``NUMPY_MADVISE_HUGEPAGE`` chose for
their process, and it is left as they set it; so is a kernel whose huge pages are always or never used
whatever the advice, and any system other than Linux.
"""
from __future__ import annotations

import os
import re
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

_THP = "/sys/kernel/mm/transparent_hugepage"
_lock = threading.Lock()
_depth = 0
_restore: bool | None = None


def _mode(text: str) -> str | None:
    """The selected mode of a sysfs choice list such as ``always defer [madvise] never``."""
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else None


def _read(name: str) -> str | None:
    try:
        with open(os.path.join(_THP, name)) as f:
            return f.read()
    except OSError:
        return None


def kernel_modes() -> dict:
    """The kernel's transparent huge page modes, ``{"enabled": ..., "defrag": ...}`` (None where the
    kernel has no such setting)."""
    return {name: _mode(_read(name) or "") for name in ("enabled", "defrag")}


def advice_followed(enabled: str | None = None) -> bool:
    """Whether the kernel's huge pages follow the advice (``transparent_hugepage/enabled`` in
    ``madvise`` mode; the file's text, read from sysfs when not given)."""
    mode = kernel_modes()["enabled"] if enabled is None else _mode(enabled)
    return mode == "madvise"


def _setter() -> Callable[[bool], bool] | None:
    """NumPy's switch for its huge-page advice (returns the previous setting), if this NumPy has one."""
    import numpy as np
    for mod in ("_core", "core"):
        f = getattr(getattr(getattr(np, mod, None), "multiarray", None), "_set_madvise_hugepage", None)
        if f is not None:
            return f
    return None


def wanted() -> bool:
    """Whether :func:`small_pages` turns the advice off in this process (see the module docstring)."""
    return "NUMPY_MADVISE_HUGEPAGE" not in os.environ and advice_followed() and _setter() is not None


@contextmanager
def small_pages() -> Iterator[None]:
    """NumPy's huge-page advice off for the duration, when :func:`wanted`; nested and concurrent
    uses share one switch, put back as it was when the last of them ends."""
    global _depth, _restore
    with _lock:
        if _depth == 0 and wanted():
            _restore = _setter()(False)     # type: ignore[misc]
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore is not None:
                _setter()(_restore)         # type: ignore[misc]
                _restore = None
