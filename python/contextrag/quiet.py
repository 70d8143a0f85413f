"""Model loading without progress bars: transformers draws a "Loading weights" bar (and logs) on every
``from_pretrained``, which a query command would print on every run (the embedder's load and the
embedded LLM's)."""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def quiet_loading():
    """transformers' progress bars and its info logs off inside the block, restored afterwards (a
    no-op without transformers)."""
    try:
        from transformers.utils import logging as tlog
    except ImportError:
        yield
        return
    bars, level = tlog.is_progress_bar_enabled(), tlog.get_verbosity()
    tlog.disable_progress_bar()
    tlog.set_verbosity_error()
    try:
        yield
    finally:
        tlog.set_verbosity(level)
        if bars:
            tlog.enable_progress_bar()
