"""Build stages: wall time of each (``Index.timings``) and, when asked, one progress bar each on stderr.

Bars show when ``progress=True``, or when ``progress=None`` (the default) and stderr is a terminal
and the ``contextrag`` logger is enabled for INFO (the CLI sets that level unless ``-q``). Library
use without a configured logger stays silent.
"""
from __future__ import annotations

import logging
import sys
import time
from contextlib import contextmanager


def show_progress(progress: bool | None) -> bool:
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None, got {type(progress).__name__}")
    if progress is not None:
        return progress
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty()) and logging.getLogger("contextrag").isEnabledFor(logging.INFO)


class Stages:
    """``with stages("embed", total=n, unit="chunk") as tick: ... tick(k)`` times the stage into
    ``timings`` (seconds, added up when a stage repeats) and draws its bar when enabled."""

    def __init__(self, timings: dict, progress: bool | None = None):
        self.timings = timings
        self.enabled = show_progress(progress)

    @contextmanager
    def __call__(self, name: str, total: int | None = None, unit: str = "step"):
        bar = None
        if self.enabled:
            from tqdm.auto import tqdm
            bar = tqdm(total=total if total is not None else 1, desc=f"{name:<9}", unit=unit,
                       file=sys.stderr, leave=True, dynamic_ncols=True)
        t = time.perf_counter()
        try:
            yield (bar.update if bar is not None else _no_tick)
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t
            if bar is not None:
                if total is None:
                    bar.update(1)
                bar.close()


def _no_tick(n: int = 1) -> None:
    return None
