"""Model loading without progress bars: transformers draws a "Loading weights" bar (and logs) on every
``from_pretrained``, which a query command would print on every run (the embedder's load and the
embedded LLM's).

transformers itself is not imported here: a query whose embedder runs on ONNX Runtime never needs it,
and its import costs seconds. When transformers is not imported yet, the block waits for it: should
anything inside the block import it, it is quieted as soon as its logging module has loaded.
"""
from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager

_LOGGING = "transformers.utils.logging"


class _Quiet:
    """Quiets one transformers logging module and restores it."""

    def __init__(self):
        self.saved = None

    def apply(self, tlog) -> None:
        self.saved = (tlog, tlog.is_progress_bar_enabled(), tlog.get_verbosity())
        tlog.disable_progress_bar()
        tlog.set_verbosity_error()

    def restore(self) -> None:
        if self.saved is None:
            return
        tlog, bars, level = self.saved
        tlog.set_verbosity(level)
        if bars:
            tlog.enable_progress_bar()


class _OnImport:
    """A meta path finder (no importlib.abc base: its import costs start-up time) that runs
    ``then(module)`` right after the module ``name`` is executed by its own loader."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, then = loader.exec_module, self.then

        def exec_module(module):
            run(module)
            then(module)
        loader.exec_module = exec_module
        return spec


@contextmanager
def quiet_loading():
    """transformers' progress bars and its info logs off inside the block, restored afterwards (a
    no-op without transformers; transformers is not imported by this)."""
    quiet = _Quiet()
    tlog = sys.modules.get(_LOGGING)
    hook = None
    if tlog is not None:
        quiet.apply(tlog)
    elif importlib.util.find_spec("transformers") is not None:
        hook = _OnImport(_LOGGING, quiet.apply)
        sys.meta_path.insert(0, hook)
    try:
        yield
    finally:
        if hook is not None:
            sys.meta_path.remove(hook)
        quiet.restore()
