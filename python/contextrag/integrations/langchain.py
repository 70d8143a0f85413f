"""contextrag as a LangChain retriever (extra ``contextrag[langchain]``: langchain-core).

    from contextrag.integrations.langchain import ContextRAGRetriever
    retriever = ContextRAGRetriever(index="idx", k=6, filter={"year": {"$gte": 2020}})
    docs = retriever.invoke("Who founded the company that makes the X2?")
    docs = retriever.invoke("...", k=3, doc_ids=["doc-7"])      # per-call k / doc_ids / filter
    retriever = ContextRAGRetriever(index="idx", search_kwargs={"k": 2})   # LangChain's convention

``search_kwargs`` (as ``VectorStore.as_retriever`` takes it) sets the same fields: ``k``, ``filter``,
``doc_ids``, ``explain``, ``overrides``; any other key, or a value that contradicts the field given
beside it, is a ValueError.

Each ``Document`` has the item text as ``page_content``, the item id as ``id`` and
``contextrag.integrations.hit_metadata`` as ``metadata`` (score: the absolute relevance in [0, 1], so a
score threshold means the same for every question; rank_score, doc_id, title, kind, span, parts, ...).
"""
from __future__ import annotations

from typing import Any, Callable

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:   # pragma: no cover - exercised only without the extra
    raise ImportError("contextrag.integrations.langchain needs langchain-core: "
                      "pip install 'contextrag[langchain]'") from e
from pydantic import ConfigDict, model_validator

from ..config import DEFAULT_K, check_k
from . import hit_metadata, open_rag

_CALL_KEYS = ("k", "doc_ids", "filter", "explain", "overrides")


class ContextRAGRetriever(BaseRetriever):
    """A LangChain retriever over a contextrag index (a ContextRAG or an index directory as ``index``).

    ``invoke(query, **kwargs)`` returns one ``Document`` per hit, best first; ``kwargs`` may set
    ``k``, ``doc_ids``, ``filter``, ``explain`` and ``overrides`` for that call.

    Attributes:
        index: A ContextRAG, or an index directory (loaded when the retriever is made).
        k: Hits per query, >= 1.
        doc_ids: Only items drawn from these documents.
        filter: Metadata conditions (contextrag.query.filters) or ``fn(doc_id, metadata) -> bool``.
        explain: Put why each item came into its metadata (``explain``).
        overrides: Config query fields (w_bm25, w_spread, ...) for contextrag's retrieve.
        search_kwargs: LangChain's name for the same fields (k, filter, ...): merged into them.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Any
    k: int = DEFAULT_K
    doc_ids: list[str] | None = None
    filter: dict | Callable | None = None
    explain: bool = False
    overrides: dict = {}   # Config query fields (w_bm25, w_spread, ...) for contextrag's retrieve
    search_kwargs: dict = {}   # LangChain's name for the same fields (k, filter, ...): merged into them

    @model_validator(mode="before")
    @classmethod
    def _open(cls, values: Any) -> Any:
        if isinstance(values, dict) and "index" in values:
            values = dict(values)
            values["index"] = open_rag(values["index"])
        if isinstance(values, dict) and values.get("search_kwargs") is not None:
            values = dict(values)
            sk = values["search_kwargs"]
            if not isinstance(sk, dict):
                raise ValueError(f"search_kwargs must be a dict, got {type(sk).__name__}")
            bad = sorted(set(sk) - set(_CALL_KEYS))
            if bad:
                raise ValueError(f"search_kwargs: unknown key(s) {bad}; contextrag's retriever takes "
                                 f"{list(_CALL_KEYS)}")
            for key, v in sk.items():
                if key in values and values[key] != v:
                    raise ValueError(f"search_kwargs[{key!r}] = {v!r} contradicts {key}={values[key]!r}; "
                                     "give one of them")
                values[key] = v
        return values

    @model_validator(mode="after")
    def _valid(self) -> ContextRAGRetriever:
        check_k(self.k)
        return self

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        bad = sorted(set(kwargs) - set(_CALL_KEYS))
        if bad:
            raise TypeError(f"unknown retriever argument(s) {bad}; allowed: {list(_CALL_KEYS)}")
        k = check_k(kwargs.get("k", self.k))
        hits = self.index.retrieve(query, k=k, doc_ids=kwargs.get("doc_ids", self.doc_ids),
                                   filter=kwargs.get("filter", self.filter),
                                   explain=kwargs.get("explain", self.explain),
                                   **{**self.overrides, **kwargs.get("overrides", {})})
        return [Document(page_content=h.text, metadata=hit_metadata(h, r), id=h.id)
                for r, h in enumerate(hits, 1)]
