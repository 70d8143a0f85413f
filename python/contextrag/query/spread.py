"""Query-time spreading activation over the lexical fuzzy formal context (issue 7, docs/MULTIHOP.md).

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

Everything here is NumPy/SciPy on CSR matrices; the seeds and active attributes are few, so a query
costs O(nnz of the touched rows and columns) (``ops.fuzzy_route`` on CSR gives the same numbers and is
the tests' reference; bench/results/multihop/ops_csr_vs_gather.json has the timings).
"""
from __future__ import annotations

import threading
import weakref

import numpy as np
import scipy.sparse as sp


def _csr(I) -> sp.csr_matrix:
    if not sp.issparse(I):
        I = sp.csr_matrix(np.asarray(I, dtype=np.float32))
    if I.format != "csr":
        I = I.tocsr()
    if I.nnz and (I.data.min() < 0 or I.data.max() > 1):
        raise ValueError("I must hold degrees in [0, 1]")
    return I


def _gather_rows(M: sp.csr_matrix, rows: np.ndarray):
    """(row position in `rows`, column, value) of every stored entry of M's `rows`, without scipy's
    fancy indexing (which costs about a millisecond per call at this size)."""
    rows = np.asarray(rows, dtype=np.int64)
    starts, ends = M.indptr[rows], M.indptr[rows + 1]
    lens = (ends - starts).astype(np.int64)
    total = int(lens.sum())
    if total == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, M.dtype)
    which = np.repeat(np.arange(len(rows)), lens)
    offs = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    pos = starts[which] + offs
    return which, M.indices[pos], M.data[pos]


def seed_activation(r, seeds, I, mu=None) -> np.ndarray:
    """act(a) = max(μ(a), max_{s ∈ seeds} r(s) ⊗ I(s, a)); r: (n,) in [0, 1]; seeds: chunk indices.

    I: (n, M) CSR. mu: optional (M,) dense or (1, M) sparse query activation. Returns (M,) float32.
    """
    I = _csr(I)
    act = np.zeros(I.shape[1], dtype=np.float32)
    seeds = np.asarray(seeds, dtype=np.int64)
    if seeds.size:
        row, col, val = _gather_rows(I, seeds)
        v = np.asarray(r, dtype=np.float32)[seeds][row] + val - 1.0
        m = v > 0
        np.maximum.at(act, col[m], v[m])
    if mu is not None:
        mu = mu.toarray().ravel() if sp.issparse(mu) else np.asarray(mu, dtype=np.float32).ravel()
        np.maximum(act, mu.astype(np.float32), out=act)
    return act


def hop(act, It, n=None, agg: str = "max") -> np.ndarray:
    """hop(c) = max_a act(a) ⊗ I(c, a); It: the transposed incidence (M, n) in CSR (= CSC of I).

    agg="sum" aggregates with the Łukasiewicz strong disjunction (bounded sum min(1, Σ_a ...))
    instead of max, so several shared attributes add up.
    """
    It = (It if It.format == "csr" else It.tocsr()) if sp.issparse(It) else sp.csr_matrix(It)
    n = It.shape[1] if n is None else n
    out = np.zeros(n, dtype=np.float32)
    act = np.asarray(act, dtype=np.float32)
    A = np.flatnonzero(act > 0)
    if A.size:
        row, col, val = _gather_rows(It, A)
        v = act[A][row] + val - 1.0
        m = v > 0
        if agg == "max":
            np.maximum.at(out, col[m], v[m])
        elif agg == "sum":
            np.add.at(out, col[m], v[m])
            np.minimum(out, 1.0, out=out)
        else:
            raise ValueError(f"agg must be 'max' or 'sum', got {agg!r}")
    return out


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


