"""Hybrid score of eq. 13 over chunks and virtual items, with the doc_id filter and boosts.

score(c) = boost(c) · (w_bm25·bm25(q, c) + w_cos·cos(q, c) + w_fuzzy·fuzzy(q, c))

* bm25: bm25s, divided by its per-query maximum over the allowed items (query/bm25.py);
* cos: exact cosine with the stored embeddings (query/dense.py);
* fuzzy: eq. 14–16 routing (query/fuzzy.py), 0 without a concept graph;
* boost: ``boost_summary`` (×1.2) for cluster-summary virtual chunks, ``boost_bridge`` (×1.3) for
  bridge (join) nodes, ×1 otherwise (§4.5: multiplicative, no forced slots). A boost multiplies
  positive scores only, so it can never push a negative-cosine item further down;
* doc_id filter (§4.6): an item passes when every chunk whose text it shows comes from one of
  ``doc_ids`` (the index's ``item_mask``); the others get score −inf and are never returned.
  A term whose weight is 0 is not computed at all (BM25-only / dense-only systems).
* spreading (``Config.w_spread`` > 0, query/spread.py): before the boosts the eq. 13 score
  becomes r + w_spread·hop with r = eq. 13 / its per-query max; ``parts["spread"]`` is the hop.
  ``w_spread=0`` (``Config.paper()``) is the paper's flat eq. 13.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..index.segments import locate
from .bm25 import bm25_scores
from .dense import dense_scores
from .fuzzy import fuzzy_scores


@dataclass
class Hit:
    """One retrieved item: a chunk, or a virtual item (cluster summary, concept node).

    Attributes:
        id: The item id.
        doc_id: The chunk's document (None for a virtual item).
        kind: "chunk", "summary", "join" or "meet" (contextrag.index.core.ITEM_KINDS).
        text: The item's text.
        score: The rank score (eq. 13 with spreading and boosts); comparable within one query.
        parts: The score's terms: bm25, cos, fuzzy, boost, spread (and hybrid, rrf, rerank_rank
            after search).
        doc_ids: The documents whose text the item shows (several for a virtual item).
        title: The chunk's document title ("" for virtual items).
        metadata: The chunk's document metadata ({} for virtual items).
        span: ``(start, end)`` characters of a chunk inside its document.
        explain: Why the item came (query/explain.py), when asked for.
        relevance: Absolute relevance in [0, 1] (query/relevance.py), comparable across queries.
    """

    id: str
    doc_id: str | None
    kind: str
    text: str
    score: float
    parts: dict[str, Any] = field(default_factory=dict)   # {bm25, cos, fuzzy, boost, spread} (+ hybrid, rrf, rerank_rank)
    doc_ids: tuple[str, ...] = ()               # documents whose text the item shows (virtual items: several)
    title: str = ""                             # the chunk's document title ("" for virtual items)
    metadata: dict[str, Any] = field(default_factory=dict)   # the chunk's document metadata ({} for virtual items)
    span: tuple[int, int] | None = None         # [start, end) characters of a chunk inside its document
    explain: dict[str, Any] | None = None       # why the item came (query/explain.py), when asked for
    relevance: float | None = None              # absolute relevance in [0, 1] (query/relevance.py)

    def to_dict(self) -> dict[str, Any]:
        """The hit as JSON-ready values (the server's and the CLI's form)."""
        d = {"id": self.id, "doc_id": self.doc_id, "doc_ids": list(self.doc_ids), "kind": self.kind,
             "title": self.title, "text": self.text, "metadata": dict(self.metadata),
             "span": None if self.span is None else [int(x) for x in self.span],
             "score": float(self.score),
             "relevance": None if self.relevance is None else float(self.relevance), "parts": {k: (float(v) if isinstance(v, (int, float, np.floating)) else v)
                                                    for k, v in self.parts.items()}}
        if self.explain is not None:
            d["explain"] = self.explain
        return d


def boosts(view, cfg) -> np.ndarray:
    """(n,) boost per item, read-only: kept on the view per (boost_summary, boost_bridge), since
    comparing the n item kinds (Python strings) costs tens of ms per query at a million items."""
    key = (float(cfg.boost_summary), float(cfg.boost_bridge))
    cache: dict[tuple[float, float], np.ndarray] = view.__dict__.setdefault("_boosts", {})
    b = cache.get(key)
    if b is None or b.shape != (view.n,):
        b = np.ones(view.n, dtype=np.float32)
        b[view.kinds == "summary"] = cfg.boost_summary
        b[view.kinds == "join"] = cfg.boost_bridge
        b.flags.writeable = False
        cache[key] = b
    return b


def base_parts(view, question: str, qvec: np.ndarray, cfg, mask: np.ndarray | None = None) -> dict:
    """The eq. 13 parts of one query before spreading and boosts: {"bm25", "cos", "fuzzy", "base"}."""
    zeros = np.zeros(view.n, dtype=np.float32)
    bm = bm25_scores(view, question, mask) if cfg.w_bm25 != 0 else zeros
    cs = dense_scores(view, qvec)[0] if cfg.w_cos != 0 else zeros
    fz = fuzzy_scores(view, qvec, cfg.theta)[0] if cfg.w_fuzzy != 0 else zeros
    return {"bm25": bm, "cos": cs, "fuzzy": fz, "base": cfg.w_bm25 * bm + cfg.w_cos * cs + cfg.w_fuzzy * fz}


def score_all(view, question: str, qvec: np.ndarray, cfg, mask: np.ndarray | None = None,
              k: int | None = None) -> dict:
    """All parts and the total for one query, as (n,) arrays: {"bm25", "cos", "fuzzy", "boost", "spread",
    "score"} and "eq13" (the eq. 13 score before spreading and boosts). On a large index (or with
    ``Config.scoring = "candidates"``) cos and fuzzy are computed on candidates only, for a top ``k``
    (default ``Config.candidates``), and the others score −inf (query/candidates.py)."""
    from .candidates import score_candidates, use_candidates
    if use_candidates(view, cfg):
        return score_candidates(view, question, qvec, cfg, cfg.candidates if k is None else k, mask)
    p = base_parts(view, question, qvec, cfg, mask)
    base, hop = p["base"], np.zeros(view.n, dtype=np.float32)
    if cfg.w_spread:   # spreading over the lexical context (query/spread.py)
        from .spread import spread_view
        base, hop = spread_view(view, question, base, cfg, mask)
    return finish_parts(view, p, base, hop, cfg, mask)


def finish_parts(view, p: dict, base: np.ndarray, hop: np.ndarray, cfg, mask=None) -> dict:
    """Boosts and the doc filter on the (spread) base: the parts dict of :func:`score_all`."""
    bm, cs, fz = p["bm25"], p["cos"], p["fuzzy"]
    bo = boosts(view, cfg)
    total = np.where(base > 0, base * bo, base).astype(np.float32)
    if mask is not None:
        total = np.where(mask, total, -np.inf).astype(np.float32)
    # eq13: the score before spreading, what the seeds are picked from (query/explain.py)
    return {"bm25": bm, "cos": cs, "fuzzy": fz, "boost": bo, "spread": hop, "score": total, "eq13": p["base"]}


def top_of(parts: dict, k: int) -> np.ndarray:
    """:func:`top_indices` of ``parts["score"]``, among the scored candidates when there are any
    (query/candidates.py; the others are −inf)."""
    c = parts.get("candidates")
    if c is None:
        return top_indices(parts["score"], k)
    out: np.ndarray = c[top_indices(parts["score"][c], k)]
    return out


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best finite scores, best first (ties: lower index first)."""
    finite = np.isfinite(scores)
    m = int(finite.sum())
    k = min(k, m)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    s = np.where(finite, scores, -np.inf)
    if k < s.size:
        part = np.argpartition(-s, k - 1)[:k]
    else:
        part = np.arange(s.size)
    order = np.lexsort((part, -s[part]))
    return part[order][:k].astype(np.int64)


