"""Candidate generation: eq. 13's dense and routing parts on a subset of the items, for large indexes.

Scoring every item reads the whole index per query (the cosine 1 GB and the routing extents 0.5 GB at
a million chunks): bandwidth, not arithmetic. Above ``CANDIDATE_MIN_ITEMS`` items (or when
``Config.scoring = "candidates"``) a query computes the cosine and the routing term only for

* the chunks of the **RQ cells** nearest the query: a cell is one code per RQ level, its centroid the
  sum of the levels' codewords (what the residual quantiser reconstructs), its score the query's inner
  product with it; cells are taken best first until they hold ``budget(n, k)`` chunks
  (k · ⌈√n⌉ for a top k: √n is the usual inverted-file probe size, growing with the index, and the
  k factor keeps that depth for each of the k hits);
* the ``budget`` best chunks by **BM25** (exact over every item: the postings of the question's terms);
* the own pages of the entities the question names (the spreading's entity seeds);
* every virtual item (few; they have no RQ codes).

BM25 stays exact for every item. The other items keep their BM25 part as their provisional base, so
the spreading (query/spread.py, exact over the graph) starts from the same seeds whenever those are
candidates; an item that spreading raises but was no candidate gets its cosine and routing computed
afterwards and its relevance redone: those that could still reach the candidates' k-th score (a
relevance is at most 1, so a score at most boost · (1 + w_spread · hop)), the ``budget`` best of them by
provisional score. Only items whose parts were computed are ranked. Below the threshold the query
scores every item, so hits there are exactly the exhaustive ones (tested).

The inverted file is the sort of the chunks by cell, derived from the stored RQ codes when a view
first needs it (one argsort of n cell ids, a fraction of a second at a million chunks); an index
without codes for every chunk scores exhaustively.
"""
from __future__ import annotations

import math

import numpy as np

from ._select import in_sorted
from .dense import cosines

CANDIDATE_MIN_ITEMS = 100_000     # below: scoring every item costs tens of ms per query at most


def budget(n: int, k: int) -> int:
    """Candidates per source (RQ cells, BM25, raised by spreading): k · ⌈√n⌉."""
    return max(int(k), 1) * max(1, math.isqrt(max(n - 1, 0)) + 1)


