"""Per-key caches whose entries are built once, however many threads ask at the same moment.

After an index is loaded or swapped in by a writer, every querying thread arrives at the new index's
query view and lexical state together. Building them in each thread at once multiplies the work by
the number of threads, all of it sharing the same cores, so every query waits for the slowest
build; here the first thread builds and the others wait for its result.
"""
from __future__ import annotations

import threading
from typing import Callable, Hashable, TypeVar

T = TypeVar("T")

_GUARDS: dict = {}
_GUARDS_LOCK = threading.Lock()


def build_once(key: Hashable, lookup: Callable[[], T | None], build: Callable[[], T]) -> T:
    """``lookup()`` if it finds the entry, else ``build()`` (which stores it) in one thread per key.

    A build that raises lets the next waiting thread try again."""
    got = lookup()
    if got is not None:
        return got
    with _GUARDS_LOCK:
        guard = _GUARDS.setdefault(key, threading.Lock())
    try:
        with guard:
            got = lookup()
            if got is None:
                got = build()
            return got
    finally:
        with _GUARDS_LOCK:
            if _GUARDS.get(key) is guard:
                del _GUARDS[key]


def drop_elsewhere(objs: list) -> None:
    """Let a thread of its own drop the last references to ``objs`` (the views and states of indexes
    no longer in use). Freeing them unmaps their arrays; where those map a snapshot that an update
    has replaced (its files already unlinked), the kernel frees the files' pages then: GBs at a
    million chunks, which the query or update that found them stale should not wait for."""
    if objs:
        threading.Thread(target=objs.clear, name="contextrag-release", daemon=True).start()
