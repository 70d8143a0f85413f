"""Stage 2-3a: the fuzzy formal context I = chunks × attributes (paper §3.2, §3.4).

I is the union of attribute *families*, each built by a registered builder and scaled by its weight
``Config.family_weights[name]`` (I_f = clip(w · M_f, 0, 1); weight 0 or absence leaves the family
out). The first family, "rq", is the paper's: RQ-KMeans codebooks (eq. 10-12) and the FCM
membership (m = Config.fcm_m) of each chunk's residual r(ℓ) at level ℓ to each cluster of level ℓ.

Adding a family (e.g. entities or rare terms)::

    from contextrag.index.context import register_family, FamilyResult

    def fit(chunks, embeddings, config):            # chunks: ChunkView (texts, titles, doc_ids, ...)
        M, names = ...                              # (n, m) in [0, 1], dense ndarray or scipy CSR
        return FamilyResult(M, names, state={...})  # state: np arrays reused by transform
    def transform(chunks, embeddings, config, state):   # new chunks only, same columns as fit
        return FamilyResult(M_new, names)
    register_family("entities", fit, transform)     # then Config(family_weights={"rq": 1, "entities": 0.5})

A plain ``fn(chunks, embeddings, config) -> (matrix, names)`` works too (``register_family(name, fn)``):
without ``transform``, ``ContextRAG.add`` refits that family over all chunks and keeps existing
columns by attribute name (new names are appended; a vanished name becomes an all-zero column).

Per family a builder may also return ``groups`` (an int per attribute: attributes of one group are
alternatives, like the clusters of one RQ level; join nodes pair attributes of a group, meet nodes
pair attributes of different groups), ``members`` (a boolean (n, m) CSR: the crisp support used to
give nodes member chunks; default: the rule in :func:`default_members`) and ``rows`` (per-chunk arrays
kept aligned with the chunk table on add/delete, e.g. the RQ codes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import scipy.sparse as sp

from .. import ops
from .lexical import families as lexical
from .deferred import settled

RQ_MEMBER_TOP = 2     # an RQ chunk belongs to at most its two nearest clusters per level
RQ_ROW_BLOCK = 65536 # rows per block when mapping chunks through the codebooks (bounds memory)
DENSE_MAX_DENSITY = 1.0 / 3.0  # CSR (4+4 bytes per entry + row pointers) beats dense float32 below this


@dataclass
class ChunkView:
    """What family builders see of the chunks (parallel lists/arrays)."""
    texts: list
    titles: list
    doc_ids: list
    positions: np.ndarray

    def __len__(self):
        return len(self.texts)


@dataclass
class FamilyResult:
    matrix: object                    # (n, m) float32 in [0, 1]: ndarray or scipy.sparse CSR
    names: list                       # m attribute names (unique within the family)
    groups: np.ndarray | None = None  # (m,) int
    members: object = None            # (n, m) bool CSR, or None for the default rule
    state: dict = field(default_factory=dict)   # global arrays (e.g. codebooks)
    rows: dict = field(default_factory=dict)    # per-chunk arrays (first axis n)
    info: dict = field(default_factory=dict)    # JSON-able diagnostics (kept in the manifest)


@dataclass
class Family:
    name: str
    fit: Callable
    transform: Callable | None = None


FAMILIES: dict[str, Family] = {}


def register_family(name: str, fit: Callable, transform: Callable | None = None) -> None:
    """Register an attribute family builder (see module docstring)."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"name must be a non-empty str without ':', got {name!r}")
    if not callable(fit):
        raise TypeError(f"fit must be callable, got {type(fit).__name__}")
    if transform is not None and not callable(transform):
        raise TypeError(f"transform must be callable or None, got {type(transform).__name__}")
    FAMILIES[name] = Family(name, fit, transform)


