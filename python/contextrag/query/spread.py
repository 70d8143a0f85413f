"""Query-time spreading activation over the lexical fuzzy formal context (docs/MULTIHOP.md).

A fuzzy counterpart of personalised PageRank on the concept graph, in Łukasiewicz logic
(a ⊗ b = max(0, a + b − 1)), two max-plus steps over a sparse incidence I (chunks × attributes):

    act(a)  = max( μ(q, a),  max_{s ∈ seeds} ρ(s) ⊗ I(s, a) )      chunks → attributes  (eq. 16 transposed)
    hop(c)  = max_a act(a) ⊗ I(c, a)                                 attributes → chunks  (eq. 16)

with no path from a seed to the other chunks of its own document. h is the eq. 13 hybrid score;
r = h / max h is the query's own relevance; the seeds are the best chunks of distinct documents,
with degrees ρ = h min-max scaled over the top candidates; μ(q, a) is the weight of an attribute the
question mentions. hop(c) is high when c shares a *rare* attribute (both incidences near 1) with a
highly relevant seed: the second passage of a bridge question, which shares an entity with the first,
not its topic. The final score adds the hop to the chunk's own relevance, so a chunk reached through
the graph still competes on its relevance to the query (topic drift is penalised):

    score(c) = r(c) + λ · hop(c)          λ = Config.w_spread

The hook computes the hop with the kernel op ``contextrag.ops.spread_hop`` (C++/OpenMP on the CPU,
Triton or CUDA on a GPU; its float64 definition is ``contextrag.ref.spread_hop``), batched over the
questions of ``query.retrieve_many``; a query costs O(nnz of the seeds' rows and of the activated
attributes' columns). This module picks the seeds and their degrees and prepares the incidence. The
lexical families are index families (built at index time, stored in the snapshot, loaded with it).
"""
from __future__ import annotations

import threading
import weakref

import numpy as np
import scipy.sparse as sp

from ._once import build_once


def relevance(h) -> np.ndarray:
    """The query's own relevance in [0, 1]: the hybrid score divided by its per-query maximum."""
    h = np.asarray(h, dtype=np.float32)
    mx = float(h.max()) if h.size else 0.0
    return np.clip(h / mx, 0.0, 1.0) if mx > 0 else np.zeros_like(h)


def seed_relevance(h, candidates: int = 25) -> np.ndarray:
    """Seed degrees: the hybrid score min-max scaled over the top `candidates` (1 for the best chunk,
    0 from the candidates' last one down), so only clearly relevant seeds spread with a high degree."""
    h = np.asarray(h, dtype=np.float32)
    if h.size == 0:
        return h
    k = min(candidates, h.size - 1)
    top = -np.partition(-h, k)[: k + 1] if k > 0 else h[:1]
    hi, lo = float(top.max()), float(top.min())
    if hi <= lo:
        return (h >= hi).astype(np.float32)
    return np.clip((h - lo) / (hi - lo), 0.0, 1.0).astype(np.float32)


def pick_seeds(h, n_seeds: int, doc=None) -> np.ndarray:
    """Indices of the n_seeds best chunks; with `doc` (an int array of document ids), at most one
    chunk (the best) per document, so the seeds cover n_seeds different documents."""
    h = np.asarray(h)
    if n_seeds <= 0 or h.size == 0:
        return np.zeros(0, np.int64)
    if doc is None:
        k = min(n_seeds, h.size)
        idx = np.argpartition(-h, k - 1)[:k]
        return idx[np.argsort(-h[idx], kind="stable")]
    # the best few hundred are nearly always enough to find n_seeds documents: sort only those
    k = min(h.size, max(64, 16 * n_seeds))
    top = np.argpartition(-h, k - 1)[:k] if k < h.size else np.arange(h.size)
    order = top[np.lexsort((top, -h[top]))]
    if len({doc[i] for i in order}) < n_seeds and k < h.size:
        order = np.argsort(-h, kind="stable")
    out, seen = [], set()
    for i in order:
        d = doc[i]
        if d in seen:
            continue
        seen.add(d)
        out.append(i)
        if len(out) >= n_seeds:
            break
    return np.asarray(out, dtype=np.int64)


# ---- the query-stage hook (query/hybrid.py score_all, query.retrieve_many) ---------------------

