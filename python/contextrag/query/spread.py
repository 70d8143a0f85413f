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

from ._once import build_once, drop_elsewhere


def relevance(h) -> np.ndarray:
    """The query's own relevance in [0, 1]: the hybrid score divided by its per-query maximum."""
    h = np.asarray(h, dtype=np.float32)
    mx = float(h.max()) if h.size else 0.0
    if not mx > 0:
        return np.zeros_like(h)
    r = h / mx
    return np.clip(r, 0.0, 1.0, out=r)


def holding_top(h: np.ndarray, k: int) -> np.ndarray | None:
    """Indices of h that hold its k largest values (and perhaps a few more): every index whose value
    reaches the k-th largest of a strided sample of h, which is at most the k-th largest of h. One
    pass over h instead of a partition of all of it (a million scores per query at scale); None when h
    is too small for that to pay."""
    n = h.size
    if k < 1 or n < max(1 << 16, 64 * k):
        return None
    sample = h[:: n // max(16 * k, 4096)]
    thr = np.partition(sample, sample.size - k)[sample.size - k]
    return np.flatnonzero(h >= thr)


def seed_relevance(h, candidates: int = 25, at: np.ndarray | None = None) -> np.ndarray:
    """Seed degrees: the hybrid score min-max scaled over the top `candidates` (1 for the best chunk,
    0 from the candidates' last one down), so only clearly relevant seeds spread with a high degree.
    ``at``: the degrees of these items only (the same values; a query needs its seeds', not n)."""
    h = np.asarray(h, dtype=np.float32)
    if h.size == 0:
        return h
    k = min(candidates, h.size - 1)
    sup = holding_top(h, k + 1) if k > 0 else None
    hs = h if sup is None else h[sup]          # the same k + 1 largest values
    top = -np.partition(-hs, k)[: k + 1] if k > 0 else h[:1]
    hi, lo = float(top.max()), float(top.min())
    if at is not None:
        h = h[at]
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
    sup = holding_top(h, k)
    if sup is not None:      # the k best among the few indices that hold them
        top = sup[np.argpartition(-h[sup], k - 1)[:k]] if sup.size > k else sup
    else:
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

    def __init__(self, ctx, weights: dict, n_items: int, n_chunks: int, doc_ids, parts: dict | None = None):
        self.ctx, self.weights, self.n_chunks = ctx, weights, n_chunks
        if parts is not None:   # prepared and stored with the index (index/prepared.py): nothing to rebuild
            self.G, self.doc = parts["G"], np.asarray(parts["G"].doc[:n_chunks])
            self._own, self._title_csc, self._term_csc = (parts.get(k) for k in ("own", "title_csc", "term_csc"))
            return
        from ..index import prepared
        self.G = prepared.spread_incidence(ctx, tuple(weights.items()), n_items, list(doc_ids[:n_chunks]))
        self.doc = np.asarray(self.G.doc[:n_chunks])

    @property
    def I(self) -> sp.csr_matrix:
        return self.G.csr()

    @property
    def term_csc(self) -> sp.csc_matrix:
        """The term family by columns (which chunks hold each term), built once."""
        if getattr(self, "_term_csc", None) is None:
            self._term_csc = self.ctx.families["term"].incidence.tocsc()
        return self._term_csc

    @property
    def own_pages(self):
        """``ops.SpreadIncidence`` of the title family's own-page entries only (I(c, a) = 1: c is a
        chunk of the document titled a), over all N items, built once: the attributes → chunks half
        of the named-title step."""
        if getattr(self, "_own", None) is None:
            from ..index import prepared
            self._own = prepared.own_pages(self.ctx, self.G)
        return self._own

    @property
    def title_csc(self) -> sp.csc_matrix:
        """The title family by columns (the entity seeds' own pages), built once."""
        if getattr(self, "_title_csc", None) is None:
            self._title_csc = self.ctx.families["title"].incidence.tocsc()
        return self._title_csc

    @property
    def column_max(self) -> np.ndarray:
        """(M,) the largest degree in each attribute's column of the incidence (0 when empty), built once:
        an activation v of attribute a reaches no item when v + max_c I(c, a) − 1 ≤ 0."""
        if getattr(self, "_colmax", None) is None:
            G = self.G
            ptr, data = np.asarray(G.t_indptr), np.asarray(G.t_data)
            cm = np.zeros(G.shape[1], dtype=np.float32)
            full = np.flatnonzero(np.diff(ptr) > 0)
            if full.size:
                cm[full] = np.maximum.reduceat(data, ptr[:-1][full])
            self._colmax = cm
        return self._colmax

    def reaching(self, mu: sp.csr_matrix) -> sp.csr_matrix:
        """``mu`` without the activations that reach no item (v + column max − 1 ≤ 0): the hop is the
        same, and the kernel skips the long columns of common terms whose degrees are all low."""
        keep = (mu.data + self.column_max[mu.indices] - np.float32(1.0)) > 0
        if keep.all():
            return mu
        out = mu.copy()
        out.data = np.where(keep, out.data, np.float32(0.0)).astype(out.data.dtype)
        out.eliminate_zeros()
        return out

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
    from ..index.prepared import families_key
    return families_key(families)


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
    from ..index import prepared
    parts = prepared.stored_spread(ix, key) if not missing and ix is not None else None
    # the view's document ids as they are: read only when the incidence is built here (a list of them
    # would copy a million entries for nothing when the stored incidence is used)
    st = LexicalState(LexicalContext(fams), dict(key), view.n, n_chunks, view.doc_ids, parts=parts)
    if parts is None and not missing and ix is not None:
        prepared.remember_spread(ix, key, {"G": st.G})      # a save stores it (this query built it)
    return st


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
            stale = [_LEX.pop(k) for k in [k for k, e in _LEX.items() if e[0]() is None or k == id(view)]]
            _LEX[id(view)] = (weakref.ref(view), key, st)
        drop_elsewhere(stale)
        return st
    return build_once(("lexical", id(view), key), lookup, build)


def _seeds_of(st: LexicalState, base: np.ndarray, cfg, mask):
    """(relevance r, seeds, the seeds' degrees ρ) of one query, or None when no item is allowed: the
    seed rule shared by the hop and its explanation."""
    h = base if mask is None else np.where(mask, base, -np.inf).astype(np.float32)
    finite = np.isfinite(h)
    if finite.all():         # nothing to fill (no filter): skip the passes below
        sd = pick_seeds(h[:st.n_chunks], int(cfg.spread_seeds), st.doc)
        return relevance(h), sd, seed_relevance(h, int(cfg.candidates), at=sd)
    if not finite.any():
        return None
    lo = float(h[finite].min())
    h = np.where(finite, h, lo).astype(np.float32)
    hc = h[:st.n_chunks]
    sd = pick_seeds(np.where(finite[:st.n_chunks], hc, -np.inf), int(cfg.spread_seeds), st.doc)
    sd = sd[finite[sd]] if sd.size else sd
    return relevance(h), sd, seed_relevance(h, int(cfg.candidates), at=sd)


def named_entities(title_family, question: str) -> np.ndarray:
    """Columns of the title attributes the question names: every title n-gram of the question that
    lies inside no longer title n-gram it also names ("cars 3", not "cars"), so each entity counts
    once, by its fullest name. Quoted titles are title n-grams once normalised."""
    from ..index.lexical.tokens import normalise
    toks = normalise(question).split()
    vocab, spans = title_family.vocab, []
    for i in range(len(toks)):
        for n in range(1, min(int(title_family.max_n), len(toks) - i) + 1):
            j = vocab.get(" ".join(toks[i:i + n]))
            if j is not None:
                spans.append((i, i + n, j))
    keep = {j for a, b, j in spans
            if not any(a2 <= a and b <= b2 and b2 - a2 > b - a for a2, b2, _ in spans)}
    return np.asarray(sorted(keep), dtype=np.int64)


def entity_seeds(st: LexicalState, question: str, base: np.ndarray, mask=None) -> np.ndarray:
    """One seed per entity the question names (:func:`named_entities`): the entity's own page, the
    chunk holding its title attribute with degree 1 (the best by ``base`` when its document has
    several chunks). Its seed degree is 1: the question names the entity, so μ(q, e) is crisp, and
    1 ⊗ I(s, e) = 1. So both sides of a comparison spread, whatever their rank by relevance."""
    fam = st.ctx.families.get("title")
    if fam is None:
        return np.zeros(0, np.int64)
    cols = named_entities(fam, question)
    if not cols.size:
        return np.zeros(0, np.int64)
    T = st.title_csc
    out = []
    for j in cols:
        rows, vals = T.indices[T.indptr[j]:T.indptr[j + 1]], T.data[T.indptr[j]:T.indptr[j + 1]]
        own = rows[vals >= 1.0]
        if mask is not None:
            own = own[mask[own]]
        if own.size:
            out.append(int(own[np.argmax(base[own])]))
    return np.asarray(sorted(set(out)), dtype=np.int64)


def spread_trace(view, question: str, base: np.ndarray, cfg, mask=None):
    """What the spreading of one query starts from: (LexicalState, seeds, seed degrees ρ, μ(q, ·),
    document codes of all N items, relevance r, weighted residual coverage w_residual · res), or None
    when spreading is off. The seeds are those of every step (relevance seeds, entity seeds, the later
    steps' frontiers) and ρ holds each one's degree, so the strongest one-step path from them is the
    item's hop. query/explain.py uses it, so an explanation starts from the seeds that scored the item."""
    base = np.asarray(base, dtype=np.float32)
    fam = cfg.spread_families
    if not _families_key(fam):
        return None
    st = lexical_state(view, fam)
    got = _spread_batch(st, [question], [base], cfg, mask)
    if got[0][0] is None:
        return None
    (r, hop, seeds, degs, _), = got
    rho = np.zeros(base.size, np.float32)
    np.maximum.at(rho, seeds, degs)
    doc = np.concatenate([st.doc, -1 - np.arange(base.size - st.n_chunks)])   # virtual items: own "documents"
    res = _residual_part(st, question, r, hop, cfg, mask)
    return st, seeds, rho, st.mu(question), doc, r, res


def self_path_excluded(st: LexicalState, question: str, base: np.ndarray, cfg, mask=None) -> frozenset:
    """The relevance seeds of the first step that are no entity seeds: the items whose path to
    themselves the hop leaves out (``Config.spread_self = False``, :func:`_from_others`)."""
    got = _seeds_of(st, np.asarray(base, dtype=np.float32), cfg, mask)
    if got is None:
        return frozenset()
    es = entity_seeds(st, question, base, mask) if cfg.spread_entities else np.zeros(0, np.int64)
    return frozenset(int(s) for s in got[1] if s not in set(es.tolist()))


def _padded(rows, width: int):
    """(Q, width) seeds (−1 padded) and degrees from per-query (seeds, degrees) pairs."""
    S = np.full((len(rows), max(width, 1)), -1, np.int64)
    D = np.zeros((len(rows), max(width, 1)), np.float32)
    for q, (s, d) in enumerate(rows):
        S[q, :s.size], D[q, :s.size] = s, d
    return S, D


def _frontier(st: LexicalState, score, raised, taken, n_seeds: int, mask=None):
    """The next step's seeds of one query: the chunks of the ranking's head (the n_seeds best chunks
    of distinct documents by ``score``, allowed ones only) that the last step raised and whose
    documents hold no seed yet. Empty when the head holds no such chunk: the seeds are the head of the ranking
    they produce, so the iteration has reached its fixpoint."""
    key = np.asarray(score[:st.n_chunks], dtype=np.float32)
    if mask is not None:
        key = np.where(mask[:st.n_chunks], key, np.float32(-np.inf))
    head = pick_seeds(key, n_seeds, st.doc)     # (none finite: every pick is dropped just below)
    head = head[np.isfinite(key[head]) & raised[head]]
    if taken.size:   # seeds stand for their documents: a head document with a seed is no new seed
        t = taken[taken < st.n_chunks]
        head = head[~np.isin(st.doc[head], st.doc[t])]
    return head


class _Rise:
    """One query's ``raised`` of the head stop: whether the last step raised an item's degree (now >
    before; the first step: now > 0), read at the few head items a frontier asks about instead of
    compared over all N items."""

    __slots__ = ("now", "before")

    def __init__(self, now: np.ndarray, before: np.ndarray | None):
        self.now, self.before = now, before

    def __getitem__(self, idx):
        return self.now[idx] > (0 if self.before is None else self.before[idx])


def _raised_frontier(st: LexicalState, score, raised, taken, n_seeds: int):
    """``Config.spread_stop = "raised"``: the n_seeds best chunks (by score, distinct documents) among
    those whose degree the last step raised, excluding earlier seeds; the iteration stops when a step
    raises no degree at all."""
    key = np.where(raised[:st.n_chunks], score[:st.n_chunks], -np.inf)
    if taken.size:
        key[taken[taken < st.n_chunks]] = -np.inf
    if not np.isfinite(key).any():
        return np.zeros(0, np.int64)
    sd = pick_seeds(key, n_seeds, st.doc)
    return sd[np.isfinite(key[sd])]


def _spread_batch(st: LexicalState, questions, bases, cfg, mask):
    """Per query (r, hop, seeds of every step, their degrees, later steps taken), or (None, …) when
    no item is allowed.

    Step 1 is ``ops.spread_hop`` from the relevance seeds (degrees ρ) and the entity seeds (degree
    1) with the question's own activation μ; a relevance seed's own value is then what μ and the
    other seeds give it (:func:`_from_others`), unless ``Config.spread_self``. Each later step is the
    same op again, from the frontier, each frontier chunk with its degree: with ``Config.spread_stop
    = "head"`` the raised chunks among the ``spread_seeds`` best documents by r + λ·hop whose
    documents hold no seed yet (:func:`_frontier`); with ``"raised"`` the best ``spread_seeds``
    raised chunks whatever their rank. A step's paths are ρ ⊗ I ⊗ I composed with the path that
    reached its seed, so the Łukasiewicz t-norm gives the decay: every step costs each path
    (1 − I(s, a)) + (1 − I(c, a)) of its degree, only rare shared attributes carry it further, and a
    degree never exceeds the seed's. Degrees combine by max, so the iteration is monotone and
    bounded; it stops at ``Config.spread_steps`` or at the fixpoint: an empty frontier ("head": the
    head holds no new document; "raised": the last step raised no allowed item's degree)."""
    from .. import ops
    Q, S, lam = len(bases), max(int(cfg.spread_seeds), 1), float(cfg.w_spread)
    head = cfg.spread_stop == "head"
    rs, rows, own = [], [], []
    for q, base in enumerate(bases):
        got = _seeds_of(st, base, cfg, mask)
        if got is None:
            rs.append(None)
            rows.append((np.zeros(0, np.int64), np.zeros(0, np.float32)))
            own.append(np.zeros(0, np.int64))
            continue
        r, sd, rho = got
        es = entity_seeds(st, questions[q], base, mask) if cfg.spread_entities else np.zeros(0, np.int64)
        deg = np.concatenate([rho, np.ones(es.size, np.float32)])
        sd = np.concatenate([sd, es])
        u, inv = np.unique(sd, return_inverse=True)
        d = np.zeros(u.size, np.float32)
        np.maximum.at(d, inv, deg)
        rs.append(r)
        rows.append((u, d))
        own.append(u[~np.isin(u, es)] if not cfg.spread_self else np.zeros(0, np.int64))
    seeds, degs = _padded(rows, max(s.size for s, _ in rows))
    mu = st.mu_rows(list(questions))
    H = ops.spread_hop(st.G, seeds, degs, st.reaching(mu))
    for q in range(Q):
        if own[q].size:
            H[q, own[q]] = _from_others(st, own[q], rows[q][0], rows[q][1], mu, q)
    if mask is not None:
        H = np.where(mask[None, :], H, 0.0).astype(np.float32)
    all_s = [s for s, _ in rows]
    all_d = [d for _, d in rows]
    fired = np.zeros(Q, np.int64)
    raised = [_Rise(H[q], None) for q in range(Q)] if head else H > 0
    live = np.asarray([r is not None for r in rs])
    for _ in range(1, int(cfg.spread_steps)):
        front = []
        for q in range(Q):
            if not live[q]:
                front.append((np.zeros(0, np.int64), np.zeros(0, np.float32)))
                continue
            if head:
                sd = _frontier(st, rs[q] + lam * H[q], raised[q], all_s[q], S, mask)
            else:
                sd = _raised_frontier(st, rs[q] + H[q], raised[q], all_s[q], S)
            front.append((sd, H[q, sd]))
        took = np.asarray([s.size > 0 for s, _ in front])
        if not took.any():
            break
        fs, fd = _padded(front, S)
        H2 = ops.spread_hop(st.G, fs, fd, None)
        if mask is not None:
            H2 = np.where(mask[None, :], H2, 0.0).astype(np.float32)
        raised = [_Rise(H2[q], H[q]) for q in range(Q)] if head else H2 > H
        # "head": a step counts when it is taken (its frontier is not empty); "raised": when it raises a degree
        step = took if head else raised.any(axis=1) & live
        fired += step
        # in place: a _Rise row of H2 then reads max(H2, H) > H, which is H2 > H
        H = np.maximum(H2, H, out=H2)
        for q in range(Q):
            all_s[q] = np.concatenate([all_s[q], front[q][0]])
            all_d[q] = np.concatenate([all_d[q], front[q][1]])
        live &= step
        if not live.any():
            break
    if cfg.spread_mentions and "title" in st.ctx.families:
        H = np.maximum(H, _named_title_step(st, all_s, all_d, mask), out=H)
    return [(rs[q], H[q], all_s[q], all_d[q], int(fired[q])) for q in range(Q)]


def _from_others(st: LexicalState, targets, seeds, degs, mu, q: int) -> np.ndarray:
    """The first step's degree of each relevance seed in ``targets`` without its path to itself:
    max( max_a μ(q,a) ⊗ I(t,a),  max_{s ≠ t, doc(s) ≠ doc(t)} ρ(s) ⊗ I(s,a) ⊗ I(t,a) ), the
    ``ops.spread_hop`` definition with the term c = s left out for these seeds. A relevance seed's
    path to itself, ρ(t) ⊗ I(t,a) ⊗ I(t,a) = ρ(t) through its own title, only repeats its relevance,
    which r(t) already counts; the hop is what *other* evidence adds. Gathered from the seeds' few
    rows (the kernel computed every other item)."""
    G = st.G
    one = G.data.dtype.type(1)
    A = np.zeros((seeds.size + 1, G.shape[1]), G.data.dtype)     # per seed ρ(s) ⊗ I(s, ·); last row μ(q, ·)
    for k, (s, d) in enumerate(zip(seeds.tolist(), degs.tolist())):
        if s >= 0 and d > 0:
            a, b = G.indptr[s], G.indptr[s + 1]
            A[k, G.indices[a:b]] = np.maximum(G.data.dtype.type(d) + G.data[a:b] - one, 0)
    A[-1, mu.indices[mu.indptr[q]:mu.indptr[q + 1]]] = mu.data[mu.indptr[q]:mu.indptr[q + 1]]
    sdoc = np.where((seeds >= 0) & (seeds < st.n_chunks), st.doc[np.clip(seeds, 0, st.n_chunks - 1)], -1)
    out = np.zeros(targets.size, np.float32)
    for k, t in enumerate(targets.tolist()):
        a, b = G.indptr[t], G.indptr[t + 1]
        if a == b:
            continue
        other = (seeds != t) & ((sdoc != st.doc[t]) if t < st.n_chunks else True)
        rows = np.append(np.flatnonzero(other), seeds.size)
        out[k] = max(0.0, float((A[rows][:, G.indices[a:b]] + G.data[a:b] - one).max()))
    return out


def _named_title_step(st: LexicalState, seeds, degs, mask) -> np.ndarray:
    """(Q, N) degrees of the pages whose titles the seeds name: a seed s of degree ρ that mentions
    title a (0 < I(s, a) < 1) reaches a's own page with degree ρ. The naming is crisp, as an entity
    the question names is (the entity seeds): ρ ⊗ 1 ⊗ 1 = ρ, where the title family's symmetric
    path ρ ⊗ w(a) ⊗ 1 would charge a common title's weight to the page the seed names outright.
    The seeds' mentions are gathered here (a few rows); the attributes → chunks half is
    ``ops.spread_hop`` over the own-page incidence, with those degrees as the activation."""
    from .. import ops
    T = st.ctx.families["title"].incidence
    rows, cols, vals = [], [], []
    for q, (sd, dg) in enumerate(zip(seeds, degs)):
        for s, d in zip(sd.tolist(), dg.tolist()):
            if s >= st.n_chunks or d <= 0:
                continue
            c, v = T.indices[T.indptr[s]:T.indptr[s + 1]], T.data[T.indptr[s]:T.indptr[s + 1]]
            c = c[(v > 0) & (v < 1.0)]
            rows.append(np.full(c.size, q, np.int64))
            cols.append(c.astype(np.int64))
            vals.append(np.full(c.size, d, np.float32))
    Q, M = len(seeds), T.shape[1]
    if not rows or not sum(r.size for r in rows):
        return np.zeros((Q, st.G.n), np.float32)
    r_, c_, v_ = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    best: dict = {}                          # (query, title) -> the largest degree naming it
    for q, a, v in zip(r_.tolist(), c_.tolist(), v_.tolist()):
        if v > best.get((q, a), 0.0):
            best[(q, a)] = v
    k = np.asarray(list(best), np.int64).reshape(-1, 2)
    act = sp.csr_matrix((np.asarray(list(best.values()), np.float32), (k[:, 0], k[:, 1])), shape=(Q, M))
    none = np.full((Q, 1), -1, np.int64)
    H = ops.spread_hop(st.own_pages, none, np.zeros((Q, 1), np.float32), act)
    if mask is not None:
        H = np.where(mask[None, :], H, 0.0).astype(np.float32)
    return H


def residual_coverage(st: LexicalState, question: str, best: int) -> np.ndarray:
    """(n_chunks,) degree to which each chunk covers what the best chunk leaves of the question:
    the question's terms t (the "term" family's, weights w(t)) that ``best`` does not hold, and

        res(c) = Σ_{t ∈ q, t ∉ best} w(t) · [c holds t] / Σ_{t ∈ q} w(t)     in [0, 1]

    the weighted subsethood of the question's residual q ∧ ¬best in c. The second passage of a
    two-passage answer holds the question's words the first one lacks; a near duplicate of the first
    passage holds the same words and gains nothing. Zeros without a term family or question terms."""
    cov = _residual_sums(st, question, best)
    return np.zeros(st.n_chunks, np.float32) if cov is None else cov.astype(np.float32)


def _residual_sums(st: LexicalState, question: str, best: int) -> np.ndarray | None:
    """:func:`residual_coverage` in float64 before its rounding to float32, or None where it is 0."""
    fam = st.ctx.families.get("term")
    if fam is None:
        return None
    cols, w = fam.query_columns(question)
    total = float(w.sum()) if cols.size else 0.0
    if total <= 0.0:
        return None
    I = fam.incidence
    held = I.indices[I.indptr[best]:I.indptr[best + 1]]
    left = ~np.isin(cols, held)
    if not left.any():
        return None
    T, c = st.term_csc, cols[left]
    a, b = T.indptr[c], T.indptr[c + 1]
    rows = np.concatenate([T.indices[x:y] for x, y in zip(a.tolist(), b.tolist())])
    vals = np.repeat((w[left] / total).astype(np.float64), b - a)
    return np.bincount(rows, weights=vals, minlength=st.n_chunks)[:st.n_chunks]


def spread_many(view, questions, bases, cfg, mask=None):
    """The hook for a batch: [(new base, hop)] per question, one ``ops.spread_hop`` call per step
    for all of them.

    bases: the (N,) eq. 13 scores before boosts, one per question. new base = r + cfg.w_spread · g,
    g = hop + cfg.w_residual · res, with r = base / max over the allowed items, res the
    :func:`residual_coverage` of the best chunk by r + w_spread · hop, and hop the degree of
    :func:`_spread_batch`'s steps
    (seeds: the best cfg.spread_seeds chunks of distinct documents among the allowed ones, degrees
    min-max scaled over the top cfg.candidates, and the own page of every entity the question names,
    degree 1; no hop to the seeds' sibling chunks, ``ops.spread_hop``).
    """
    bases = [np.asarray(b, dtype=np.float32) for b in bases]
    fam = cfg.spread_families
    if not _families_key(fam) or not bases:
        return [(b, np.zeros_like(b)) for b in bases]
    st = lexical_state(view, fam)
    out = []
    lam = float(cfg.w_spread)
    for q, (b, (r, g, *_rest)) in enumerate(zip(bases, _spread_batch(st, list(questions), bases, cfg, mask))):
        if r is None:
            out.append((b, np.zeros_like(b)))
            continue
        res = _residual_part(st, questions[q], r, g, cfg, mask)     # a new array: summed into in place
        res += np.asarray(g, np.float32)                # g + res, r + λ·g: the same float32 bits
        nb = np.multiply(res, np.float32(lam))
        nb += r
        out.append((nb, res))
    return out


def _residual_part(st: LexicalState, question: str, r, hop, cfg, mask) -> np.ndarray:
    """(N,) w_residual · :func:`residual_coverage` from the best allowed chunk by r + w_spread · hop."""
    res = np.zeros(np.asarray(r).size, np.float32)
    wres = float(cfg.w_residual)
    nc = st.n_chunks
    if wres <= 0 or not nc:
        return res
    s = r[:nc] + float(cfg.w_spread) * hop[:nc]     # the chunks' part only: the same float32 bits
    if mask is not None:
        s = np.where(mask[:nc], s, -np.inf)
    cov = _residual_sums(st, question, int(np.argmax(s)))
    if cov is not None:
        res[:nc] = cov          # rounded to float32 as residual_coverage rounds it, then weighted
        res[:nc] *= np.float32(wres)
    if mask is not None:
        res = np.where(mask, res, np.float32(0))
    return res


def spread_steps_fired(view, questions, bases, cfg, mask=None) -> np.ndarray:
    """Per question, how many steps after the first were taken (``Config.spread_stop = "head"``: a
    frontier was found) or raised some item's degree (``"raised"``); 0: the first step was the
    fixpoint. For the benchmarks' report of how often the later steps fire."""
    bases = [np.asarray(b, dtype=np.float32) for b in bases]
    if not _families_key(cfg.spread_families) or not bases:
        return np.zeros(len(bases), np.int64)
    st = lexical_state(view, cfg.spread_families)
    return np.asarray([x[4] for x in _spread_batch(st, list(questions), bases, cfg, mask)], np.int64)


def spread_view(view, question: str, base: np.ndarray, cfg, mask=None):
    """The hook for one query: (new base, g); see :func:`spread_many`."""
    return spread_many(view, [question], [base], cfg, mask)[0]
