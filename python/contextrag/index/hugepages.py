"""Fresh memory for an index write without the kernel compacting memory at every fault.

NumPy advises the kernel to back each large array with transparent huge pages (``madvise(
MADV_HUGEPAGE)``, NumPy's ``NUMPY_MADVISE_HUGEPAGE``, on by default on Linux). Under the kernel's
default ``defrag`` mode (``madvise``, and ``always`` and ``defer+madvise`` alike) a fault in such an
array that finds no free 2 MB page compacts memory then and there. An index write is where that
happens: it makes gigabytes of new arrays at a million chunks while the page cache holds the
snapshot it maps, so free memory is in small pieces. Measured on the 2-core AMX Xeon virtual machine
(``bench/results/fresh_memory.json``): a first touch of 1 GB with the advice costs several times
the system time of one without it, and a delete of 100 documents from the million-chunk index spends
most of its system time there (docs/SCALING.md).

So while an index is built, updated or saved (:func:`small_pages`), NumPy's advice is off when the
kernel would compact for it, and it is put back as it was afterwards. Nothing else changes: it is a
hint about page size, not about contents. A user who set ``NUMPY_MADVISE_HUGEPAGE`` chose for their
process, and it is left as they set it; so is a kernel whose huge pages are off or that does not
compact at a fault (``defrag`` ``defer`` or ``never``), and any system other than Linux.
"""
from __future__ import annotations

import os
import re
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

_THP = "/sys/kernel/mm/transparent_hugepage"
_COMPACTS_AT_FAULT = ("always", "madvise", "defer+madvise")    # defrag modes that stall an madvised fault
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


def advice_stalls(enabled: str | None = None, defrag: str | None = None) -> bool:
    """Whether NumPy's huge-page advice makes a fault compact memory on this kernel (the texts of
    ``transparent_hugepage/enabled`` and ``defrag``; read from sysfs when not given)."""
    enabled = _read("enabled") if enabled is None else enabled
    defrag = _read("defrag") if defrag is None else defrag
    if enabled is None or defrag is None:
        return False
    return _mode(enabled) in ("always", "madvise") and _mode(defrag) in _COMPACTS_AT_FAULT


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
    return "NUMPY_MADVISE_HUGEPAGE" not in os.environ and advice_stalls() and _setter() is not None


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
