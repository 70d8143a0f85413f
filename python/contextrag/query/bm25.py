"""BM25 term of eq. 13: the index's BM25 (bm25s's Lucene scores, computed at query time from stored
counts: index/bm25_index.CountBM25).

Normalisation: raw BM25 scores are unbounded and their scale changes with the query (number and
rarity of its terms), while cosine and the fuzzy score live in [0, 1]. We divide the raw scores by
their **maximum over the items allowed for this query** (after the doc_id filter), so the best
lexical match gets 1, every other item its fraction of it, and a query with no matching term gets 0
everywhere. Min-max would give the same ranking but lift the weakest match to 0 only by shifting
every item; BM25 is already ≥ 0 so dividing by the max keeps "no match" at exactly 0.
"""
from __future__ import annotations

import numpy as np


def normalise_max(raw: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """raw / max(raw[mask]); zeros when that maximum is ≤ 0. Items outside the mask get 0."""
    raw = np.asarray(raw, dtype=np.float32)
    if raw.ndim != 1:
        raise ValueError(f"raw must be 1-D, got shape {raw.shape}")
    if mask is not None:
        raw = np.where(mask, raw, 0.0).astype(np.float32)
    m = float(raw.max()) if raw.size else 0.0
    if not np.isfinite(m) or m <= 0.0:
        return np.zeros_like(raw)
    return raw / m


def bm25_scores(view, question: str, mask: np.ndarray | None = None) -> np.ndarray:
    """(n,) BM25 scores in [0, 1], normalised by the per-query maximum (see module doc)."""
    raw = np.asarray(view.bm25_raw(question), dtype=np.float32)
    if raw.shape != (view.n,):
        raise ValueError(f"bm25 returned shape {raw.shape}, expected ({view.n},)")
    return normalise_max(raw, mask)
