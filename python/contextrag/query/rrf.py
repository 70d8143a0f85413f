"""Reciprocal Rank Fusion (Cormack et al., 2009): score(d) = Σ_lists w_i / (k + rank_i(d)), rank from 1.

Items missing from a list contribute nothing for it. Ties are broken by the best rank an item
reached in any list, then by first appearance, so the fused order is deterministic.
"""
from __future__ import annotations

from typing import Hashable, Sequence


def rrf(rankings: Sequence[Sequence[Hashable]], *, k: int = 60, weights: Sequence[float] | None = None
        ) -> list[tuple[Hashable, float]]:
    if isinstance(k, bool) or not isinstance(k, (int, float)) or k < 0:
        raise ValueError(f"k must be a number >= 0, got {k!r}")
    if isinstance(rankings, (str, bytes)):
        raise TypeError("rankings must be a list of ranked lists")
    rankings = [list(r) for r in rankings]
    if weights is None:
        weights = [1.0] * len(rankings)
    elif len(weights) != len(rankings):
        raise ValueError(f"weights has {len(weights)} entries for {len(rankings)} rankings")
    score: dict = {}
    best: dict = {}
    first: dict = {}
    pos = 0
    for r, w in zip(rankings, weights):
        seen = set()
        for rank, item in enumerate(r, start=1):
            if item in seen:          # a duplicate within one list counts once, at its best rank
                continue
            seen.add(item)
            score[item] = score.get(item, 0.0) + float(w) / (k + rank)
            best[item] = min(best.get(item, rank), rank)
            if item not in first:
                first[item] = pos
                pos += 1
    return sorted(score.items(), key=lambda t: (-t[1], best[t[0]], first[t[0]]))
