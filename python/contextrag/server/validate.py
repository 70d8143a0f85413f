"""Checks at the door of the HTTP API: what the library would take but the server must not store or
pass on (non-finite numbers, which JSON cannot carry back out; top-level filter operators the filter
syntax does not have; query weights far outside any sane range)."""
from __future__ import annotations

from fastapi import HTTPException

from ..index import chunking

MAX_WEIGHT = 1e6      # a query weight (w_*) beyond this is a typo, and near float max it overflows the scores


def check_finite(value, where: str) -> None:
    """400 naming the field (``where.key[0]``) when ``value`` holds NaN or ±Infinity
    (``contextrag.index.chunking.check_finite``)."""
    try:
        chunking.check_finite(value, where, dotted=True)
    except ValueError as e:
        raise HTTPException(400, str(e)) from None


def check_filter(flt) -> None:
    """Top-level keys of a metadata filter are metadata keys; '$or', '$where', ... there would be read
    as a key no document has and silently match nothing."""
    if not flt:
        return
    ops = [k for k in flt if isinstance(k, str) and k.startswith("$")]
    if ops:
        raise HTTPException(400, f"filter: top-level operators are not supported ({', '.join(ops)}); a filter "
                                 "maps metadata keys to a value, a list, or {$eq|$ne|$in|$nin|$gt|$gte|$lt|$lte: ...}")
    check_finite(flt, "filter")


def check_overrides(overrides: dict) -> None:
    """Query overrides: finite numbers; weights (w_*) in [0, MAX_WEIGHT]."""
    for k, v in overrides.items():
        check_finite(v, f"overrides.{k}")
        if k.startswith("w_") and isinstance(v, (int, float)) and not isinstance(v, bool) \
                and not 0 <= v <= MAX_WEIGHT:
            raise HTTPException(400, f"overrides.{k}: a weight must be in [0, {MAX_WEIGHT:g}], got {v!r}")
