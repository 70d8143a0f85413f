"""A cheap, deterministic embedder for tests that start many processes: words hashed into 64 signed
dimensions, unit rows. It loads in microseconds, where the real model costs seconds per process."""
from __future__ import annotations

import hashlib
import re

import numpy as np

DIM = 64
_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    dim = DIM
    query_prefix = ""
    passage_prefix = ""

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, np.float32)
        for w in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
            v[h % DIM] += 1.0 if (h >> 16) & 1 else -1.0
        if not v.any():
            v[0] = 1.0
        return v / np.linalg.norm(v)

    def embed_passages(self, texts):
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    embed_queries = embed_passages


def tiny_config():
    from contextrag import Config
    return Config(rq_sizes=(6, 3, 2), n_join=4, n_meet=4, n_summaries=0, seed=0, chunk_tokenizer="regex")