def _as_result(out, name: str, n: int) -> FamilyResult:
    if isinstance(out, tuple):
        out = FamilyResult(*out)
    if not isinstance(out, FamilyResult):
        raise TypeError(f"family {name!r} must return FamilyResult or (matrix, names), got {type(out).__name__}")
    M = out.matrix
    if sp.issparse(M):
        M = sp.csr_matrix(M, dtype=np.float32)
        vals = M.data
    else:
        M = np.ascontiguousarray(M, dtype=np.float32)
        if M.ndim != 2:
            raise ValueError(f"family {name!r} returned a {M.ndim}-D matrix; expected (chunks, attributes)")
        vals = M
    if M.shape[0] != n:
        raise ValueError(f"family {name!r} returned {M.shape[0]} rows for {n} chunks")
    if len(out.names) != M.shape[1]:
        raise ValueError(f"family {name!r} returned {len(out.names)} names for {M.shape[1]} columns")
    if vals.size and (not np.isfinite(vals).all() or vals.min() < 0 or vals.max() > 1):
        raise ValueError(f"family {name!r} returned degrees outside [0, 1] (or NaN)")
    out.matrix = M
    out.names = [str(x) for x in out.names]
    if out.groups is None:
        out.groups = np.zeros(M.shape[1], dtype=np.int32)
    out.groups = np.asarray(out.groups, dtype=np.int32)
    return out


def dense(M) -> np.ndarray:
    return M.toarray().astype(np.float32, copy=False) if sp.issparse(M) else M


def maybe_sparse(M):
    """CSR when it saves memory (density below DENSE_MAX_DENSITY), dense otherwise."""
    if sp.issparse(M):
        return M.tocsr() if M.nnz / max(M.shape[0] * M.shape[1], 1) < DENSE_MAX_DENSITY else dense(M)
    nnz = np.count_nonzero(M)
    return sp.csr_matrix(M) if nnz / max(M.size, 1) < DENSE_MAX_DENSITY else M


def default_members(M, groups: np.ndarray, ratio: float, top: int | None = None) -> sp.csr_matrix:
    """Crisp support: chunk g is a member of attribute m iff I(g, m) > 0 and
    I(g, m) >= ratio · max over m' in m's group of I(g, m').

    Row-relative within a group, so it does not depend on the scale of the degrees (FCM memberships
    over 96 clusters are ~0.01 each): with ratio = 1 it is the crisp argmax (the RQ code), below 1 a
    chunk on a boundary belongs to every cluster it is nearly as close to. ``top`` caps the
    attributes per chunk and group (the strongest ones; exact ties with the top-th are kept).
    """
    D = dense(M)
    out = np.zeros(D.shape, dtype=bool)
    for g in np.unique(groups):
        cols = np.flatnonzero(groups == g)
        block = D[:, cols]
        mx = block.max(axis=1, keepdims=True)
        keep = (block > 0) & (block >= ratio * mx)
        if top is not None and top < len(cols):
            # the top-th largest value per row (partition, not a full sort: 1M × 96 stays cheap);
            # exact ties with it are kept too, which only matters for identical degrees
            kth = -np.partition(-block, top - 1, axis=1)[:, top - 1:top]
            keep &= block >= kth
        out[:, cols] = keep
    return sp.csr_matrix(out)


# ---- the "rq" family: RQ-KMeans levels with FCM memberships ---------------------------------

def _fcm_level(R: np.ndarray, C: np.ndarray, config) -> np.ndarray:
    U = ops.fcm_memberships(R, C, m=float(config.fcm_m), top_k=config.fcm_top_k)
    if config.fcm_normalize == "max":
        U = U / np.maximum(U.max(axis=1, keepdims=True), 1e-30)
    return np.asarray(U, dtype=np.float32)


def _rq_memberships(X: np.ndarray, codebooks: list, config):
    """Codes, FCM blocks and final residual norms of X against fixed codebooks. A small batch (the
    new chunks of an add) runs without torch (index/small_batch.py)."""
    from . import small_batch
    if small_batch.available(len(X)):
        return small_batch.rq_memberships(X, codebooks, config.fcm_m, config.fcm_top_k, config.fcm_normalize)
    n, L = len(X), len(codebooks)
    blocks = [np.empty((n, C.shape[0]), np.float32) for C in codebooks]
    codes = np.empty((n, L), np.int64)
    resid = np.empty(n, np.float32)
    # row blocks: the residuals of one block at a time, never a second n×d copy of the embeddings
    for s in range(0, n, RQ_ROW_BLOCK):
        R = np.array(X[s:s + RQ_ROW_BLOCK], dtype=np.float32, copy=True)
        for lvl, C in enumerate(codebooks):
            blocks[lvl][s:s + len(R)] = _fcm_level(R, C, config)
            lab, _ = ops.kmeans_assign(R, C)
            codes[s:s + len(R), lvl] = np.asarray(lab, dtype=np.int64)
            R -= C[codes[s:s + len(R), lvl]]
        resid[s:s + len(R)] = (R * R).sum(axis=1)
    return codes, blocks, resid


