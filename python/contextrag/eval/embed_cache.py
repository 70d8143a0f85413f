"""A passage-embedding cache for evaluation rebuilds.

Rebuilding an index (a new index-time setting, ``Config.paper()`` beside the default, changed library
code) re-embeds the same passages, which is most of the build time on a CPU. The harness hands
``ContextRAG.build`` an embedder that keeps passage vectors in ``CACHE_DIR/embeddings.sqlite`` keyed by
(model, passage prefix, text). Query embeddings are never cached, so measured query latency still
includes embedding the question.
"""
from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np


def caching_embedder(config, path: str | Path):
    """An ``Embedder`` for ``config`` whose ``embed_passages`` reads/writes the cache at ``path``;
    None when the index's Embedder is not available (then builds embed as usual)."""
    try:
        from contextrag.embed.embedder import Embedder
    except ImportError:
        return None

    class CachingEmbedder(Embedder):
        BLOCK = 512
        def __init__(self, *a, cache_path, **kw):
            super().__init__(*a, **kw)
            self._db_path = str(cache_path)
            self._db_lock = threading.Lock()
            Path(cache_path).parent.mkdir(parents=True, exist_ok=True)
            with sqlite3.connect(self._db_path, timeout=120) as db:
                db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
            self.hits = self.misses = 0

        def _key(self, text: str) -> str:
            # torch and its fp32 ONNX export give the same vectors (docs/EMBEDDING.md): one key; the
            # int8 and static backends differ and get their own
            b = getattr(self, "backend", "torch")
            name = self.name if b in ("torch", "onnx") else f"{self.name}|{b}"
            return hashlib.sha256("\x00".join((name, self.passage_prefix, text)).encode("utf-8")).hexdigest()

        def embed_passages(self, texts) -> np.ndarray:
            if isinstance(texts, str):
                return super().embed_passages(texts)   # the parent raises the right error
            texts = list(texts)
            keys = [self._key(t) if isinstance(t, str) else None for t in texts]
            found: dict[str, np.ndarray] = {}
            with self._db_lock, sqlite3.connect(self._db_path, timeout=120) as db:
                want = sorted({k for k in keys if k})
                for i in range(0, len(want), 500):
                    part = want[i:i + 500]
                    q = f"SELECT key, dim, vec FROM emb WHERE key IN ({','.join('?' * len(part))})"
                    for k, dim, blob in db.execute(q, part):
                        found[k] = np.frombuffer(blob, dtype=np.float32, count=dim)
            miss = [i for i, k in enumerate(keys) if k not in found]
            self.hits += len(texts) - len(miss)
            self.misses += len(miss)
            # embed the misses in blocks, each stored as soon as it is done: an interrupted build
            # keeps what it embedded
            uniq = list(dict.fromkeys(keys[i] for i in miss))
            text_of = {keys[i]: texts[i] for i in miss}
            for b in range(0, len(uniq), self.BLOCK):
                block = uniq[b:b + self.BLOCK]
                E_new = super().embed_passages([text_of[k] for k in block])
                with self._db_lock, sqlite3.connect(self._db_path, timeout=120) as db:
                    db.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)",
                                   [(k, E_new.shape[1], E_new[j].astype(np.float32).tobytes())
                                    for j, k in enumerate(block)])
                for j, k in enumerate(block):
                    found[k] = E_new[j]
            if not texts:
                return super().embed_passages([])
            return np.ascontiguousarray(np.stack([found[k] for k in keys]), dtype=np.float32)

    try:
        return CachingEmbedder(config.embedding_model, backend=config.embedder,
                               query_prefix=config.query_prefix,
                               passage_prefix=config.passage_prefix, batch_size=config.embed_batch_size,
                               device=config.device, cache_path=Path(path))
    except Exception:   # an incompatible Embedder signature: build without the cache
        return None


class SharedQueryEmbeddings:
    """Wraps an index's embedder so that each question is embedded once per run and shared by every
    system (7 systems would otherwise embed the same 500 questions 7 times on a CPU). The embedding
    time of a question is measured when it is computed; ``take_reused_ms()`` gives the time of the
    embeddings served from memory since the last call, which the runner adds back to that query's
    latency, so every system's latency still includes embedding its question once."""

    def __init__(self, inner):
        self._inner = inner
        self._vecs: dict[str, tuple[np.ndarray, float]] = {}
        self._reused_ms = 0.0
        self._computed_ms = 0.0
        self._lock = threading.Lock()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def embed_queries(self, texts):
        import time
        texts = list(texts)
        miss = [t for t in dict.fromkeys(texts) if t not in self._vecs]
        if miss:
            t0 = time.perf_counter()
            E = self._inner.embed_queries(miss)
            per = (time.perf_counter() - t0) * 1000.0 / len(miss)
            with self._lock:
                self._computed_ms += per * len(miss)
            for t, v in zip(miss, E):
                self._vecs[t] = (np.asarray(v, dtype=np.float32), per)
        with self._lock:
            self._reused_ms += sum(self._vecs[t][1] for t in texts if t not in miss)
        if not texts:
            return self._inner.embed_queries([])
        return np.stack([self._vecs[t][0] for t in texts])

    def take_reused_ms(self) -> float:
        with self._lock:
            v, self._reused_ms = self._reused_ms, 0.0
        return v

    def take_computed_ms(self) -> float:
        """Time spent embedding (not reusing) questions since the last call."""
        with self._lock:
            v, self._computed_ms = self._computed_ms, 0.0
        return v


def share_query_embeddings(rag):
    """Install :class:`SharedQueryEmbeddings` on a ContextRAG's index; None when it has no such embedder."""
    ix = getattr(rag, "index", None)
    emb = getattr(ix, "embedder", None)
    if emb is None or not callable(getattr(emb, "embed_queries", None)):
        return None
    if isinstance(emb, SharedQueryEmbeddings):
        return emb
    shared = SharedQueryEmbeddings(emb)
    try:
        ix.embedder = shared
    except AttributeError:
        return None
    return shared
