"""On-disk cache of LLM calls, keyed by sha256 of (model, messages, params).

One SQLite file in WAL mode. Safe for threads (one connection per thread) and for concurrent
processes (SQLite's file locking; writes are single ``INSERT OR REPLACE`` statements with a busy
timeout, so two processes writing the same key both succeed and the value is one of theirs).
Values are JSON; nothing is pickled.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

_SCHEMA = """CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    value TEXT NOT NULL,
    created REAL NOT NULL
)"""


def cache_key(model: str, messages: list, params: dict) -> str:
    """sha256 of a canonical JSON encoding (sorted keys, no whitespace) of (model, messages, params).

    Stable across processes and Python versions: dict order and float formatting of the params do
    not matter (params are normalised: ints stay ints, floats are repr'd by JSON).
    """
    if not isinstance(model, str):
        raise TypeError(f"model must be a str, got {type(model).__name__}")
    if not isinstance(messages, list):
        raise TypeError(f"messages must be a list, got {type(messages).__name__}")
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict, got {type(params).__name__}")
    blob = json.dumps({"model": model, "messages": messages, "params": params},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def default_cache_path() -> Path:
    """``$CONTEXTRAG_CACHE_DIR/llm_cache.sqlite``, else ``~/.cache/contextrag/llm_cache.sqlite``."""
    base = os.environ.get("CONTEXTRAG_CACHE_DIR") or os.path.join(Path.home(), ".cache", "contextrag")
    return Path(base) / "llm_cache.sqlite"


class CallCache:
    """SQLite-backed call cache. ``get`` returns the stored dict or None; ``put`` stores one."""

    def __init__(self, path: str | os.PathLike | None = None, *, timeout: float = 30.0):
        self.path = Path(path) if path is not None else default_cache_path()
        if self.path.exists() and self.path.is_dir():
            raise ValueError(f"path must be a file path, got a directory: {self.path}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.timeout = float(timeout)
        self._local = threading.local()
        self._stats_lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        conn = self._conn()
        self._retry(lambda: conn.execute(_SCHEMA))

    def _conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None,
                                check_same_thread=False)
            try:
                c.execute("PRAGMA journal_mode=WAL")
            except sqlite3.OperationalError:
                pass  # another process is switching it at the same moment; WAL persists once set
            c.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = c
        return c

    def _retry(self, fn, attempts: int = 8):
        delay = 0.02
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as e:  # "database is locked" past the busy timeout
                if "locked" not in str(e) and "busy" not in str(e) or i == attempts - 1:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def get(self, model: str, messages: list, params: dict) -> dict | None:
        key = cache_key(model, messages, params)
        row = self._retry(lambda: self._conn().execute(
            "SELECT value FROM calls WHERE key = ?", (key,)).fetchone())
        with self._stats_lock:
            if row is None:
                self.misses += 1
            else:
                self.hits += 1
        return None if row is None else json.loads(row[0])

    def put(self, model: str, messages: list, params: dict, value: dict) -> None:
        if not isinstance(value, dict):
            raise TypeError(f"value must be a dict, got {type(value).__name__}")
        key = cache_key(model, messages, params)
        blob = json.dumps(value, ensure_ascii=False)
        self._retry(lambda: self._conn().execute(
            "INSERT OR REPLACE INTO calls (key, model, value, created) VALUES (?, ?, ?, ?)",
            (key, model, blob, time.time())))

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def clear(self) -> None:
        self._retry(lambda: self._conn().execute("DELETE FROM calls"))

    def close(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None
