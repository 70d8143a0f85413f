"""``ContextRAG``: build, load, update and query an extraction-free graph RAG index.

    rag = ContextRAG.build(docs, path="idx", config=Config(...), llm=None)
    rag = ContextRAG.load("idx")
    rag.add(more_docs); rag.delete(["doc3"]); rag.stats(); rag.rebuild()
    hits = rag.retrieve("question", k=12, filter={"year": {"$gte": 2020}})   # contextrag.query.retrieve
    ans = rag.answer("question", llm=client)     # contextrag.query.answer

``docs``: an iterable of str or dict(id, text, title=..., metadata=...). With a ``path`` every
change is saved atomically before the call returns (a failed save leaves the previous index on disk).
The in-memory index is ``rag.index`` (contextrag.index.core.Index; its fields are documented there).
"""
from __future__ import annotations

import os
import time

import numpy as np


def _check_config(config):
    from .config import Config
    if config is None:
        return Config()
    if not isinstance(config, Config):
        raise TypeError(f"config must be a contextrag.Config, got {type(config).__name__}")
    if config.chunk_tokenizer not in ("model", "regex"):
        raise ValueError(f"config.chunk_tokenizer must be 'model' or 'regex', got {config.chunk_tokenizer!r}")
    if config.fcm_normalize not in ("none", "max"):
        raise ValueError(f"config.fcm_normalize must be 'none' or 'max', got {config.fcm_normalize!r}")
    if not (isinstance(config.member_ratio, (int, float)) and 0 < config.member_ratio <= 1):
        raise ValueError(f"config.member_ratio must be in (0, 1], got {config.member_ratio!r}")
    for name in ("min_support", "node_text_chunks", "summary_chunks", "cooc_window"):
        v = getattr(config, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"config.{name} must be an int >= 1, got {v!r}")
    mp = config.rq_max_points_per_centroid
    if mp is not None and (isinstance(mp, bool) or not isinstance(mp, int) or mp < 1):
        raise ValueError(f"config.rq_max_points_per_centroid must be None or an int >= 1, got {mp!r}")
    return config


def _check_llm(llm):
    if llm is not None and not callable(getattr(llm, "complete", None)):
        raise TypeError(f"llm must be a contextrag.llm LLMClient (with .complete), got {type(llm).__name__}")
    return llm


class ContextRAG:
    def __init__(self, index, path=None, llm=None):
        self.index = index
        self.path = None if path is None else os.fspath(path)
        self.llm = llm

    # ---- construction
    @classmethod
    def build(cls, docs, path=None, config=None, llm=None, *, embedder=None, executor: str = "local",
              ray_address: str | None = None) -> "ContextRAG":
        """Chunk, embed, cluster, build the concept graph (and summaries with an LLM); save to ``path``.

        ``executor='ray'`` embeds with Ray Data and runs stages 2-3 on shard actors of the Ray cluster
        at ``ray_address`` (a local one when None): same index, same format (contextrag.distributed).
        """
        if executor not in ("local", "ray"):
            raise ValueError(f"executor must be 'local' or 'ray', got {executor!r}")
        from .index.build import build_index
        from .index.chunking import normalize_docs
        from .index.embedding import Embedder
        config = _check_config(config)
        llm = _check_llm(llm)
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        docs = normalize_docs(docs)
        if not docs:
            raise ValueError("docs is empty: give at least one document")
        if path is not None:
            from .index.store import check_writable
            check_writable(path)   # fail before the expensive work, not after it
        emb = embedder if embedder is not None else Embedder.from_config(config)
        if executor == "ray":
            from .distributed.build import build_index_ray
            ix = build_index_ray(docs, config, emb, llm, address=ray_address)
        else:
            ix = build_index(docs, config, emb, llm)
        rag = cls(ix, path, llm)
        rag._save()
        return rag

    @classmethod
    def load(cls, path, *, llm=None, embedder=None) -> "ContextRAG":
        from .index.store import load
        return cls(load(path, embedder=embedder), path, _check_llm(llm))

    def save(self, path=None) -> None:
        if path is not None:
            self.path = os.fspath(path)
        if self.path is None:
            raise ValueError("path is required: this index was built without one")
        self._save()

    def _save(self):
        if self.path is None:
            return
        from .index import store
        t = time.perf_counter()
        store.save(self.index, self.path)
        self.index.timings["save"] = time.perf_counter() - t

    # ---- updates
    def add(self, docs) -> dict:
        """Add documents without a full rebuild (new chunks assigned to the existing codebooks)."""
        from .index.build import add_docs
        from .index.chunking import normalize_docs
        start = len(self.index.docs)
        while any(f"doc{start + i}" in self.index.docs for i in range(8)):
            start += 8   # generated ids ("doc<k>" for plain strings) must not collide after deletes
        docs = normalize_docs(docs, start=start)
        if not docs:
            raise ValueError("docs is empty: give at least one document")
        out = add_docs(self.index, docs)
        self._save()
        return out

    def delete(self, doc_ids) -> dict:
        """Remove documents (their chunks, context rows, node memberships, item texts, BM25 entries)."""
        from .index.build import delete_docs
        if doc_ids is None or isinstance(doc_ids, bytes):
            raise TypeError("doc_ids must be a str or an iterable of str")
        out = delete_docs(self.index, doc_ids)
        self._save()
        return out

    def rebuild(self, llm=None) -> "ContextRAG":
        """Re-cluster from the stored embeddings and rebuild the graph (and summaries with an LLM)."""
        from .index.build import rebuild
        rebuild(self.index, _check_llm(llm) or self.llm)
        self._save()
        return self

    # ---- diagnostics
    def stats(self) -> dict:
        from .index.stats import index_stats
        return index_stats(self.index, self.path)

    # ---- queries (contextrag.query owns retrieval)
    def retrieve(self, question, k: int = 12, doc_ids=None, *, filter=None, explain: bool = False, **overrides):
        """Top-k hits; ``filter``: metadata conditions (contextrag.query.filters), ANDed with ``doc_ids``."""
        from . import query
        from .query.filters import doc_ids_for
        if explain:
            overrides["explain"] = True
        return query.retrieve(self.index, question, k=k, doc_ids=doc_ids_for(self.index, doc_ids, filter),
                              **overrides)

    def _filtered(self, kw):
        from .query.filters import doc_ids_for
        f = kw.pop("filter", None)
        if f is not None:
            kw["doc_ids"] = doc_ids_for(self.index, kw.get("doc_ids"), f)
        kw.setdefault("llm", self.llm)
        return kw

    def answer(self, question, **kw):
        from . import query
        return query.answer(self.index, question, **self._filtered(kw))

    async def aanswer(self, question, **kw):
        from . import query
        kw = self._filtered(kw)
        fn = getattr(query, "aanswer", None)
        if fn is not None:
            return await fn(self.index, question, **kw)
        import asyncio
        return await asyncio.to_thread(query.answer, self.index, question, **kw)

    def __repr__(self):
        ix = self.index
        return (f"ContextRAG(docs={len(ix.docs)}, chunks={ix.n_chunks}, items={ix.n_items}, "
                f"nodes={ix.graph.n_nodes}, path={self.path!r})")


__all__ = ["ContextRAG", "np"]