_LEX: dict = {}        # id(view) -> (weakref to the view, families key, LexicalState)
_LEX_LOCK = threading.Lock()


class LexicalState:
    """What the hook needs per index view: the weighted incidence over all N items (virtual items have
    no lexical attributes and documents of their own) prepared for ``ops.spread_hop``, and the
    context (for the query's mentions)."""

    def __init__(self, ctx, weights: dict, n_items: int, n_chunks: int, doc_ids):
        from .. import ops
        self.ctx, self.weights, self.n_chunks = ctx, weights, n_chunks
        I = ctx.incidence(weights).tocsr()
        I.resize((n_items, I.shape[1]))
        codes: dict = {}
        self.doc = np.asarray([codes.setdefault(d, len(codes)) for d in doc_ids[:n_chunks]], dtype=np.int64)
        doc_all = np.concatenate([self.doc, -1 - np.arange(n_items - n_chunks, dtype=np.int64)])
        self.G = ops.SpreadIncidence(I, doc_all)

    @property
    def I(self) -> sp.csr_matrix:
        return self.G.csr()

    def mu(self, question: str) -> np.ndarray:
        return self.ctx.query_activation_dense(question, self.weights)

    def mu_rows(self, questions) -> sp.csr_matrix:
        """μ(q, ·) of every question as one (Q, M) CSR over the columns of the incidence."""
        names = self.ctx.names(self.weights)
        rows, cols, vals = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.float32)]
        for q, text in enumerate(questions):
            off = 0
            for f in names:
                fam = self.ctx.families[f]
                c, v = fam.query_columns(text)
                rows.append(np.full(len(c), q, np.int64))
                cols.append(np.asarray(c, np.int64) + off)
                vals.append(np.asarray(v, np.float32) * np.float32(min(1.0, float(self.weights[f]))))
                off += len(fam.vocab)
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(len(questions), self.G.shape[1]), dtype=np.float32)


def _families_key(families: dict) -> tuple:
    return tuple((str(k), float(v)) for k, v in families.items() if v > 0)


def _build_state(view, key: tuple) -> LexicalState:
    """The index's stored lexical families (built at index time, loaded with the index). A family the
    index does not hold (an index built with other ``spread_families``, or a view without an index)
    is built here from the chunk texts once per view, with a warning: that is the slow path."""
    import warnings

    from ..index.lexical.families import BUILDERS, LexicalContext

    src = getattr(view, "source", None)
    ix = src() if callable(src) else None
    kinds = np.asarray(view.kinds)
    n_chunks = int((kinds == "chunk").sum())
    stored = getattr(ix, "lexical", None)
    fams, missing = {}, []
    for name, _ in key:
        if stored is not None and name in stored.families:
            fams[name] = stored.families[name]
        else:
            if name not in BUILDERS:
                raise ValueError(f"Config.spread_families names an unknown lexical family {name!r} "
                                 f"(have {sorted(BUILDERS)})")
            missing.append(name)
    if missing:
        if ix is not None and hasattr(ix, "chunk_texts"):
            texts = list(ix.chunk_texts)
            titles = [t or "" for t in getattr(ix, "chunk_titles", [""] * len(texts))]
        else:
            texts, titles = list(view.texts[:n_chunks]), [""] * n_chunks
        if len(texts) != n_chunks:
            raise ValueError(f"spreading: the index has {len(texts)} chunk texts but the view {n_chunks} chunks")
        if hasattr(ix, "lexical"):   # a real index without them (a view alone has only its texts)
            warnings.warn(f"contextrag: the index holds no lexical famil{'y' if len(missing) == 1 else 'ies'} "
                          f"{missing}; building from the chunk texts for this process (build the index with "
                          f"Config.spread_families naming them to store them)", RuntimeWarning, stacklevel=4)
        for name in missing:
            fams[name] = BUILDERS[name](titles, texts)
    fams = {name: fams[name] for name, _ in key}
    return LexicalState(LexicalContext(fams), dict(key), view.n, n_chunks, list(view.doc_ids))


