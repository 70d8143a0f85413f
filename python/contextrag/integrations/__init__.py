"""Adapters that put contextrag into the frameworks RAG applications are written in.

* ``contextrag.integrations.langchain.ContextRAGRetriever``: a ``langchain_core`` BaseRetriever
  (extra ``contextrag[langchain]``);
* ``contextrag.integrations.llamaindex.ContextRAGRetriever``: a ``llama_index.core`` BaseRetriever
  (extra ``contextrag[llamaindex]``).

Both are built from an index path or a ContextRAG, pass ``k``, ``doc_ids`` and metadata ``filter``
through to :meth:`contextrag.ContextRAG.retrieve`, and carry every hit's text, score, doc id, title,
metadata, kind and character span (:func:`hit_metadata`). The frameworks are imported only by their
own module, so ``import contextrag`` never needs them.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Union

from ..config import check_k  # noqa: F401  (the adapters check k as the queries do)

if TYPE_CHECKING:
    from ..query import Hit
    from ..rag import ContextRAG

#: What an adapter is built from: a ContextRAG, or an index directory to load.
IndexLike = Union["ContextRAG", str, "os.PathLike[str]"]

__all__ = ["open_rag", "score_of", "hit_metadata", "check_k", "HIT_FIELDS", "IndexLike"]


def open_rag(index: IndexLike) -> ContextRAG:
    """A ContextRAG from a ContextRAG (returned as is) or an index directory (loaded)."""
    from ..rag import ContextRAG
    if isinstance(index, ContextRAG):
        return index
    if isinstance(index, (str, os.PathLike)):
        return ContextRAG.load(index)
    raise TypeError(f"index must be an index directory (str or os.PathLike) or a ContextRAG, "
                    f"got {type(index).__name__}")


# the fields every adapter sets on a returned document/node, over the document's own metadata
HIT_FIELDS = ("id", "doc_id", "doc_ids", "title", "kind", "score", "parts", "span", "start_char",
              "end_char", "rank")


def score_of(hit: Hit) -> float:
    """The score a framework sees: the hit's absolute relevance in [0, 1] (query/relevance.py), on
    which a similarity cutoff means the same for every question; the rank score (its BM25 term is
    divided by the per-query maximum) is kept as ``rank_score``."""
    return float(hit.relevance if hit.relevance is not None else hit.score)


def hit_metadata(hit: Hit, rank: int) -> dict[str, Any]:
    """A framework document's metadata for a Hit: the document's own metadata (also kept whole under
    ``doc_metadata``), then the hit's fields (HIT_FIELDS; they win over a document key of the same name)."""
    out = dict(hit.metadata)
    out["doc_metadata"] = dict(hit.metadata)
    span = hit.span
    out.update(id=hit.id, doc_id=hit.doc_id, doc_ids=list(hit.doc_ids), title=hit.title, kind=hit.kind,
               score=score_of(hit), rank_score=float(hit.score), parts={k: float(v) if isinstance(v, (int, float)) else v
                                              for k, v in hit.parts.items()},
               span=None if span is None else [int(span[0]), int(span[1])],
               start_char=None if span is None else int(span[0]),
               end_char=None if span is None else int(span[1]), rank=rank)
    if hit.explain is not None:
        out["explain"] = hit.explain
    return out
