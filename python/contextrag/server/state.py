"""The served index: readers take the current ContextRAG, a writer works on a private copy and swaps it
in when the change is applied and saved, so a read never sees a half-applied write; a second write
while one runs is refused (the server answers 409) rather than queued behind a long index update."""
from __future__ import annotations

import copy
import threading


class WriteInProgress(RuntimeError):
    """Another write to the index is running."""


class IndexHolder:
    def __init__(self, rag):
        self._rag = rag
        self.generation = 0          # bumped by every applied write (GET /health reports it)
        self._write = threading.Lock()

    @property
    def rag(self):
        return self._rag             # one attribute read: a reader gets the old or the new index, whole

    def _copy(self):
        old = self._rag
        ix = old.index
        # shared, not copied: the embedding model (read-only) and the LLM cost ledger (it only adds up
        # calls made, and holds a lock that cannot be copied)
        memo = {id(x): x for x in (getattr(ix, "embedder", None), getattr(ix, "ledger", None)) if x is not None}
        return type(old)(copy.deepcopy(ix, memo), old.path, old.llm)

    def write(self, change):
        """Apply ``change(rag) -> result`` to a copy of the index (ContextRAG.add/delete save it when
        the index has a path), then make the copy current. Raises WriteInProgress when busy."""
        if not self._write.acquire(blocking=False):
            raise WriteInProgress("another write to the index is in progress; retry when it is done")
        try:
            new = self._copy()
            out = change(new)
            self._rag = new
            self.generation += 1
            return out
        finally:
            self._write.release()


class Served:
    """What the routers share: the index holder, the LLM (or None), the auth dependencies."""

    def __init__(self, *, holder: IndexHolder, llm, guarded: list, version: str):
        self.holder, self.llm, self.guarded, self.version = holder, llm, guarded, version
