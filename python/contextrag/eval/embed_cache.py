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
        from contextrag.index.embedding import Embedder
    except ImportError:
        return None

    class CachingEmbedder(Embedder):
        def __init__(self, *a, cache_path, **kw):
            super().__init__(*a, **kw)
            self._db_path = str(cache_path)
            self._db_lock = threading.Lock()
            Path(cache_path).parent.mkdir(parents=True, exist_ok=True)
            with sqlite3.connect(self._db_path) as db:
                db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, dim INTEGER, vec BLOB)")
            self.hits = self.misses = 0

        def _key(self, text: str) -> str:
            return hashlib.sha256("\x00".join((self.name, self.passage_prefix, text)).encode("utf-8")).hexdigest()

        def embed_passages(self, texts) -> np.ndarray:
            if isinstance(texts, str):
                return super().embed_passages(texts)   # the parent raises the right error
            texts = list(texts)
            keys = [self._key(t) if isinstance(t, str) else None for t in texts]
            found: dict[str, np.ndarray] = {}
            with self._db_lock, sqlite3.connect(self._db_path) as db:
                want = sorted({k for k in keys if k})
                for i in range(0, len(want), 500):
                    part = want[i:i + 500]
                    q = f"SELECT key, dim, vec FROM emb WHERE key IN ({','.join('?' * len(part))})"
                    for k, dim, blob in db.execute(q, part):
                        found[k] = np.frombuffer(blob, dtype=np.float32, count=dim)
            miss = [i for i, k in enumerate(keys) if k not in found]
            self.hits += len(texts) - len(miss)
            self.misses += len(miss)
            if miss:
                E_new = super().embed_passages([texts[i] for i in miss])
                with self._db_lock, sqlite3.connect(self._db_path) as db:
                    db.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)",
                                   [(keys[i], E_new.shape[1], E_new[j].astype(np.float32).tobytes())
                                    for j, i in enumerate(miss)])
                for j, i in enumerate(miss):
                    found[keys[i]] = E_new[j]
            if not texts:
                return super().embed_passages([])
            return np.ascontiguousarray(np.stack([found[k] for k in keys]), dtype=np.float32)

    try:
        return CachingEmbedder(config.embedding_model, query_prefix=config.query_prefix,
                               passage_prefix=config.passage_prefix, batch_size=config.embed_batch_size,
                               device=config.device, cache_path=Path(path))
    except Exception:   # an incompatible Embedder signature: build without the cache
        return None