def _chunk_source(view, i: int):
    """(title, metadata, span) of item i from the index the view was built from ("", {}, None when
    the item is virtual or the view has no such index). The metadata is the document's, plus the
    chunk's page range or section when the document has pages or sections."""
    src = getattr(view, "source", None)
    ix = src() if callable(src) else None
    if ix is None or not hasattr(ix, "chunk_spans") or i >= len(ix.chunk_ids):
        return "", {}, None
    doc = getattr(ix, "docs", {}).get(ix.chunk_doc_ids[i]) or {}
    a, b = (int(x) for x in ix.chunk_spans[i])
    meta = dict(doc.get("metadata") or {})
    if doc.get("segments"):     # the chunk's page range / section (index/segments.py)
        meta.update(locate(doc["segments"], a, b))
    return str(ix.chunk_titles[i] or ""), meta, (a, b)


def make_hits(view, idx, parts: dict) -> list[Hit]:
    out = []
    for i in idx:
        i = int(i)
        title, meta, span = _chunk_source(view, i)
        out.append(Hit(id=view.ids[i], doc_id=view.doc_ids[i], doc_ids=tuple(view.item_docs[i]),
                       kind=str(view.kinds[i]), text=view.texts[i], title=title, metadata=meta, span=span,
                       score=float(parts["score"][i]),
                       parts={"bm25": float(parts["bm25"][i]), "cos": float(parts["cos"][i]),
                              "fuzzy": float(parts["fuzzy"][i]), "boost": float(parts["boost"][i]),
                              **({"spread": float(parts["spread"][i])} if "spread" in parts else {})}))
    return out


def hybrid_search(view, question: str, qvec: np.ndarray, cfg, k: int, mask=None) -> list[Hit]:
    parts = score_all(view, question, qvec, cfg, mask)
    return make_hits(view, top_indices(parts["score"], k), parts)