def hop_from_seeds(rho, seeds, I, It, mu=None, doc=None, agg: str = "max") -> np.ndarray:
    """hop(c) = max( max_a μ(a) ⊗ I(c,a),  max_s max_a ρ(s) ⊗ I(s,a) ⊗ I(c,a) ) with no path from a seed
    to its *sibling* chunks (other chunks of the seed's document; the seed itself keeps its own).

    The hop is meant to reach other passages: without the rule a seed's document title (held by all
    its chunks with degree 1) lifts every sibling, and with long documents the top items fill with
    chunks of one document. With ``doc=None`` (or one chunk per document) this equals
    ``hop(seed_activation(rho, seeds, I, mu), It)``."""
    n = It.shape[1]
    seeds = np.asarray(seeds, dtype=np.int64)
    if doc is None:
        return hop(seed_activation(rho, seeds, I, mu), It, n=n, agg=agg)
    doc = np.asarray(doc)
    g = hop(seed_activation(rho, np.zeros(0, np.int64), I, mu), It, n=n, agg=agg) if mu is not None \
        else np.zeros(n, np.float32)
    for s in seeds:
        gs = hop(seed_activation(rho, seeds[seeds == s], I), It, n=n, agg=agg)
        sib = np.flatnonzero(doc == doc[s])
        gs[sib[sib != s]] = 0.0
        np.maximum(g, gs, out=g) if agg == "max" else np.minimum(g + gs, 1.0, out=g)
    return g


def spread_scores(h, I, *, It=None, mu=None, n_seeds: int = 5, lam: float = 1.0,
                  candidates: int = 25, doc=None, agg: str = "max"):
    """The graph-using score of every chunk: relevance(h) + lam · hop, and the hop itself.

    h: (n,) hybrid scores of the query (any scale, larger is better); I: (n, M) CSR incidence of the
    lexical context (union of families, each scaled by its weight); It: I transposed in CSR (pass it
    to avoid recomputing); mu: the query's attribute activation (M,) or (1, M) sparse.
    """
    h = np.asarray(h, dtype=np.float32)
    r = relevance(h)
    if lam == 0 or I is None or I.shape[1] == 0:
        return r, np.zeros_like(r)
    seeds = pick_seeds(h, n_seeds, doc)
    g = hop_from_seeds(seed_relevance(h, candidates), seeds, _csr(I), I.T.tocsr() if It is None else It,
                       mu=mu, doc=doc, agg=agg)
    return r + lam * g, g


# ---- the query-stage hook (query/hybrid.py score_all) -------------------------------------------

_LEX: dict = {}        # id(view) -> (weakref to the view, families key, LexicalState)
_LEX_LOCK = threading.Lock()


class LexicalState:
    """What the hook needs per index view: the weighted incidence over all N items (virtual items have
    no lexical attributes), its transpose, the context (for the query's mentions) and document codes."""

    def __init__(self, ctx, weights: dict, n_items: int, n_chunks: int, doc_ids):
        self.ctx, self.weights, self.n_chunks = ctx, weights, n_chunks
        I = ctx.incidence(weights).tocsr()
        I.resize((n_items, I.shape[1]))
        self.I = I
        self.It = I.T.tocsr()
        codes: dict = {}
        self.doc = np.asarray([codes.setdefault(d, len(codes)) for d in doc_ids[:n_chunks]], dtype=np.int64)

    def mu(self, question: str) -> np.ndarray:
        return self.ctx.query_activation_dense(question, self.weights)


def _families_key(families: dict) -> tuple:
    return tuple((str(k), float(v)) for k, v in families.items() if v > 0)


