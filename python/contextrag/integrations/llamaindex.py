"""contextrag as a LlamaIndex retriever (extra ``contextrag[llamaindex]``: llama-index-core).

    from contextrag.integrations.llamaindex import ContextRAGRetriever
    from llama_index.core.query_engine import RetrieverQueryEngine
    retriever = ContextRAGRetriever("idx", k=6, filters={"year": {"$gte": 2020}})
    engine = RetrieverQueryEngine.from_args(retriever, llm=my_llm)
    print(engine.query("Who founded the company that makes the X2?"))

``filters``: contextrag's metadata conditions (contextrag.query.filters) or LlamaIndex
``MetadataFilters`` (operators == != > >= < <= in nin; conditions and / or / not, nested).
Each ``NodeWithScore`` holds a ``TextNode`` (id = item id, text, ``start_char_idx``/``end_char_idx``
= the character span in the document, SOURCE relationship = the document,
``contextrag.integrations.hit_metadata`` as metadata, only the title shown to the LLM and embedder).
"""
from __future__ import annotations

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
    from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
except ImportError as e:   # pragma: no cover - exercised only without the extra
    raise ImportError("contextrag.integrations.llamaindex needs llama-index-core: "
                      "pip install 'contextrag[llamaindex]'") from e

from typing import Any, Callable, Iterable

from ..config import DEFAULT_K, check_k
from ..query.filters import matches
from . import IndexLike, hit_metadata, open_rag

#: contextrag's form of a filter: ``fn(doc_id, metadata) -> bool``.
Predicate = Callable[[str, dict[str, Any]], bool]

_OPS = {FilterOperator.EQ: "$eq", FilterOperator.NE: "$ne", FilterOperator.GT: "$gt", FilterOperator.GTE: "$gte",
        FilterOperator.LT: "$lt", FilterOperator.LTE: "$lte", FilterOperator.IN: "$in", FilterOperator.NIN: "$nin"}


def _predicate(f: MetadataFilter | MetadataFilters) -> Predicate:
    """A callable(doc_id, metadata) for LlamaIndex MetadataFilters / MetadataFilter."""
    if isinstance(f, MetadataFilter):
        op = _OPS.get(f.operator)
        if op is None:
            raise ValueError(f"filters: operator {f.operator.value!r} is not supported "
                             f"(supported: {[o.value for o in _OPS]})")
        value: Any = f.value
        if op in ("$in", "$nin"):      # a single value is the list of that value (a str is not split)
            value = list(value) if isinstance(value, list) else [value]
        cond = {f.key: {op: value}}
        return lambda d, m: matches(cond, d, m)
    subs = [_predicate(x) for x in f.filters]
    how = f.condition or FilterCondition.AND
    if how == FilterCondition.AND:
        return lambda d, m: all(p(d, m) for p in subs)
    if how == FilterCondition.OR:
        return lambda d, m: any(p(d, m) for p in subs)
    if how == FilterCondition.NOT:
        return lambda d, m: not all(p(d, m) for p in subs)
    raise ValueError(f"filters: condition {how!r} is not supported")


def to_filter(filters: dict[str, Any] | Predicate | MetadataFilters | MetadataFilter | None
              ) -> dict[str, Any] | Predicate | None:
    """contextrag's filter for ``filters`` (None, a contextrag filter, or LlamaIndex MetadataFilters)."""
    if filters is None or isinstance(filters, dict) or callable(filters) and not isinstance(filters, MetadataFilters):
        return filters
    if isinstance(filters, (MetadataFilters, MetadataFilter)):
        return _predicate(filters)
    raise TypeError(f"filters must be a dict, a callable or LlamaIndex MetadataFilters, got {type(filters).__name__}")


class ContextRAGRetriever(BaseRetriever):
    """A LlamaIndex retriever over a contextrag index (a ContextRAG or an index directory).

    ``retrieve(query)`` returns one ``NodeWithScore`` per hit, best first, its score the hit's
    absolute relevance in [0, 1].

    Args:
        index: A ContextRAG, or an index directory (loaded here).
        k: Hits per query, >= 1.
        doc_ids: Only items drawn from these documents (one id or several).
        filters: contextrag's metadata conditions (contextrag.query.filters), a callable
            ``fn(doc_id, metadata) -> bool``, or LlamaIndex ``MetadataFilters``.
        explain: Put why each item came into its metadata (``explain``).
        overrides: Config query fields (w_bm25, w_spread, ...) for contextrag's retrieve.
        callback_manager: LlamaIndex's callback manager.
        verbose: LlamaIndex's verbose flag.
    """

    def __init__(self, index: IndexLike, *, k: int = DEFAULT_K, doc_ids: str | Iterable[str] | None = None,
                 filters: dict[str, Any] | Predicate | MetadataFilters | MetadataFilter | None = None,
                 explain: bool = False, overrides: dict[str, Any] | None = None, callback_manager: Any = None,
                 verbose: bool = False) -> None:
        self.rag = open_rag(index)
        self.k = check_k(k)
        self.doc_ids = None if doc_ids is None else ([doc_ids] if isinstance(doc_ids, str) else list(doc_ids))
        self.filter = to_filter(filters)
        self.explain = bool(explain)
        self.overrides = dict(overrides or {})
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.rag.retrieve(query_bundle.query_str, k=self.k, doc_ids=self.doc_ids, filter=self.filter,
                                 explain=self.explain, **self.overrides)
        out = []
        for r, h in enumerate(hits, 1):
            meta = hit_metadata(h, r)
            shown = {"title"} if h.title else set()
            node = TextNode(id_=h.id, text=h.text, metadata=meta,
                            start_char_idx=meta["start_char"], end_char_idx=meta["end_char"],
                            excluded_llm_metadata_keys=[m for m in meta if m not in shown],
                            excluded_embed_metadata_keys=[m for m in meta if m not in shown])
            if h.doc_id is not None:
                node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=h.doc_id)
            out.append(NodeWithScore(node=node, score=meta["score"]))   # the absolute relevance
        return out
