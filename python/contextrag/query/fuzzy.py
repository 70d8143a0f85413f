"""Fuzzy routing term of eq. 13 (paper §4.4, eq. 14–16).

    s(q, a)     = (1 + cos(q, centroid(a))) / 2                        (14)
    α(q, a)     = θ_ℓ(a) → s(q, a) = min(1, 1 − θ_ℓ(a) + s(q, a))        (15, one level)
    μ(q, v)     = α(q, a)                  for a seed node v of attribute a
                = μ(q, v₁) ⊗ μ(q, v₂)      for a meet node (centroids at two levels: eq. 15's ⊗)
                = max(μ(q, v₁), μ(q, v₂))  for a join (bridge) node (its extent is the union)
    fuzzy(q, c) = max_v μ(q, v) ⊗ I(c, v)                               (16)

→ is the Łukasiewicz residuum, ⊗ the Łukasiewicz t-norm max(0, a + b − 1). The max over nodes of the
t-norm is ``contextrag.ops.fuzzy_route`` (the max-plus kernel).

Choices the paper leaves open (docs/QUERY.md):
* centroid(a) is the index's ``attr_centroids[a]``: the unit mean embedding of the attribute's member
  chunks. For RQ level 0 this is the (normalised) codebook centroid; for deeper levels the codebook
  holds *residual* centroids, whose cosine with a query embedding means nothing, so the members' mean
  embedding stands in. θ_ℓ(a) is ``Config.theta[level]`` for RQ attributes, the last θ otherwise.
* A join node's two parents sit at the same level, so eq. 15 has nothing to ⊗ across levels; the
  join is the least upper bound, so it is active when either parent is (max). A meet node's parents
  sit at different levels (or families): eq. 15 literally, the ⊗ of its parents' activations.
* I(c, v) for a chunk is its fuzzy extent degree (``index.node_extents()``). A virtual item (summary,
  join or meet item) is scored as a pseudo-chunk whose degrees are the mean of its member chunks'
  degrees. (Giving it degree 1 in its own node makes its fuzzy score μ(q, v), which is 1 for almost
  every node at θ = 0.5 — every virtual item then outranks the chunks; measured, docs/QUERY.md.)
"""
from __future__ import annotations

import threading

import numpy as np

from ..index.layout import transposed
from ..index.prepared import context_items_major

SEED, JOIN, MEET = 0, 1, 2
_MAJOR_LOCK = threading.Lock()


def _theta_tuple(theta, L: int) -> np.ndarray:
    th = tuple(theta) if isinstance(theta, (tuple, list)) else (theta,)
    try:
        th = tuple(float(t) for t in th)
    except (TypeError, ValueError):
        raise TypeError(f"theta must be a number or a tuple of numbers, got {theta!r}") from None
    if not th or any(not 0.0 <= t <= 1.0 for t in th):
        raise ValueError(f"theta must be thresholds in [0, 1], got {theta!r}")
    th = th + (th[-1],) * max(0, L - len(th))
    return np.asarray(th, dtype=np.float32)


# Rows gathered at a time by the candidate scorers (query/candidates.py): 2048 rows of a few hundred
# floats stay in L2, where one gather of every candidate made a fresh array of tens of MB per query.
GATHER_BLOCK = 2048

