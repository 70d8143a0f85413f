"""Metadata filters, mapped onto the doc_id filter (§4.6) so every retrieval path honours them.

A filter is a dict ``{key: condition}`` over a document's metadata (all keys must match) or a callable
``f(doc_id, metadata) -> bool``. A condition is a value (equality), a list/tuple/set (any of), or a
dict with one or more of the operators vector stores commonly use: ``$eq $ne $in $nin $gt $gte $lt
$lte`` (``{"year": {"$gte": 2020, "$lt": 2024}}`` is a range). A document without the key matches
only ``$ne`` and ``$nin``. ``title`` is the document's title unless its metadata has a ``title`` of
its own. The documents that pass become a doc_id set (intersected with ``doc_ids`` when both are
given), so an item passes exactly when its source chunks all come from passing documents.

``page``, ``page_end``, ``section`` and ``sections`` describe where a chunk sits in its document
(contextrag.index.segments) rather than the document: a dict filter naming one of them, on an index
whose documents have pages or sections, is tested per chunk (the document's metadata plus the chunk's
location) and becomes a :class:`ChunkSelection`, which the query stage turns into the same item mask
(an item passes when all its source chunks pass). A chunk covers a range of pages and may touch
several sections: ``page`` matches when some page from ``page`` to ``page_end`` satisfies the
condition (``{"page": 2}`` passes a chunk on pages 1-3), ``section`` when some section the chunk
touches does (``{"section": "Background"}`` passes a chunk that begins in "Introduction"); the
negative operators ``$ne``/``$nin`` must hold for every page or section. Either way the filter only
masks items: no score is computed for the excluded ones beyond what the unfiltered query computes.

A dict filter's keys must be keys the index knows (``title``, a key of some document's metadata, a
location key when some document has pages or sections): any other key, a misspelt one or a
top-level operator such as ``$or``, is a ValueError listing the known keys, never a silent empty
result.
"""
from __future__ import annotations

import operator

import numpy as np

from ..index.segments import LOCATION_KEYS, locate

_OPS = {"$eq": operator.eq, "$ne": operator.ne, "$gt": operator.gt, "$gte": operator.ge,
        "$lt": operator.lt, "$lte": operator.le,
        "$in": lambda v, c: v in c, "$nin": lambda v, c: v not in c}
_MISSING_OK = {"$ne", "$nin"}


def _check(filter_) -> None:
    if callable(filter_):
        return
    if not isinstance(filter_, dict):
        raise TypeError(f"filter must be a dict of metadata conditions or a callable(doc_id, metadata), "
                        f"got {type(filter_).__name__}")
    for key, cond in filter_.items():
        if not isinstance(key, str):
            raise TypeError(f"filter keys must be str metadata keys, got {key!r}")
        if isinstance(cond, dict):
            bad = sorted(set(cond) - set(_OPS))
            if bad or not cond:
                raise ValueError(f"filter[{key!r}]: operators must be among {sorted(_OPS)}, got {sorted(cond)}")
            for op in ("$in", "$nin"):
                if op in cond and not isinstance(cond[op], (list, tuple, set, frozenset)):
                    raise TypeError(f"filter[{key!r}][{op!r}] must be a list, got {type(cond[op]).__name__}")


def parse_filter(text: str, what: str = "filter"):
    """A filter from its JSON text (the CLI's --filter), checked; ValueError naming ``what``."""
    import json
    try:
        f = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        raise ValueError(f"{what} is not valid JSON ({e})") from None
    if not isinstance(f, dict):
        raise ValueError(f"{what} must be a JSON object of metadata conditions, e.g. "
                         '{"year": {"$gte": 2020}}, got a JSON ' + type(f).__name__)
    _check(f)
    return f


def _match_one(meta: dict, key: str, cond) -> bool:
    if isinstance(cond, dict):
        if key not in meta:
            return all(op in _MISSING_OK for op in cond)
        v = meta[key]
        try:
            return all(_OPS[op](v, c) for op, c in cond.items())
        except TypeError:        # an ordering between incomparable types: no match
            return False
    if key not in meta:
        return False
    if isinstance(cond, (list, tuple, set, frozenset)):
        return meta[key] in cond
    return meta[key] == cond


def matches(filter_, doc_id: str, metadata: dict) -> bool:
    """Whether one document passes ``filter_``."""
    if callable(filter_):
        return bool(filter_(doc_id, metadata))
    return all(_match_one(metadata, k, c) for k, c in filter_.items())


_POSITIVE = ("$eq", "$gt", "$gte", "$lt", "$lte", "$in")


def _match_many(values: list, cond) -> bool:
    """``cond`` against a chunk's several pages or sections: some value satisfies its positive part,
    every value its negative part (``$ne``, ``$nin``)."""
    if not isinstance(cond, dict):
        cond = {"$in": list(cond)} if isinstance(cond, (list, tuple, set, frozenset)) else {"$eq": cond}
    pos = {op: c for op, c in cond.items() if op in _POSITIVE}
    neg = {op: c for op, c in cond.items() if op not in _POSITIVE}
    if not values:
        return not pos
    if pos and not any(_match_one({"v": v}, "v", pos) for v in values):
        return False
    return all(_match_one({"v": v}, "v", neg) for v in values) if neg else True