def lexical_state(view, families: dict) -> LexicalState:
    """The lexical context of an index view (prepared once per view and families, then cached)."""
    key = _families_key(families)

    def lookup():
        with _LEX_LOCK:
            hit = _LEX.get(id(view))
            return hit[2] if hit is not None and hit[0]() is view and hit[1] == key else None

    def build():
        st = _build_state(view, key)
        with _LEX_LOCK:
            for k in [k for k, e in _LEX.items() if e[0]() is None]:
                del _LEX[k]
            _LEX[id(view)] = (weakref.ref(view), key, st)
        return st
    return build_once(("lexical", id(view), key), lookup, build)


def _seeds_of(st: LexicalState, base: np.ndarray, cfg, mask):
    """(relevance r, seeds, seed degrees ρ over all N items) of one query, or None when no item is
    allowed: the seed rule shared by the hop and its explanation."""
    h = base if mask is None else np.where(mask, base, -np.inf).astype(np.float32)
    finite = np.isfinite(h)
    if not finite.any():
        return None
    lo = float(h[finite].min())
    h = np.where(finite, h, lo).astype(np.float32)
    hc = h[:st.n_chunks]
    sd = pick_seeds(np.where(finite[:st.n_chunks], hc, -np.inf), int(cfg.spread_seeds), st.doc)
    sd = sd[finite[sd]] if sd.size else sd
    return relevance(h), sd, seed_relevance(h, int(cfg.candidates))


def spread_trace(view, question: str, base: np.ndarray, cfg, mask=None):
    """What the hop of one query starts from: (LexicalState, seeds, seed degrees ρ, μ(q, ·), document
    codes of all N items, relevance r), or None when spreading is off. query/explain.py uses it, so an
    explanation starts from the seeds that scored the item."""
    base = np.asarray(base, dtype=np.float32)
    fam = cfg.spread_families
    if not _families_key(fam):
        return None
    st = lexical_state(view, fam)
    got = _seeds_of(st, base, cfg, mask)
    if got is None:
        return None
    r, seeds, rho = got
    doc = np.concatenate([st.doc, -1 - np.arange(base.size - st.n_chunks)])   # virtual items: own "documents"
    return st, seeds, rho, st.mu(question), doc, r


def _seed_rows(st: LexicalState, bases, cfg, mask):
    """Per query: (relevance r, seeds, seed degrees); seeds padded to cfg.spread_seeds with −1."""
    S = max(int(cfg.spread_seeds), 1)
    rs, seeds, degs = [], np.full((len(bases), S), -1, np.int64), np.zeros((len(bases), S), np.float32)
    for q, base in enumerate(bases):
        got = _seeds_of(st, base, cfg, mask)
        rs.append(None if got is None else got[0])
        if got is not None:
            sd = got[1]
            seeds[q, :sd.size] = sd
            degs[q, :sd.size] = got[2][sd]
    return rs, seeds, degs


def spread_many(view, questions, bases, cfg, mask=None):
    """The hook for a batch: [(new base, hop)] per question, one ``ops.spread_hop`` call for all.

    bases: the (N,) eq. 13 scores before boosts, one per question. new base = r + cfg.w_spread · hop,
    with r = base / max over the allowed items, seeds = the best cfg.spread_seeds chunks of distinct
    documents among the allowed ones, seed degrees min-max scaled over the top cfg.candidates, no hop
    to the seeds' sibling chunks (``ops.spread_hop``).
    """
    from .. import ops
    bases = [np.asarray(b, dtype=np.float32) for b in bases]
    fam = cfg.spread_families
    if not _families_key(fam) or not bases:
        return [(b, np.zeros_like(b)) for b in bases]
    st = lexical_state(view, fam)
    rs, seeds, degs = _seed_rows(st, bases, cfg, mask)
    hops = ops.spread_hop(st.G, seeds, degs, st.mu_rows(list(questions)))
    out = []
    for q, b in enumerate(bases):
        if rs[q] is None:
            out.append((b, np.zeros_like(b)))
            continue
        g = hops[q] if mask is None else np.where(mask, hops[q], 0.0).astype(np.float32)
        out.append(((rs[q] + float(cfg.w_spread) * g).astype(np.float32), g))
    return out


def spread_view(view, question: str, base: np.ndarray, cfg, mask=None):
    """The hook for one query: (new base, hop); see :func:`spread_many`."""
    return spread_many(view, [question], [base], cfg, mask)[0]