def _rq_result(codebooks, codes, blocks, resid, sizes, config) -> FamilyResult:
    names, groups = [], []
    for lvl, C in enumerate(codebooks):
        names += [f"L{lvl}.c{j}" for j in range(C.shape[0])]
        groups += [lvl] * C.shape[0]
    M = np.concatenate(blocks, axis=1) if blocks else np.zeros((len(codes), 0), np.float32)
    groups = np.asarray(groups, np.int32)
    # crisp members of an RQ attribute: per level, the chunk's nearest cluster (its RQ code, eq. 11)
    # and its second nearest when nearly as close (membership >= member_ratio · the largest): boundary
    # chunks are what join (bridge) nodes connect. FCM degrees at one level are nearly uniform
    # (distances concentrate in high dimensions), so without the cap of 2 a ratio rule admits
    # most clusters of a level.
    members = default_members(M, groups, config.member_ratio, top=RQ_MEMBER_TOP)
    state = {f"codebook_{i}": np.ascontiguousarray(C, dtype=np.float32) for i, C in enumerate(codebooks)}
    return FamilyResult(M, names, groups, members, state,
                        {"codes": codes.astype(np.int64), "residual_sq": resid}, {"sizes": list(sizes)})


def rq_fit(chunks: ChunkView, embeddings: np.ndarray, config) -> FamilyResult:
    n = len(embeddings)
    if n == 0:
        raise ValueError("cannot cluster an empty corpus")
    mppc = config.rq_max_points_per_centroid
    rq = ops.rq_kmeans(np.ascontiguousarray(embeddings, dtype=np.float32), tuple(config.rq_sizes),
                       n_iter=config.rq_iters, seed=config.seed, max_points_per_centroid=mppc)
    books = [np.asarray(C, dtype=np.float32) for C in rq.codebooks]
    codes, blocks, resid = _rq_memberships(embeddings, books, config)
    out = _rq_result(books, codes, blocks, resid, rq.sizes, config)
    out.info["inertia"] = [float(v) for v in rq.inertia]
    return out


def rq_transform(chunks: ChunkView, embeddings: np.ndarray, config, state: dict) -> FamilyResult:
    books = [state[f"codebook_{i}"] for i in range(len(state))]
    codes, blocks, resid = _rq_memberships(embeddings, books, config)
    return _rq_result(books, codes, blocks, resid, [C.shape[0] for C in books], config)


register_family("rq", rq_fit, rq_transform)


# ---- the combined context ------------------------------------------------------------------

@dataclass
class FamilyBlock:
    name: str
    weight: float
    matrix: object            # weighted (n, m_f): ndarray or CSR
    members: sp.csr_matrix    # (n, m_f) bool
    names: list
    groups: np.ndarray
    state: dict
    rows: dict
    info: dict


