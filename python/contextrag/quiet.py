"""Model loading without progress bars: transformers draws a "Loading weights" bar (and logs) on every
``from_pretrained``, which a query command would print on every run (the embedder's load and the
embedded LLM's).

transformers itself is not imported here: a query whose embedder runs on ONNX Runtime never needs it,
and its import costs seconds. When transformers is not imported yet, the block waits for it: should
anything inside the block import it, it is quieted as soon as its logging module has loaded.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import threading
from contextlib import contextmanager

_LOGGING = "transformers.utils.logging"


class _Quieting:
    """The quieting shared by every active block: transformers is quieted while at least one block
    is active (the first to see its logging module saves the state, the last block out restores it),
    and one import hook serves all blocks. Blocks may run at once in several threads (an embedder
    loading in its own thread while the LLM loads in the main one)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.active = 0
        self.saved = None          # (tlog, progress bars on, verbosity) while quieted
        self.hook = None

    def apply(self, tlog) -> None:
        with self.lock:
            if self.active == 0 or self.saved is not None:
                return
            self.saved = (tlog, tlog.is_progress_bar_enabled(), tlog.get_verbosity())
            tlog.disable_progress_bar()
            tlog.set_verbosity_error()

    def enter(self, hook_wanted: bool) -> None:
        with self.lock:
            self.active += 1
            if hook_wanted and self.hook is None and self.saved is None:
                self.hook = _OnImport(_LOGGING, self.apply)
                sys.meta_path.insert(0, self.hook)

    def exit(self) -> None:
        with self.lock:
            self.active -= 1
            if self.active:
                return
            if self.hook is not None:
                with contextlib.suppress(ValueError):
                    sys.meta_path.remove(self.hook)
                self.hook = None
            if self.saved is not None:
                tlog, bars, level = self.saved
                self.saved = None
                tlog.set_verbosity(level)
                if bars:
                    tlog.enable_progress_bar()


class _OnImport:
    """A meta path finder (no importlib.abc base: its import costs start-up time) that runs
    ``then(module)`` right after the module ``name`` is executed by its own loader.

    Finding the real spec asks the other finders on ``sys.meta_path``; a thread-local guard makes a
    nested ask (another finder that consults ``sys.meta_path`` in turn) answer None instead of
    recursing."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then
        self.busy = threading.local()

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or getattr(self.busy, "on", False):
            return None
        self.busy.on = True
        try:
            for finder in list(sys.meta_path):
                if isinstance(finder, _OnImport) or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self.busy.on = False
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run, then = loader.exec_module, self.then

        def exec_module(module):
            run(module)
            then(module)
        loader.exec_module = exec_module
        return spec


_QUIETING = _Quieting()


@contextmanager
def quiet_loading():
    """transformers' progress bars and its info logs off inside the block, restored when the last
    active block ends (a no-op without transformers; transformers is not imported by this)."""
    loaded = _LOGGING in sys.modules     # imported, or being imported by another thread: waited for below
    _QUIETING.enter(hook_wanted=not loaded and importlib.util.find_spec("transformers") is not None)
    try:
        if loaded:
            _QUIETING.apply(importlib.import_module(_LOGGING))
        yield
    finally:
        _QUIETING.exit()
