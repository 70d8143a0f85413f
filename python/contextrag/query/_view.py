"""What the query stage reads from an index, gathered once per index object (and rebuilt when
the index changes).

``CorpusView`` holds, for the N retrievable items (chunks first, then virtual items: cluster
summaries, join/bridge nodes, meet nodes):

* ``ids``, ``texts``, ``kinds`` (array of "chunk" | "summary" | "join" | "meet"), ``doc_ids`` (the
  item's document; None for a virtual item) and ``item_docs`` (tuple of the documents whose text the
  item shows: its own for a chunk, its source chunks' documents for a virtual item);
* ``E``: (N, d) float32 unit-norm embeddings (cosine = dot product);
* ``embed(list[str]) -> (Q, d)`` query embeddings and ``bm25_raw(question) -> (N,)`` raw BM25;
* ``mask_fn(doc_ids) -> (N,) bool``: the §4.6 doc_id filter (the index's own ``item_mask``: an item
  passes when all chunks whose text it shows come from the requested documents);
* ``router``: a :class:`~contextrag.query.fuzzy.Router` for eq. 14–16, or None without a concept graph.

Built from a ``contextrag.index.core.Index`` (fields: item_ids, item_kinds, item_texts, item_node,
item_members, embeddings, bm25_scores(), item_mask(), embedder, attr_centroids, context, graph,
node_extents()); a ``ContextRAG`` is unwrapped through its ``.index``.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable

import numpy as np
from ._once import build_once, drop_elsewhere

KINDS = ("chunk", "summary", "join", "meet")
_KIND_ALIASES = {"bridge": "join", "cluster_summary": "summary"}


def norm_kind(k) -> str:
    if isinstance(k, (int, np.integer)):
        if not 0 <= int(k) < len(KINDS):
            raise ValueError(f"item kind code must be in [0, {len(KINDS)}), got {k}")
        return KINDS[int(k)]
    k = _KIND_ALIASES.get(str(k).lower(), str(k).lower())
    if k not in KINDS:
        raise ValueError(f"item kind must be one of {KINDS} (or 'bridge'), got {k!r}")
    return k


def norm_kinds(kinds) -> np.ndarray:
    """:func:`norm_kind` of every entry as an object array; integer codes (the stored form) in one
    vectorised lookup."""
    if isinstance(kinds, np.ndarray) and np.issubdtype(kinds.dtype, np.integer):
        bad = (kinds < 0) | (kinds >= len(KINDS))
        if bad.any():
            norm_kind(kinds[bad][0])       # raises with the offending code
        return np.asarray(KINDS, dtype=object)[kinds]
    vals = list(kinds)
    if all(type(k) is str for k in vals) and set(vals) <= set(KINDS):    # already normal
        return np.asarray(vals, dtype=object)
    return np.asarray([norm_kind(k) for k in vals], dtype=object)


@dataclass
class CorpusView:
    ids: list
    texts: list
    kinds: np.ndarray
    doc_ids: list
    E: np.ndarray
    embed: Callable
    bm25_raw: Callable
    mask_fn: Callable | None = None
    router: object = None
    item_docs: list | None = None
    source: object = None      # weakref to the index the view was built from (query/spread.py reads its chunks)

    def __post_init__(self):
        n = len(self.ids)
        self.kinds = norm_kinds(self.kinds)
        self.E = np.ascontiguousarray(self.E, dtype=np.float32)
        if self.E.ndim != 2 or self.E.shape[0] != n:
            raise ValueError(f"embeddings must be (n_items={n}, d), got {self.E.shape}")
        if self.item_docs is None:
            self.item_docs = [(d,) if d is not None else () for d in self.doc_ids]
        for name in ("texts", "kinds", "doc_ids", "item_docs"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries, expected n_items={n}")

    @property
    def n(self) -> int:
        return len(self.ids)

    def doc_mask(self, doc_ids) -> np.ndarray | None:
        """Boolean (N,) mask of the items a doc_id filter allows (None: no filter)."""
        if doc_ids is None:
            return None
        if callable(getattr(doc_ids, "item_mask_for", None)):   # a page/section filter (query/filters.py)
            src = self.source() if callable(self.source) else None
            m = np.asarray(doc_ids.item_mask_for(src), dtype=bool)
            if m.shape != (self.n,):
                raise ValueError(f"chunk selection mask has shape {m.shape}, expected ({self.n},)")
            return m
        if isinstance(doc_ids, bytes) or not isinstance(doc_ids, str) and not hasattr(doc_ids, "__iter__"):
            raise TypeError(f"doc_ids must be a str or an iterable of str, got {type(doc_ids).__name__}")
        wanted = {doc_ids} if isinstance(doc_ids, str) else {str(d) for d in doc_ids}
        if self.mask_fn is not None:
            m = np.asarray(self.mask_fn(sorted(wanted)), dtype=bool)
        else:
            m = np.fromiter((bool(ds) and set(map(str, ds)) <= wanted for ds in self.item_docs), bool, self.n)
        if m.shape != (self.n,):
            raise ValueError(f"doc_id mask has shape {m.shape}, expected ({self.n},)")
        return m


# ---------------------------------------------------------------- bm25 fallback (no bm25 in the index)
class _OwnBM25:
    """bm25s over the item texts, for index objects that carry none. ``stemmer``: a Snowball language
    (the index's ``Config.stemmer``): texts and question are then read as stems, as the index's BM25
    reads them."""

    def __init__(self, texts, stemmer: str | None = None):
        import bm25s

        from ..index.lexical.tokens import bm25_tokenize

        self.n, self.stemmer = len(texts), stemmer
        self.r = bm25s.BM25()
        self.r.index(bm25_tokenize(list(texts), stemmer=stemmer), show_progress=False)

    def __call__(self, question: str) -> np.ndarray:
        from ..index.lexical.tokens import query_tokens

        toks = query_tokens(question, self.stemmer)
        vocab = self.r.vocab_dict
        toks = [t for t in toks if t in vocab]
        if not toks:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self.r.get_scores(toks), dtype=np.float32)


# ---------------------------------------------------------------- from an index object
_CACHE: dict = {}   # id(index) -> (weakref to it, signature, view); index dataclasses are unhashable
_LOCK = threading.Lock()


def _unwrap(index):
    if index is None:
        raise TypeError("index must be a contextrag Index (or ContextRAG), got None")
    if isinstance(index, CorpusView):
        return index
    if not hasattr(index, "item_ids"):
        inner = getattr(index, "index", None)
        if inner is not None and hasattr(inner, "item_ids"):
            return inner
        raise TypeError(f"index must be a contextrag Index or ContextRAG (with item_ids, embeddings, ...), "
                        f"got {type(index).__name__}")
    return index


def _signature(ix) -> tuple:
    ext = ix.node_extents() if hasattr(ix, "node_extents") and getattr(ix, "graph", None) is not None else None
    return (len(ix.item_ids), id(ix.embeddings), id(ext), id(getattr(ix, "bm25", None)))


def view_of(index) -> CorpusView:
    """The CorpusView of an index (cached per index object until the index changes)."""
    ix = _unwrap(index)
    if isinstance(ix, CorpusView):
        return ix
    sig = _signature(ix)
    key = id(ix)

    def lookup():
        with _LOCK:
            hit = _CACHE.get(key)
            return hit[2] if hit is not None and hit[0]() is ix and hit[1] == sig else None

    def build():
        v = _build_view(ix)
        with _LOCK:
            stale = [_CACHE.pop(k) for k in [k for k, e in _CACHE.items() if e[0]() is None or k == key]]
            _CACHE[key] = (weakref.ref(ix), sig, v)
        drop_elsewhere(stale)
        return v
    return build_once(("view", key, sig), lookup, build)


def _build_view(ix) -> CorpusView:
    from .fuzzy import Router

    n_chunks = len(ix.chunk_ids)
    ids = list(map(str, ix.item_ids))
    kinds = np.asarray(ix.item_kinds)             # (CorpusView normalises them, once)
    doc_ids = list(ix.chunk_doc_ids) + [None] * (len(ids) - n_chunks)
    src = getattr(ix, "item_sources", None)
    if src is None:
        src = getattr(ix, "item_members", None)
    virtual = []
    for i in range(n_chunks, len(ids)):
        cols = src[i].indices if src is not None else []
        virtual.append(tuple(sorted({str(ix.chunk_doc_ids[c]) for c in cols})))
    item_docs = _ItemDocs(doc_ids, n_chunks, virtual)
    E = np.asarray(ix.embeddings, dtype=np.float32)
    embedder = getattr(ix, "embedder", None)
    embed = getattr(ix, "embed_queries", None) or getattr(embedder, "embed_queries", None)
    if embed is None:
        raise TypeError("index must have an embedder with embed_queries(list[str])")
    bm25 = getattr(ix, "bm25_scores", None)
    if not callable(bm25):
        bm25 = _OwnBM25(list(ix.item_texts))
    router = Router.from_index(ix) if getattr(ix, "graph", None) is not None else None
    texts = ix.item_texts
    if type(texts).__name__ != "LazyStrings":     # a stored index's texts stay undecoded (index/columns.py)
        texts = list(texts)
    return CorpusView(ids=ids, texts=texts, kinds=kinds,
                      doc_ids=doc_ids, E=E, embed=_weakly(embed, ix), bm25_raw=_weakly(bm25, ix),
                      mask_fn=_weakly(getattr(ix, "item_mask", None), ix), router=router, source=weakref.ref(ix),
                      item_docs=item_docs)


class _ItemDocs(Sequence):
    """Each item's documents: (its document,) for a chunk, made when asked for rather than a tuple
    per chunk for every new index a query sees; the sources' for a virtual item."""

    __slots__ = ("_docs", "_n", "_virtual")

    def __init__(self, doc_ids: list, n_chunks: int, virtual: list):
        self._docs, self._n, self._virtual = doc_ids, n_chunks, virtual

    def __len__(self) -> int:
        return self._n + len(self._virtual)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        j = int(i)
        if j < 0:
            j += len(self)
        if not 0 <= j < len(self):
            raise IndexError("item index out of range")
        return (self._docs[j],) if j < self._n else self._virtual[j - self._n]


def _weakly(fn, ix):
    """``fn``, holding ``ix`` weakly when it is one of ix's bound methods: the cache above maps the
    index to its view, so a view that held its index strongly would keep every index ever queried alive
    (each load, each write's new copy)."""
    if getattr(fn, "__self__", None) is not ix:
        return fn
    ref = weakref.WeakMethod(fn)

    def call(*args, **kwargs):
        method = ref()
        if method is None:
            raise ReferenceError("the index this query view was made for no longer exists")
        return method(*args, **kwargs)
    return call