class FuzzyContext:
    """I = [w_1·M_1 | w_2·M_2 | ...]: chunks × attributes, stored per family (dense or CSR)."""

    def __init__(self, blocks: list[FamilyBlock]):
        self.blocks = blocks
        self._dense = None

    # -- shape and attribute table
    @property
    def n_chunks(self) -> int:
        return self.blocks[0].matrix.shape[0] if self.blocks else 0

    @property
    def n_attributes(self) -> int:
        return sum(b.matrix.shape[1] for b in self.blocks)

    @property
    def attr_names(self) -> list[str]:
        return [f"{b.name}:{x}" for b in self.blocks for x in b.names]

    @property
    def attr_family(self) -> np.ndarray:
        """(M,) index into ``family_names`` of each attribute."""
        return np.concatenate([np.full(b.matrix.shape[1], i, np.int32) for i, b in enumerate(self.blocks)]) \
            if self.blocks else np.zeros(0, np.int32)

    @property
    def family_names(self) -> list[str]:
        return [b.name for b in self.blocks]

    @property
    def attr_group(self) -> np.ndarray:
        """(M,) group id, unique across families (family i's group g -> a distinct int)."""
        out, base = [], 0
        for b in self.blocks:
            out.append(b.groups + base)
            base += int(b.groups.max()) + 1 if len(b.groups) else 0
        return np.concatenate(out).astype(np.int32) if out else np.zeros(0, np.int32)

    def family_slice(self, name: str) -> slice:
        start = 0
        for b in self.blocks:
            stop = start + b.matrix.shape[1]
            if b.name == name:
                return slice(start, stop)
            start = stop
        raise KeyError(f"no attribute family {name!r} (have {self.family_names})")

    def block(self, name: str) -> FamilyBlock:
        for b in self.blocks:
            if b.name == name:
                return b
        raise KeyError(f"no attribute family {name!r} (have {self.family_names})")

    # -- matrices
    def dense(self) -> np.ndarray:
        """I as a dense float32 (n, M) array (cached; the kernels take dense input)."""
        if self._dense is None:
            mats = [dense(b.matrix) for b in self.blocks]
            self._dense = np.ascontiguousarray(np.concatenate(mats, axis=1)) if mats else \
                np.zeros((0, 0), np.float32)
        return self._dense

    def csr(self) -> sp.csr_matrix:
        return sp.hstack([sp.csr_matrix(b.matrix) for b in self.blocks], format="csr", dtype=np.float32)

    def members(self) -> sp.csr_matrix:
        """(n, M) bool crisp supports."""
        return sp.hstack([b.members for b in self.blocks], format="csr", dtype=bool)

    def invalidate(self):
        self._dense = None

    # -- incremental maintenance
    def keep_rows(self, keep: np.ndarray) -> None:
        for b in self.blocks:
            b.matrix = b.matrix[keep]
            if sp.issparse(b.matrix):
                b.matrix = b.matrix.tocsr()
            b.members = b.members[keep].tocsr()
            b.rows = {k: v[keep] for k, v in b.rows.items()}
        self.invalidate()


def _weighted(M, w: float):
    if w == 1.0:
        return M
    if sp.issparse(M):
        M = M.copy()
        M.data = np.clip(M.data * w, 0.0, 1.0).astype(np.float32)
        return M
    return np.clip(M * np.float32(w), 0.0, 1.0).astype(np.float32)


def _block_from(name: str, w: float, res: FamilyResult, config) -> FamilyBlock:
    M = maybe_sparse(_weighted(res.matrix, w))
    members = res.members
    if members is None:
        members = default_members(M, res.groups, config.member_ratio)
    members = sp.csr_matrix(members, dtype=bool)
    if members.shape != M.shape:
        raise ValueError(f"family {name!r} returned members of shape {members.shape}, matrix {M.shape}")
    return FamilyBlock(name, w, M, members, list(res.names), res.groups, res.state, res.rows, res.info)


def family_order(config) -> list[tuple[str, float]]:
    fw = config.family_weights
    if not isinstance(fw, dict) or not fw:
        raise ValueError(f"Config.family_weights must be a non-empty dict name -> weight, got {fw!r}")
    out = []
    for name, w in fw.items():
        if name not in FAMILIES:
            raise ValueError(f"Config.family_weights names an unknown family {name!r} "
                             f"(registered: {sorted(FAMILIES)})")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w <= 1:
            raise ValueError(f"Config.family_weights[{name!r}] must be a number in [0, 1], got {w!r}")
        if w > 0:
            out.append((name, float(w)))
    if not out:
        raise ValueError("Config.family_weights gives every family weight 0; at least one must be > 0")
    return out


def build_context(chunks: ChunkView, embeddings: np.ndarray, config) -> FuzzyContext:
    blocks = []
    for name, w in family_order(config):
        res = _as_result(FAMILIES[name].fit(chunks, embeddings, config), name, len(chunks))
        blocks.append(_block_from(name, w, res, config))
    return FuzzyContext(blocks)