class InvertedFile:
    """Chunks grouped by RQ cell (one code per level): ``order[offsets[c]:offsets[c + 1]]`` are the
    chunks of cell c, whose centroid is the sum of the levels' codewords."""

    def __init__(self, codes: np.ndarray, codebooks):
        codes = np.asarray(codes)
        sizes = [int(np.asarray(cb).shape[0]) for cb in codebooks]
        L = 1
        while L < len(sizes) and math.prod(sizes[:L + 1]) <= 1 << 22:   # bounded cell table
            L += 1
        self.books = [np.asarray(cb, dtype=np.float32) for cb in codebooks[:L]]
        self.sizes = sizes[:L]
        cell = np.zeros(codes.shape[0], np.int64)
        for lvl in range(L):
            cell = cell * self.sizes[lvl] + codes[:, lvl].astype(np.int64)
        self.order = np.argsort(cell, kind="stable").astype(np.int64)
        self.counts = np.bincount(cell, minlength=math.prod(self.sizes)).astype(np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.counts)])
        self.nonempty = np.flatnonzero(self.counts)

    def cell_scores(self, q: np.ndarray) -> np.ndarray:
        """q · (c₀[a] + c₁[b] + …) for every cell, in cell-id order."""
        s = np.zeros(1, np.float32)
        for cb in self.books:
            s = (s[:, None] + (cb @ q)[None, :]).ravel()
        return s

    def probe(self, q: np.ndarray, want: int, allowed: np.ndarray | None = None) -> np.ndarray:
        """The chunks of the best cells for q, cells taken until they hold ``want`` chunks (allowed
        ones only, when ``allowed`` is given), sorted by index."""
        s = self.cell_scores(np.asarray(q, dtype=np.float32).ravel())
        nonempty = self.nonempty
        if allowed is None:
            head = self._best_cells(s, want)
            if head is not None:
                cells, per = head
                upto = int(np.searchsorted(np.cumsum(per), want)) + 1
                return self._chunks_of(cells[:upto])
        cells = nonempty[np.argsort(-s[nonempty], kind="stable")]
        if allowed is None:
            per = self.counts[cells]
        else:
            held = np.add.reduceat(allowed[self.order].astype(np.int64), self.offsets[:-1][nonempty])
            per = np.zeros(self.counts.size, np.int64)
            per[nonempty] = held
            per = per[cells]
        upto = int(np.searchsorted(np.cumsum(per), want)) + 1
        return self._chunks_of(cells[:upto])

    def _best_cells(self, s: np.ndarray, want: int):
        """(cells, their chunk counts): the head of the nonempty cells in decreasing score (ties by
        cell id, the stable sort's order) that holds ``want`` chunks, from a partition instead of a
        sort of every cell (16,000 at a million chunks); None when that head is not enough."""
        ne = self.nonempty
        m = max(64, 4 * -(-int(want) * ne.size // max(int(self.offsets[-1]), 1)))
        if m >= ne.size:
            return None
        sn = s[ne]
        v = np.partition(sn, ne.size - m)[ne.size - m]           # the m-th largest score
        sel = np.flatnonzero(sn > v)                             # every cell above it, by position
        cells = ne[sel[np.argsort(-sn[sel], kind="stable")]]     # = the first sel.size of the full order
        per = self.counts[cells]
        return (cells, per) if per.sum() >= want else None

    def _chunks_of(self, cells: np.ndarray) -> np.ndarray:
        lens = self.counts[cells]
        total = int(lens.sum())
        # the cells' runs of ``order``, gathered at once: position j of run c is offsets[c] + j
        at = np.repeat(self.offsets[cells] - (np.cumsum(lens) - lens), lens) + np.arange(total)
        return np.sort(self.order[at])


def inverted_file(view) -> InvertedFile | None:
    """The view's inverted file (built once per view), or None when its index has no RQ codes for
    every chunk."""
    got = view.__dict__.get("_ivf")
    if got is not None:
        return got[0]
    src = getattr(view, "source", None)
    ix = src() if callable(src) else None
    codes = getattr(ix, "codes", None)
    books = getattr(ix, "codebooks", None)
    n_chunks = len(getattr(ix, "chunk_ids", ()))
    ivf = None
    if codes is not None and books is not None and len(books):
        codes = np.asarray(codes)
        if codes.ndim == 2 and codes.shape[0] == n_chunks and codes.shape[1] >= 1 and n_chunks:
            ivf = InvertedFile(codes, list(books)[:codes.shape[1]])
    view.__dict__["_ivf"] = (ivf,)
    return ivf


def use_candidates(view, cfg) -> bool:
    """Whether a query on ``view`` scores candidates only: ``Config.scoring`` "candidates" (when the
    index has RQ codes), "exhaustive" never, "auto" from ``CANDIDATE_MIN_ITEMS`` items on."""
    mode = getattr(cfg, "scoring", "auto")
    if mode == "exhaustive" or (mode == "auto" and view.n < CANDIDATE_MIN_ITEMS):
        return False
    return inverted_file(view) is not None


def n_chunks_of(view) -> int:
    """The view's chunk count (chunks come first), kept on the view: comparing n kind strings costs
    tens of ms at a million items."""
    got = view.__dict__.get("_n_chunks")
    if got is None or got[0] != view.n:
        kinds = np.asarray(view.kinds)
        got = (view.n, int(np.count_nonzero(kinds == "chunk")) if kinds.size else 0)
        view.__dict__["_n_chunks"] = got
    return got[1]


def top_by(values: np.ndarray, idx: np.ndarray, m: int) -> np.ndarray:
    """The (at most) m entries of ``idx`` with the largest ``values[idx]``."""
    if idx.size <= m:
        return idx
    return idx[np.argpartition(-values[idx], m - 1)[:m]]


def _bm25_best(bm: np.ndarray, m: int) -> np.ndarray:
    """The m items with the best BM25 scores (of those with a score), ties at the edge taken in item
    order: BM25 ties are common (items with the same terms and length), and a partition's choice
    among them is arbitrary. (A sampled threshold first was slower: half the items hold a score
    when the question has a common word.)"""
    return _best_in_order(bm, np.flatnonzero(bm != 0), m)     # a compare first: nonzero() on floats is 8× slower


def _best_in_order(values: np.ndarray, idx: np.ndarray, m: int) -> np.ndarray:
    """The (at most) m entries of the ascending ``idx`` with the largest ``values[idx]``, ties at the
    m-th value taken lowest index first; ascending."""
    if idx.size <= m:
        return idx
    v = values[idx]
    kth = np.partition(v, v.size - m)[v.size - m]
    keep = v > kth
    need = m - int(np.count_nonzero(keep))
    keep[np.flatnonzero(v == kth)[:need]] = True
    return idx[keep]


def entity_pages(view, question: str, cfg) -> np.ndarray:
    """The own pages of the entities the question names (the spreading's entity seeds' documents)."""
    if not (cfg.w_spread and cfg.spread_entities) or "title" not in cfg.spread_families:
        return np.zeros(0, np.int64)
    from .spread import lexical_state, named_entities
    st = lexical_state(view, cfg.spread_families)
    fam = st.ctx.families.get("title")
    if fam is None:
        return np.zeros(0, np.int64)
    cols = named_entities(fam, question)
    T = st.title_csc
    out = [T.indices[T.indptr[j]:T.indptr[j + 1]][T.data[T.indptr[j]:T.indptr[j + 1]] >= 1.0] for j in cols.tolist()]
    return np.concatenate(out).astype(np.int64) if out else np.zeros(0, np.int64)


def candidates(view, question: str, qvec: np.ndarray, bm: np.ndarray, cfg, k: int,
               mask: np.ndarray | None = None) -> np.ndarray:
    """Sorted item indices whose eq. 13 parts a query computes (module doc); ``bm``: the (n,) BM25 term
    (0 outside the mask)."""
    n, nc = view.n, n_chunks_of(view)
    want = max(budget(n, k), int(k))
    if mask is not None and int(np.count_nonzero(mask)) <= want:
        return np.flatnonzero(mask).astype(np.int64)        # a narrow filter: every allowed item
    take = np.zeros(n, dtype=bool)
    take[nc:] = True                                                   # virtual items
    take[inverted_file(view).probe(qvec, want, None if mask is None else mask[:nc])] = True
    take[_bm25_best(bm, want)] = True
    take[entity_pages(view, question, cfg)] = True
    if mask is not None:
        take &= mask
    return np.flatnonzero(take)


def _fill(view, qvec, cfg, idx, cs, fz) -> None:
    """cos and fuzzy of the items ``idx`` into the (n,) arrays cs and fz (weight 0: not computed)."""
    if not idx.size:
        return
    q = np.asarray(qvec, dtype=np.float32).reshape(1, -1)
    if cfg.w_cos != 0:
        cs[idx] = cosines(view.E, q, idx)[0]
    if cfg.w_fuzzy != 0 and view.router is not None:
        fz[idx] = view.router.scores_at(q, cfg.theta, idx)[0]


def _least_hop(kth, bo: np.ndarray, w_spread: float) -> np.float32:
    """A float32 bound that every raised item that could reach the k-th score ``kth`` has its hop at or
    above (the smallest positive float32 without a bound): boost · (1 + w · hop) ≥ kth − 1e-6 needs
    hop ≥ ((kth − 1e-6) / max boost − 1) / w, rounded down. It keeps a query's selection to the few
    thousand items the exact test below then reads, not every item spreading raised (10^5 at 1M)."""
    tiny = np.float32(np.finfo(np.float32).smallest_subnormal)
    top = float(bo.max()) if bo.size else 0.0
    if kth is None or not (w_spread > 0 and top > 0 and np.isfinite(kth)):
        return tiny
    t = ((kth - 1e-6) / top - 1.0) / float(w_spread)
    t -= 1e-9 * max(1.0, abs(t))                     # below the float64 rounding of the exact test
    t32 = np.float32(t)
    if float(t32) > t:
        t32 = np.nextafter(t32, np.float32(-np.inf))
    return max(t32, tiny)


def score_candidates(view, question: str, qvec: np.ndarray, cfg, k: int, mask: np.ndarray | None = None) -> dict:
    """query/hybrid.py's ``score_all`` on the candidates (module doc): the same parts dict, with score
    −inf for every item whose parts were not computed."""
    from .bm25 import bm25_scores
    from .hybrid import boosts

    n = view.n
    zeros = np.zeros(n, dtype=np.float32)
    bm = bm25_scores(view, question, mask) if cfg.w_bm25 != 0 else zeros
    C = candidates(view, question, qvec, bm, cfg, k, mask)
    cs, fz = np.zeros(n, np.float32), np.zeros(n, np.float32)
    _fill(view, qvec, cfg, C, cs, fz)
    base = np.asarray(cfg.w_bm25 * bm, np.float32)        # the others' provisional base: their BM25 part
    base[C] = cfg.w_bm25 * bm[C] + cfg.w_cos * cs[C] + cfg.w_fuzzy * fz[C]
    eq13, done = base, C
    hop = zeros
    bo = boosts(view, cfg)
    if cfg.w_spread:   # spreading over the lexical context (query/spread.py), exact over the graph
        from .spread import spread_view
        eq13 = base.copy()
        h = base if mask is None else np.where(mask, base, -np.inf)
        mx = float(h.max()) if n else 0.0
        base, hop = spread_view(view, question, base, cfg, mask)
        kth = None
        if C.size >= k:
            # an item's relevance is at most 1, so its score at most boost · (1 + w_spread · hop): one that
            # cannot reach the candidates' k-th score cannot be a hit, whatever its own parts
            bc = base[C]
            kth = float(np.partition(np.where(bc > 0, bc * bo[C], bc), C.size - k)[C.size - k])
        raised = np.flatnonzero(hop >= _least_hop(kth, bo, cfg.w_spread))
        raised = raised[~in_sorted(C, raised)]          # raised by spreading and not a candidate
        if mask is not None:
            raised = raised[mask[raised]]
        if raised.size and kth is not None:
            reach = bo[raised].astype(np.float64) * (1.0 + float(cfg.w_spread) * hop[raised].astype(np.float64))
            raised = raised[reach >= kth - 1e-6]
        R = np.sort(top_by(base, raised, budget(n, k)))
        if R.size:   # raised by spreading, no candidate: its own parts, then its relevance again
            _fill(view, qvec, cfg, R, cs, fz)
            b = cfg.w_bm25 * bm[R] + cfg.w_cos * cs[R] + cfg.w_fuzzy * fz[R]
            eq13[R] = b
            r = np.clip(b / mx, 0.0, 1.0) if np.isfinite(mx) and mx > 0 else np.zeros_like(b)
            base[R] = r + np.float32(cfg.w_spread) * hop[R]
            done = np.insert(C, np.searchsorted(C, R), R)     # both sorted, disjoint
    total = np.full(n, -np.inf, dtype=np.float32)
    b = base[done]
    total[done] = np.where(b > 0, b * bo[done], b)
    return {"bm25": bm, "cos": cs, "fuzzy": fz, "boost": bo, "spread": hop, "score": total, "eq13": eq13,
            "candidates": done}