class Router:
    """Precomputed pieces of eq. 14–16 for one index."""

    def __init__(self, centroids, attr_level, node_kind, node_attr, node_parents, I_items, *,
                 node_major: bool = False, n_chunks: int | None = None, chunks_major=None):
        self.A = np.ascontiguousarray(centroids, dtype=np.float32)            # (M, d)
        self.attr_level = np.asarray(attr_level, dtype=np.int64)              # (M,) -1: not an RQ level
        self.kind = np.asarray(node_kind, dtype=np.int8)                      # (V,)
        self.attr = np.asarray(node_attr, dtype=np.int64)                     # (V,)
        self.parents = np.asarray(node_parents, dtype=np.int64).reshape(-1, 2)  # (V, 2)
        # Stored node-major (V, N) and handed to the kernel as its transposed view (N, V): the CPU
        # kernel reduces over the rows of Iᵀ, so no per-query transpose copy of the whole matrix.
        # ``node_major``: I_items is given as (V, N) already (taken as it is when float32 and contiguous).
        # (the transpose of an item-major matrix, the context's own (index/prepared.py), is kept as that
        # view: made node-major only when a query routes every item, ``node_major_extents``)
        It = np.asarray(I_items, dtype=np.float32)
        self._It = It if node_major and It.flags.f_contiguous else np.ascontiguousarray(It if node_major else It.T)
        self.I = self._It.T                                                      # (N, V) view
        # the chunks' rows item-major, for candidate queries (items_major); None: transposed when needed
        self.n_chunks = self._It.shape[1] if n_chunks is None else int(n_chunks)
        self._Ii = chunks_major if chunks_major is not None and chunks_major.shape == (self.n_chunks, len(self.kind)) \
            and chunks_major.dtype == np.float32 else None
        V = len(self.kind)
        # checked once, not per query; two passes over (V, N): min and max propagate NaN and meet ±inf
        if self._It.size and not (float(self._It.min()) >= 0.0 and float(self._It.max()) <= 1.0):
            raise ValueError("I_items must hold finite degrees in [0, 1]")
        if self.I.ndim != 2 or self.I.shape[1] != V:
            raise ValueError(f"I_items must be (n_items, n_nodes={V}), got {self.I.shape}")
        if self.A.shape[0] != len(self.attr_level):
            raise ValueError("centroids and attr_level disagree on the number of attributes")
        self.n_levels = int(self.attr_level.max()) + 1 if len(self.attr_level) and self.attr_level.max() >= 0 else 1
        self.seeds = np.flatnonzero(self.kind == SEED)
        self.joins = np.flatnonzero(self.kind == JOIN)
        self.meets = np.flatnonzero(self.kind == MEET)
        d = np.concatenate([self.joins, self.meets])
        self._parents_are_seeds = bool(len(d) == 0 or (self.kind[self.parents[d].ravel()] == SEED).all())

    @property
    def n_nodes(self) -> int:
        return len(self.kind)

    @classmethod
    def from_index(cls, ix) -> "Router | None":
        g = ix.graph
        if g is None or g.n_nodes == 0:
            return None
        A = np.asarray(ix.attr_centroids, dtype=np.float32)
        level = np.full(A.shape[0], -1, np.int64)
        try:
            sl = ix.context.family_slice("rq")
            level[sl] = np.asarray(ix.context.block("rq").groups, dtype=np.int64)
        except KeyError:
            pass
        n = len(ix.chunk_ids)
        N = len(ix.item_ids)
        ext = np.asarray(ix.node_extents(), dtype=np.float32)       # (V, n): node-major already
        if N > n:   # a virtual item's memberships: the mean over its member chunks (a pseudo-chunk)
            It = np.empty((g.n_nodes, N), dtype=np.float32)
            It[:, :n] = ext
            mem = ix.item_members[n:].astype(np.float32)
            cnt = np.maximum(np.asarray(mem.sum(axis=1)).ravel(), 1.0)
            It[:, n:] = (np.asarray(mem @ ext.T) / cnt[:, None]).T
        else:       # chunks only: the extents themselves (no (N, V) copy and transpose back, 0.5 GB at 1M)
            It = ext
        pair = getattr(ix, "_extents_items", None)     # (node-major extents, their item-major copy)
        Ii = pair[1] if pair is not None and pair[0] is ext else context_items_major(ix)
        return cls(A, level, g.kind, g.attr, g.parents, It, node_major=True, n_chunks=n, chunks_major=Ii)

    def activations(self, qvecs: np.ndarray, theta) -> np.ndarray:
        """μ (Q, V) of eq. 15 for unit query embeddings (Q, d)."""
        q = np.atleast_2d(np.asarray(qvecs, dtype=np.float32))
        th = _theta_tuple(theta, self.n_levels)
        th_attr = np.where(self.attr_level >= 0, th[np.clip(self.attr_level, 0, len(th) - 1)], th[-1])
        s = (1.0 + q @ self.A.T) * 0.5                                        # (14)
        alpha = np.minimum(1.0, 1.0 - th_attr[None, :] + s)                    # θ → s
        mu = np.zeros((q.shape[0], self.n_nodes), dtype=np.float32)
        mu[:, self.seeds] = alpha[:, self.attr[self.seeds]]
        derived = np.sort(np.concatenate([self.joins, self.meets]))
        if self._parents_are_seeds:                                            # one vectorised pass
            a, b = mu[:, self.parents[derived, 0]], mu[:, self.parents[derived, 1]]
            is_join = (self.kind[derived] == JOIN)[None, :]
            mu[:, derived] = np.where(is_join, np.maximum(a, b), np.maximum(0.0, a + b - 1.0))
        else:
            for v in derived:                                                  # parents come first
                a, b = mu[:, self.parents[v, 0]], mu[:, self.parents[v, 1]]
                mu[:, v] = np.maximum(a, b) if self.kind[v] == JOIN else np.maximum(0.0, a + b - 1.0)
        return np.clip(mu, 0.0, 1.0)

    def scores(self, qvecs: np.ndarray, theta) -> np.ndarray:
        """(Q, N) eq. 16 for every item."""
        return self._route(self.activations(qvecs, theta), self.node_major_extents())

    def node_major_extents(self) -> np.ndarray:
        """The extents node-major and C-contiguous (V, N), as the routing kernel reads every item."""
        if not self._It.flags.c_contiguous:
            with _MAJOR_LOCK:     # queries arriving together lay it out once
                if not self._It.flags.c_contiguous:     # (its .T is the item-major matrix, C-contiguous)
                    self._It = transposed(self._It.T)
        return self._It

    def items_major(self) -> np.ndarray:
        """The chunks' extents item-major (n_chunks, V): the rows a candidate query gathers are
        contiguous there (a column of the node-major matrix is V strided reads, and gathering a few
        percent of the columns touches nearly every page of it). The index's stored copy
        (index/prepared.py) when it has one, else transposed here once."""
        if self._Ii is None:
            with _MAJOR_LOCK:     # queries arriving together transpose it once (0.5 GB at a million chunks)
                if self._Ii is None:
                    self._Ii = transposed(self._It[:, :self.n_chunks])
        return self._Ii

    def scores_at(self, qvecs: np.ndarray, theta, idx: np.ndarray) -> np.ndarray:
        """(Q, len(idx)) eq. 16 for the items ``idx`` (sorted) only (query/candidates.py): the kernel
        on their gathered extents, so a query reads len(idx) rows instead of all N."""
        idx = np.asarray(idx, dtype=np.int64)
        mu = self.activations(qvecs, theta)
        m = int(np.searchsorted(idx, self.n_chunks))
        out = np.empty((mu.shape[0], idx.size), dtype=np.float32)
        if m and not self.n_nodes:
            out[:, :m] = 0.0
        elif m:  # max_v max(0, μ + I − 1) on the gathered rows, as the kernel sums it ((μ + I) − 1); the − 1
            # after the max (rounding is monotone: the same bits), in blocks that stay in cache
            Ii = self.items_major()
            C = _cpu_native("route_rows")
            if C is not None and Ii.flags.c_contiguous and Ii.dtype == mu.dtype:   # the same, read in place
                out[:, :m] = C.route_rows(np.ascontiguousarray(mu), Ii, idx[:m])
            else:
                self._route_gathered(mu, Ii, idx[:m], out)
        if m < idx.size:     # virtual items: few, from the node-major matrix
            out[:, m:] = self._route(mu, np.ascontiguousarray(np.take(self._It, idx[m:], axis=1)))
        return out

    @staticmethod
    def _route_gathered(mu: np.ndarray, Ii: np.ndarray, idx: np.ndarray, out: np.ndarray) -> None:
        """The NumPy form of ``_C.route_rows``: max(0, max_v (μ + I) − 1) on the rows ``idx`` of Ii."""
        m = idx.size
        if m:
            for b0 in range(0, m, GATHER_BLOCK):
                rows = Ii[idx[b0:min(b0 + GATHER_BLOCK, m)]]
                for q in range(mu.shape[0]):
                    t = (rows + mu[q]).max(axis=1)
                    t -= np.float32(1.0)
                    out[q, b0:b0 + t.size] = np.maximum(t, np.float32(0.0))

    def _route(self, mu: np.ndarray, It: np.ndarray) -> np.ndarray:
        """max_v μ(q, v) ⊗ I(c, v) for node-major extents It (V, m)."""
        C = _cpu_native("semiring")
        if C is not None:
            # the kernel ops.fuzzy_route's CPU backend calls, without re-validating and re-laying
            # out the (N, V) matrix on every query (I was checked once above; μ is in [0, 1])
            return np.asarray(C.semiring("route", np.ascontiguousarray(mu, dtype=np.float32), It),
                              dtype=np.float32)
        from contextrag import ops

        return np.asarray(ops.fuzzy_route(mu, It.T), dtype=np.float32)


def _cpu_native(name: str):
    """``ops._backend.cpu_native`` (a module attribute here, so tests can replace it)."""
    from contextrag.ops._backend import cpu_native
    return cpu_native(name)


def fuzzy_scores(view, qvecs: np.ndarray, theta) -> np.ndarray:
    """(Q, N) routing scores of eq. 16; zeros when the index has no concept graph."""
    q = np.atleast_2d(np.asarray(qvecs, dtype=np.float32))
    if view.router is None:
        return np.zeros((q.shape[0], view.n), dtype=np.float32)
    return view.router.scores(q, theta)
