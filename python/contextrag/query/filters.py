"""Metadata filters, mapped onto the doc_id filter (§4.6) so every retrieval path honours them.

A filter is a dict ``{key: condition}`` over a document's metadata (all keys must match) or a callable
``f(doc_id, metadata) -> bool``. A condition is a value (equality), a list/tuple/set (any of), or a
dict with one or more of the operators vector stores commonly use: ``$eq $ne $in $nin $gt $gte $lt
$lte``. A document without the key matches only ``$ne`` and ``$nin``. The documents that pass become
a doc_id set (intersected with ``doc_ids`` when both are given), so an item passes exactly when its
source chunks all come from passing documents.
"""
from __future__ import annotations

import operator

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


def doc_ids_for(index, doc_ids=None, filter=None):
    """The doc_id filter that ``doc_ids`` and a metadata ``filter`` describe together (None: no filter).

    ``index``: an Index or ContextRAG (its ``docs``: doc_id -> {"title", "metadata"})."""
    if filter is None or (isinstance(filter, dict) and not filter):
        return doc_ids
    _check(filter)
    ix = getattr(index, "index", index)
    docs = getattr(ix, "docs", None)
    if not isinstance(docs, dict):
        raise TypeError("filter needs an index with document metadata (a contextrag Index or ContextRAG)")
    keep = [d for d, info in docs.items() if matches(filter, d, dict((info or {}).get("metadata") or {}))]
    if doc_ids is not None:
        if isinstance(doc_ids, bytes) or not isinstance(doc_ids, str) and not hasattr(doc_ids, "__iter__"):
            raise TypeError(f"doc_ids must be a str or an iterable of str, got {type(doc_ids).__name__}")
        wanted = {doc_ids} if isinstance(doc_ids, str) else {str(d) for d in doc_ids}
        keep = [d for d in keep if d in wanted]
    return keep