def _match_located(filter_: dict, meta: dict, loc: dict) -> bool:
    """A dict filter against a document's metadata plus one chunk's location."""
    for key, cond in filter_.items():
        if key == "page" and "page" in loc:
            a, b = loc["page"], loc.get("page_end", loc["page"])
            pages = list(range(a, b + 1)) if isinstance(a, int) and isinstance(b, int) and 0 <= b - a < 100_000 \
                else [a, b]
            ok = _match_many(pages, cond)
        elif key == "section" and "sections" in loc:
            ok = _match_many(loc["sections"], cond)
        elif key == "sections" and "sections" in loc:
            ok = _match_many(loc["sections"], cond)
        else:
            ok = _match_one({**meta, **loc}, key, cond)
        if not ok:
            return False
    return True


def _check_keys(ix, filter_: dict) -> None:
    """ValueError when ``filter_`` names a key the index does not know (see the module docstring)."""
    wanted = set(filter_) - {"title"}
    docs = ix.docs
    seen: set = {"title"}
    for info in docs.values():
        info = info or {}
        seen.update(info.get("metadata") or {})
        for key in info.get("segments") or {}:
            seen.update((key, f"{key}s", f"{key}_end") if key == "page" else (key, f"{key}s"))
        if wanted <= seen:
            return
    unknown = sorted(wanted - seen)
    if not docs:
        return                          # an empty index knows no key; nothing can match anyway
    hint = " (top-level operators are not supported: give {key: {\"$op\": value}} conditions, all ANDed)" \
        if any(k.startswith("$") for k in unknown) else ""
    raise ValueError(f"filter: unknown key(s) {unknown}{hint}; this index's documents have the keys "
                     f"{sorted(seen)}")


def _doc_meta(info) -> dict:
    info = info or {}
    return {"title": info.get("title") or "", **(info.get("metadata") or {})}


class ChunkSelection:
    """The chunks a location filter (page/section) lets through, over one index's chunk order.

    Passed as ``doc_ids`` to the query functions; ``CorpusView.doc_mask`` asks it for the item mask.
    Iterating it gives the documents that have at least one passing chunk."""

    def __init__(self, chunks: np.ndarray, doc_ids: list[str]):
        self.chunks = np.asarray(chunks, dtype=bool)
        self.doc_ids = list(doc_ids)

    def __iter__(self):
        return iter(self.doc_ids)

    def __len__(self):
        return len(self.doc_ids)

    def item_mask_for(self, ix) -> np.ndarray:
        """(N,) bool over ``ix``'s items: those whose source chunks all pass."""
        if ix is None or len(self.chunks) != len(ix.chunk_ids):
            raise ValueError("this chunk selection was made on another index (its chunk count differs); "
                             "make the filter again on the index being queried")
        src = ix.item_sources
        bad = src @ (~self.chunks).astype(np.int32)
        return (np.asarray(bad).ravel() == 0) & (np.diff(src.indptr) > 0)


def _chunk_selection(ix, filter_, wanted) -> ChunkSelection:
    docs = ix.docs
    n = len(ix.chunk_ids)
    keep = np.zeros(n, dtype=bool)
    verdict: dict = {}           # documents without segments: one test per document
    for c in range(n):
        d = ix.chunk_doc_ids[c]
        if wanted is not None and d not in wanted:
            continue
        info = docs.get(d) or {}
        segs = info.get("segments")
        if not segs:
            if d not in verdict:
                verdict[d] = matches(filter_, d, _doc_meta(info))
            keep[c] = verdict[d]
            continue
        a, b = (int(x) for x in ix.chunk_spans[c])
        keep[c] = _match_located(filter_, _doc_meta(info), locate(segs, a, b))
    passing = list(dict.fromkeys(ix.chunk_doc_ids[c] for c in np.flatnonzero(keep)))
    return ChunkSelection(keep, passing)


def _wanted(doc_ids):
    if doc_ids is None:
        return None
    if isinstance(doc_ids, bytes) or not isinstance(doc_ids, str) and not hasattr(doc_ids, "__iter__"):
        raise TypeError(f"doc_ids must be a str or an iterable of str, got {type(doc_ids).__name__}")
    return {doc_ids} if isinstance(doc_ids, str) else {str(d) for d in doc_ids}


def doc_ids_for(index, doc_ids=None, filter=None):
    """The doc_id filter that ``doc_ids`` and a metadata ``filter`` describe together (None: no filter):
    a list of doc ids, or a :class:`ChunkSelection` for a page/section filter (see the module docstring).

    ``index``: an Index or ContextRAG (its ``docs``: doc_id -> {"title", "metadata"[, "segments"]})."""
    if filter is None or (isinstance(filter, dict) and not filter):
        return doc_ids
    _check(filter)
    ix = getattr(index, "index", index)
    docs = getattr(ix, "docs", None)
    if not isinstance(docs, dict):
        raise TypeError("filter needs an index with document metadata (a contextrag Index or ContextRAG)")
    wanted = _wanted(doc_ids)
    if isinstance(filter, dict):
        _check_keys(ix, filter)
    if isinstance(filter, dict) and LOCATION_KEYS & set(filter) and hasattr(ix, "chunk_spans") \
            and any((info or {}).get("segments") for info in docs.values()):
        return _chunk_selection(ix, filter, wanted)
    # a callable gets the metadata as stored (as it always has); a dict also sees the title
    meta_of = (lambda info: dict((info or {}).get("metadata") or {})) if callable(filter) else _doc_meta
    keep = [d for d, info in docs.items() if matches(filter, d, meta_of(info))]
    if wanted is not None:
        keep = [d for d in keep if d in wanted]
    return keep