def _build_state(view, key: tuple) -> LexicalState:
    from ..index.lexical import BUILDERS, LexicalContext, family_from_arrays

    src = getattr(view, "source", None)
    ix = src() if callable(src) else None
    kinds = np.asarray(view.kinds)
    n_chunks = int((kinds == "chunk").sum())
    if ix is not None and hasattr(ix, "chunk_texts"):
        texts = list(ix.chunk_texts)
        titles = [t or "" for t in getattr(ix, "chunk_titles", [""] * len(texts))]
    else:
        texts, titles = list(view.texts[:n_chunks]), [""] * n_chunks
    if len(texts) != n_chunks:
        raise ValueError(f"spreading: the index has {len(texts)} chunk texts but the view {n_chunks} chunks")
    ctx = getattr(ix, "context", None)
    fams = {}
    for name, _ in key:
        block = None
        if ctx is not None:
            try:
                block = ctx.block(name)
            except KeyError:
                block = None
        if block is not None and block.weight > 0:
            # the index stores w·M (clipped); spreading applies its own weights, so undo the index's
            M = sp.csr_matrix(block.matrix, dtype=np.float32)
            M.data = np.clip(M.data / block.weight, 0.0, 1.0)
            fams[name] = family_from_arrays(name, block.names, M, block.state)
        else:
            if name not in BUILDERS:
                raise ValueError(f"Config.spread_families names an unknown lexical family {name!r} "
                                 f"(have {sorted(BUILDERS)})")
            fams[name] = BUILDERS[name](titles, texts)
    return LexicalState(LexicalContext(fams), dict(key), view.n, n_chunks, list(view.doc_ids))


def lexical_state(view, families: dict) -> LexicalState:
    """The lexical context of an index view (built once per view and families, then cached)."""
    key = _families_key(families)
    with _LEX_LOCK:
        hit = _LEX.get(id(view))
        if hit is not None and hit[0]() is view and hit[1] == key:
            return hit[2]
    st = _build_state(view, key)
    with _LEX_LOCK:
        for k in [k for k, e in _LEX.items() if e[0]() is None]:
            del _LEX[k]
        _LEX[id(view)] = (weakref.ref(view), key, st)
    return st


def spread_trace(view, question: str, base: np.ndarray, cfg, mask=None):
    """What the hop of one query starts from: (LexicalState, seeds, seed degrees ρ, μ(q, ·), document
    codes of all N items), or None when spreading is off. ``spread_view`` and query/explain.py both use
    it, so an explanation is the computation that scored the item."""
    base = np.asarray(base, dtype=np.float32)
    fam = getattr(cfg, "spread_families", None) or {}
    if not _families_key(fam):
        return None
    st = lexical_state(view, fam)
    h = base if mask is None else np.where(mask, base, -np.inf).astype(np.float32)
    finite = np.isfinite(h)
    if not finite.any():
        return None
    lo = float(h[finite].min())
    h = np.where(finite, h, lo).astype(np.float32)
    hc = h[:st.n_chunks]
    seeds = pick_seeds(np.where(finite[:st.n_chunks], hc, -np.inf), int(cfg.spread_seeds), st.doc)
    seeds = seeds[finite[seeds]] if seeds.size else seeds
    doc = np.concatenate([st.doc, -1 - np.arange(h.size - st.n_chunks)])   # virtual items: own "documents"
    return st, seeds, seed_relevance(h, int(cfg.candidates)), st.mu(question), doc, relevance(h)


def spread_view(view, question: str, base: np.ndarray, cfg, mask=None):
    """The hook: (new base, hop) for one query. base: the (N,) eq. 13 scores before boosts.

    new base = r + cfg.w_spread · hop, with r = base / max over the allowed items, seeds = the best
    cfg.spread_seeds chunks of distinct documents among the allowed ones, seed degrees min-max scaled
    over the top cfg.candidates, no hop to the seeds' sibling chunks (see :func:`spread_scores`).
    """
    base = np.asarray(base, dtype=np.float32)
    tr = spread_trace(view, question, base, cfg, mask)
    if tr is None:
        return base, np.zeros_like(base)
    st, seeds, rho, mu, doc, r = tr
    g = hop_from_seeds(rho, seeds, st.I, st.It, mu=mu, doc=doc)
    if mask is not None:
        g = np.where(mask, g, 0.0).astype(np.float32)
    return (r + float(cfg.w_spread) * g).astype(np.float32), g
