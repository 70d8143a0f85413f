"""Stage 3b: the concept graph (paper §3.3, §4.3). No LLM touches it.

Nodes (V = V_seed ∪ V_join ∪ V_meet):

* **seed**: the attribute concept of attribute m: extent {m}↓ (which equals the column I(·, m), and
  is closed: {m}↓↑↓ = {m}↓), intent {m}↓↑. Kept when its crisp support has >= Config.min_support chunks.
* **join** (bridge, eq. 8 as the paper instantiates it): extent max(A_i, A_j) of two seeds of the
  *same* group (two clusters of one RQ level), for the pairs whose cores share the largest fraction
  of the smaller core (meet_cardinality / min size): adjacent clusters, bridged through their
  boundary chunks. Config.n_join is split over groups in proportion to their seed counts, so the
  few huge clusters of a deep level cannot take every bridge.
* **meet** (eq. 9): extent min(A_i, A_j) of two seeds of *different* groups (a level-0 topic and a
  level-1 residual cluster, or a topic and a lexical attribute), for the Config.n_meet pairs with the
  largest normalised core meet cardinality K_ij / sqrt(K_ii K_jj) (dense relative to both parents,
  not merely large) whose crisp intersection has >= min_support chunks and is strictly smaller than
  both parents' (a real specialisation).

"Core" of a seed = its extent restricted to its crisp members (context.default_members): FCM degrees
over ~100 clusters are nearly uniform, so meet cardinalities of the full extents rank every pair alike.

Edges: lattice edges child -> parent ("up") and parent -> child ("down") between each join/meet node
and its two seeds; co-occurrence edges (§4.3) between nodes whose member chunks co-appear in
>= Config.cooc_threshold windows of Config.cooc_window consecutive chunks of one document (a window
never crosses a document boundary). See docs/ALGORITHM.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .. import ops
from . import small_batch
from .layout import transposed

SEED, JOIN, MEET = 0, 1, 2
NODE_KINDS = ("seed", "join", "meet")
UP, DOWN, COOC = 0, 1, 2
EDGE_KINDS = ("up", "down", "cooc")


@dataclass
class ConceptGraph:
    kind: np.ndarray        # (V,) int8: SEED / JOIN / MEET
    parents: np.ndarray     # (V, 2) int32 node indices of the two seeds of a join/meet; -1 for seeds
    attr: np.ndarray        # (V,) int32 attribute index of a seed; -1 otherwise
    intent: np.ndarray      # (V, M) float32: extent↑ (eq. 6)
    members: sp.csr_matrix  # (V, n) bool: crisp member chunks
    score: np.ndarray       # (V,) float32: the selection score (seeds: crisp support size)
    edge_src: np.ndarray    # (E,) int32
    edge_dst: np.ndarray    # (E,) int32
    edge_kind: np.ndarray   # (E,) int8: UP / DOWN / COOC
    edge_weight: np.ndarray  # (E,) float32: overlap score (lattice) or window count (cooc)
    cooc: sp.csr_matrix | None = None   # (V, V) int64 window counts of every node pair (None: not kept)

    @property
    def n_nodes(self) -> int:
        return len(self.kind)

    def extents(self, I: np.ndarray, nodes=None) -> np.ndarray:
        """(len(nodes), n) fuzzy extents, derived from I: seeds are columns, joins max, meets min."""
        nodes = np.arange(self.n_nodes) if nodes is None else np.asarray(nodes, dtype=np.int64)
        kinds = self.kind[nodes]
        seed = kinds == SEED
        if seed.all() and I.dtype == np.float32:      # every node a seed: the extents are I's columns
            return transposed(I, self.attr[nodes])
        out = np.empty((len(nodes), I.shape[0]), dtype=np.float32)
        if seed.any():
            out[seed] = transposed(I, self.attr[nodes[seed]])
        # parents of joins and meets are always seeds: one batched kernel call per kind
        for k, op in ((JOIN, ops.soft_join), (MEET, ops.soft_meet)):
            sel = kinds == k
            if sel.any():
                pa, pb = self.parents[nodes[sel]].T
                out[sel] = op(transposed(I, self.attr[pa]), transposed(I, self.attr[pb]))
        return out


def pair_candidates(mask: np.ndarray, score: np.ndarray, limit: int):
    """Top ``limit`` (i, j), i < j, by score where mask holds; ties broken by (i, j) for determinism."""
    iu, ju = np.triu_indices(mask.shape[0], k=1)
    ok = mask[iu, ju]
    iu, ju, s = iu[ok], ju[ok], score[iu[ok], ju[ok]]
    order = np.lexsort((ju, iu, -s))[:limit]
    return iu[order], ju[order], s[order]


def _budget(weights: np.ndarray, total: int) -> np.ndarray:
    """Split ``total`` proportionally to ``weights`` (largest remainder, ties to the lower index)."""
    if total <= 0 or weights.sum() <= 0:
        return np.zeros(len(weights), int)
    q = weights / weights.sum() * total
    out = np.floor(q).astype(int)
    rest = total - out.sum()
    out[np.lexsort((np.arange(len(q)), -(q - out)))[:rest]] += 1
    return out


def joins_by_group(mask, score, grp, total):
    """Join pairs: each group (RQ level) gets a share of Config.n_join proportional to its number of
    seeds, and its best pairs fill it; a group with fewer candidates passes the rest on."""
    groups, counts = np.unique(grp, return_counts=True)
    budget = _budget(counts.astype(float), total)
    picked, spare = [], 0
    order = np.argsort(-counts, kind="stable")      # large groups first, so spare budget flows down
    for gi in order:
        sel = grp == groups[gi]
        sub = mask & sel[:, None] & sel[None, :]
        i, j, s = pair_candidates(sub, score, budget[gi] + spare)
        spare = budget[gi] + spare - len(i)
        picked.append((i, j, s))
    if not picked:
        z = np.zeros(0, int)
        return z, z, np.zeros(0)
    i, j, s = (np.concatenate(x) for x in zip(*picked))
    o = np.lexsort((j, i, -s))
    return i[o], j[o], s[o]


def core_meet_cardinality(I: np.ndarray, seeds: np.ndarray, memT: sp.csr_matrix):
    """K[i, j] = Σ_g min(core_i(g), core_j(g)) (``ops.meet_cardinality`` of the seeds' cores) and
    the crisp intersection sizes. A core vanishes off its members, so only pairs sharing a member are
    non-zero and only shared members contribute: one kernel call per seed over its own members'
    rows, O(Σ_i |members_i| · |partners_i|) instead of O(S² n) — what lets vocabulary-sized
    families (thousands of seeds) and a million chunks through."""
    S = len(seeds)
    Ms = memT[seeds].tocsr()                                                  # (S, n) bool
    inter = (Ms.astype(np.int32) @ Ms.T.astype(np.int32)).toarray() if S else np.zeros((0, 0), np.int64)
    K = np.zeros((S, S), np.float64)
    Mc = Ms.T.tocsr()                                                         # (n, S) for row slicing
    for i in range(S):
        rows = Ms[i].indices
        J = np.flatnonzero(inter[i] > 0)
        if not len(rows) or not len(J):
            continue
        a = np.ascontiguousarray(I[rows, seeds[i]][None, :], dtype=np.float32)
        B = I[np.ix_(rows, seeds[J])] * Mc[rows][:, J].toarray()              # cores of partners on rows
        K[i, J] = np.asarray(ops.meet_cardinality(a, np.ascontiguousarray(B.T, dtype=np.float32)))[0]
    return K, inter


def select_nodes(I: np.ndarray, attr_members: sp.csr_matrix, attr_group: np.ndarray, config):
    """Seeds, joins and meets by the rules in the module docstring.

    Returns (kind, parents, attr, score); node order: seeds, joins, meets.
    """
    min_support = config.min_support
    memT = attr_members.T.tocsr()                                   # (M, n)
    support = np.asarray(memT.sum(axis=1)).ravel()
    seeds = np.flatnonzero(support >= min_support)
    K, inter = core_meet_cardinality(I, seeds, memT)
    return select_from_reduced(K, inter, support, seeds, attr_group, config)


def select_from_reduced(K: np.ndarray, inter: np.ndarray, support: np.ndarray, seeds: np.ndarray,
                        attr_group: np.ndarray, config):
    """The selection rules on the reduced matrices of the seeds (however they were reduced: one
    process, or partial sums from shards): K (S, S) core meet cardinalities, inter (S, S) crisp
    intersection sizes, support (M,) crisp supports, seeds (S,) attribute ids.

    Returns (kind, parents, attr, score); node order: seeds, joins, meets.
    """
    min_support = int(config.min_support)
    S = len(seeds)
    size = np.diag(K).copy()
    grp = attr_group[seeds]
    same = grp[:, None] == grp[None, :]

    frac = K / np.maximum(np.minimum(size[:, None], size[None, :]), 1e-12)
    ji, jj, js = joins_by_group(same & (K > 0), frac, grp, config.n_join)
    csize = np.diag(inter)
    strict = (inter < np.minimum(csize[:, None], csize[None, :]))
    ochiai = K / np.maximum(np.sqrt(size[:, None] * size[None, :]), 1e-12)
    mi, mj, ms = pair_candidates(~same & (inter >= min_support) & strict, ochiai, config.n_meet)

    nJ, nM = len(ji), len(mi)
    kind = np.concatenate([np.full(S, SEED), np.full(nJ, JOIN), np.full(nM, MEET)]).astype(np.int8)
    parents = np.full((S + nJ + nM, 2), -1, np.int32)
    parents[S:S + nJ] = np.stack([ji, jj], 1) if nJ else parents[S:S + nJ]
    parents[S + nJ:] = np.stack([mi, mj], 1) if nM else parents[S + nJ:]
    attr = np.full(S + nJ + nM, -1, np.int32)
    attr[:S] = seeds
    score = np.concatenate([support[seeds].astype(np.float32), js.astype(np.float32), ms.astype(np.float32)])
    return kind, parents, attr, score


def node_members(kind, parents, attr, attr_members: sp.csr_matrix) -> sp.csr_matrix:
    """Seeds: the attribute's crisp support; joins: union of the parents'; meets: intersection."""
    memT = attr_members.T.tocsr()
    rows = []
    for v in range(len(kind)):
        if kind[v] == SEED:
            rows.append(memT[attr[v]])
        else:
            a, b = rows[parents[v, 0]], rows[parents[v, 1]]
            rows.append(a.maximum(b) if kind[v] == JOIN else a.minimum(b))
    if not rows:
        return sp.csr_matrix((0, attr_members.shape[0]), dtype=bool)
    return sp.vstack(rows, format="csr").astype(bool)


def windows(doc_ids: list, positions: np.ndarray, w: int) -> sp.csr_matrix:
    """(n_windows, n) bool: every run of ``w`` consecutive chunks of one document (stride 1).

    A document with fewer than w chunks forms one window. Windows never cross documents. Windows
    are numbered by document (in sorted id order), then by start; vectorised (a Python pass over
    the chunks cost seconds at a million chunks, on every update).
    """
    n = len(doc_ids)
    if n == 0:
        return sp.csr_matrix((0, 0), dtype=bool)
    names = np.asarray(doc_ids, dtype=object).astype(str)
    order = np.lexsort((positions, names))
    d = names[order]
    starts = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])          # first sorted position of each document
    lengths = np.diff(np.r_[starts, n])
    n_win = np.maximum(1, lengths - w + 1)                          # windows per document
    win_off = np.r_[0, np.cumsum(n_win)[:-1]]
    run = np.repeat(np.arange(starts.size), lengths)                # document of each sorted position
    rank = np.arange(n) - starts[run]                               # position inside its document
    rows, cols = [], []
    for k in range(max(int(w), 1)):                                 # chunk at rank r is in windows r-k
        s_ = rank - k
        ok = (s_ >= 0) & (s_ < n_win[run])
        rows.append(win_off[run[ok]] + s_[ok])
        cols.append(order[ok])
    rows_a, cols_a = np.concatenate(rows), np.concatenate(cols)
    return sp.csr_matrix((np.ones(rows_a.size, bool), (rows_a, cols_a)), shape=(int(n_win.sum()), n))


def cooc_counts(members: sp.csr_matrix, win: sp.csr_matrix) -> sp.csr_matrix:
    """(V, V) int64: for each node pair, the windows of ``win`` in which both have a member chunk
    (canonical CSR: sorted, no explicit zeros). Windows never cross documents, so the counts of a
    corpus are the sum of its documents' counts: an update adds the new documents' and subtracts the
    deleted ones' (:func:`update_cooc`)."""
    V = members.shape[0]
    if V == 0 or win.shape[0] == 0:
        return sp.csr_matrix((V, V), dtype=np.int64)
    NW = (members.astype(np.int32) @ win.T.astype(np.int32)) > 0          # (V, windows)
    C = sp.csr_matrix(NW.astype(np.int64) @ NW.T.astype(np.int64))
    C.sum_duplicates()
    C.eliminate_zeros()
    C.sort_indices()
    return C


def edges_of_counts(C: sp.csr_matrix, threshold: int):
    """Undirected node pairs co-appearing in >= threshold windows, as two directed edges each, in
    (source, destination) order."""
    C = C.tocoo()
    keep = (C.row != C.col) & (C.data >= max(int(threshold), 1))
    return C.row[keep].astype(np.int32), C.col[keep].astype(np.int32), C.data[keep].astype(np.float32)


def cooc_edges(members: sp.csr_matrix, win: sp.csr_matrix, threshold: int):
    """Undirected node pairs co-appearing in >= threshold windows, as two directed edges each."""
    return edges_of_counts(cooc_counts(members, win), threshold)


def update_cooc(g: "ConceptGraph", members: sp.csr_matrix, doc_ids: list, positions: np.ndarray, config,
                sign: int) -> bool:
    """Add (``sign`` +1) or subtract (−1) the window counts of whole documents (their chunks'
    ``members`` (V, k), ``doc_ids``, ``positions``) to the kept counts, and set the edges from them.
    False (nothing changed) when the graph keeps no counts (an index saved before they were)."""
    if g.cooc is None or g.cooc.shape != (g.n_nodes, g.n_nodes):
        return False
    part = cooc_counts(members, windows(doc_ids, positions, config.cooc_window))
    C = sp.csr_matrix(g.cooc + part if sign > 0 else g.cooc - part)
    C.sum_duplicates()
    C.eliminate_zeros()
    C.sort_indices()
    if C.nnz and C.data.min() < 0:
        raise ValueError("co-occurrence counts went negative: the documents were not in the index")
    _set_edges_from(g, C, config)
    return True


def lattice_edges(kind, parents, score):
    src, dst, knd, wt = [], [], [], []
    for v in np.flatnonzero(kind != SEED):
        for p in parents[v]:
            child, parent = (p, v) if kind[v] == JOIN else (v, p)
            src += [child, parent]
            dst += [parent, child]
            knd += [UP, DOWN]
            wt += [score[v], score[v]]
    return (np.asarray(src, np.int32), np.asarray(dst, np.int32), np.asarray(knd, np.int8),
            np.asarray(wt, np.float32))


def build_graph(I: np.ndarray, attr_members: sp.csr_matrix, attr_group: np.ndarray,
                doc_ids: list, positions: np.ndarray, config) -> ConceptGraph:
    kind, parents, attr, score = select_nodes(I, attr_members, attr_group, config)
    members = node_members(kind, parents, attr, attr_members)
    g = ConceptGraph(kind, parents, attr, np.zeros((len(kind), I.shape[1]), np.float32), members, score,
                     *[np.zeros(0, t) for t in (np.int32, np.int32, np.int8, np.float32)])
    g.intent = compute_intents(g, I)
    set_edges(g, doc_ids, positions, config)
    return g


def compute_intents(g: ConceptGraph, I: np.ndarray, nodes=None, batch: int = 64) -> np.ndarray:
    """extent↑ for the given nodes (all by default), in batches to bound memory."""
    nodes = np.arange(g.n_nodes) if nodes is None else np.asarray(nodes)
    out = np.empty((len(nodes), I.shape[1]), np.float32)
    n = I.shape[0]
    for s in range(0, len(nodes), batch):
        E = g.extents(I, nodes[s:s + batch])
        # A↑ is a min over the support of A (a zero degree contributes 1 → b = 1): extents with a
        # small support (lexical attributes, sparse FCM) run on their own rows only — exact
        small = (E > 0).sum(axis=1) < n // 4
        if (~small).any():
            out[s:s + batch][~small] = np.asarray(ops.luk_up(np.ascontiguousarray(E[~small]), I), np.float32)
        for r in np.flatnonzero(small):
            supp = np.flatnonzero(E[r] > 0)
            # one row against its support: NumPy (index/small_batch.py, the same float32 association
            # bit for bit), which needs no torch import (seconds in a process that updates)
            out[s + r] = 1.0 if not len(supp) else small_batch.luk_up(
                np.ascontiguousarray(E[r, supp][None, :]), np.ascontiguousarray(I[supp]))[0]
    return out


def set_edges(g: ConceptGraph, doc_ids: list, positions: np.ndarray, config) -> None:
    _set_edges_from(g, cooc_counts(g.members, windows(doc_ids, positions, config.cooc_window)), config)


def _set_edges_from(g: ConceptGraph, C: sp.csr_matrix, config) -> None:
    """Lattice edges, and co-occurrence edges from the window counts ``C`` (kept on the graph)."""
    g.cooc = C
    ls, ld, lk, lw = lattice_edges(g.kind, g.parents, g.score)
    cs, cd, cw = edges_of_counts(C, config.cooc_threshold)
    g.edge_src = np.concatenate([ls, cs]).astype(np.int32)
    g.edge_dst = np.concatenate([ld, cd]).astype(np.int32)
    g.edge_kind = np.concatenate([lk, np.full(len(cs), COOC, np.int8)]).astype(np.int8)
    g.edge_weight = np.concatenate([lw, cw]).astype(np.float32)