def extend_context(ctx: FuzzyContext, all_chunks: ChunkView, new_rows: np.ndarray,
                   embeddings_all: np.ndarray, config) -> None:
    """Append the rows of the chunks ``new_rows`` (indices into all_chunks, at the end) to ``ctx``.

    Families with a ``transform`` map only the new chunks through their fitted state; the others
    are refitted over all chunks and reconciled to the existing columns by name.
    """
    n_old = ctx.n_chunks
    sub = ChunkView([all_chunks.texts[i] for i in new_rows], [all_chunks.titles[i] for i in new_rows],
                    [all_chunks.doc_ids[i] for i in new_rows], all_chunks.positions[new_rows])
    for b in ctx.blocks:
        fam = FAMILIES.get(b.name)
        if fam is None:
            raise ValueError(f"the index uses attribute family {b.name!r}, which is not registered in this "
                             "process (import the module that registers it before add/delete)")
        if fam.transform is not None:
            res = _as_result(fam.transform(sub, embeddings_all[new_rows], config, b.state), b.name, len(sub))
            if res.names != b.names:
                raise ValueError(f"family {b.name!r}: transform returned different columns than fit")
            nb = _block_from(b.name, b.weight, res, config)
            _append_block(b, nb)
        else:
            res = _as_result(fam.fit(all_chunks, settled(embeddings_all), config), b.name, len(all_chunks))
            _reconcile(b, res, config)
    ctx.invalidate()
    assert ctx.n_chunks == n_old + len(new_rows)


def _append_block(b: FamilyBlock, o: FamilyBlock) -> None:
    if sp.issparse(b.matrix) or sp.issparse(o.matrix):
        b.matrix = maybe_sparse(sp.vstack([sp.csr_matrix(b.matrix), sp.csr_matrix(o.matrix)], format="csr"))
    else:
        b.matrix = np.ascontiguousarray(np.concatenate([b.matrix, o.matrix], axis=0))
    b.members = sp.vstack([b.members, o.members], format="csr")
    for k, v in o.rows.items():
        b.rows[k] = np.concatenate([b.rows[k], v], axis=0) if k in b.rows else v


def _reconcile(b: FamilyBlock, res: FamilyResult, config) -> None:
    """Refitted family -> the block's existing column order, new names appended, vanished names zero."""
    M = dense(_weighted(res.matrix, b.weight))
    pos = {n: i for i, n in enumerate(res.names)}
    new_names = [n for n in res.names if n not in set(b.names)]
    names = list(b.names) + new_names
    cols = [pos.get(n, -1) for n in names]
    out = np.zeros((M.shape[0], len(names)), np.float32)
    for j, c in enumerate(cols):
        if c >= 0:
            out[:, j] = M[:, c]
    gmap = {n: res.groups[i] for i, n in enumerate(res.names)}
    groups = np.array([gmap.get(n, b.groups[j] if j < len(b.groups) else 0) for j, n in enumerate(names)], np.int32)
    b.matrix = maybe_sparse(out)
    b.names, b.groups = names, groups
    if res.members is None:
        b.members = default_members(b.matrix, groups, config.member_ratio)
    else:
        Mem = sp.csc_matrix(res.members, dtype=bool)
        b.members = sp.hstack([Mem[:, c] if c >= 0 else sp.csc_matrix((M.shape[0], 1), dtype=bool)
                               for c in cols], format="csr")
    b.state, b.rows = res.state, res.rows


# ---- the lexical families (index/lexical) as context families -----------------------------------
#
# With Config.family_weights = {"rq": 1, "title": w, ...} a lexical family joins the fuzzy context of
# the index (stored with it, and seen by the concept graph: meet nodes of a topic and an entity are the
# "chunks that share an entity and a topic"). The graph code works on the dense context, so this is
# for small corpora; query-time spreading (query/spread.py) does not need it: it reuses these blocks
# when the index has them and otherwise builds the lexical context from the chunk texts once per index.


def _lexical_fit(name: str) -> Callable:
    def fit(chunks, embeddings, config):
        fam = lexical.BUILDERS[name]([t or "" for t in chunks.titles], list(chunks.texts))
        members = sp.csr_matrix(fam.incidence >= lexical.MEMBER_DEGREE, dtype=bool)
        return FamilyResult(fam.incidence, fam.attributes, members=members, state=lexical.family_state(fam),
                            info={"attributes": len(fam.vocab), "nnz": int(fam.incidence.nnz),
                                  "linking_attributes": int((fam.df >= 2).sum())})
    fit.__name__ = f"{name}_fit"
    return fit


for _name in lexical.BUILDERS:
    register_family(_name, _lexical_fit(_name))   # no transform: df-based weights are refitted on add


# the names the distributed executor imports (distributed/build.py, distributed/worker.py)
as_result = _as_result
block_from = _block_from
