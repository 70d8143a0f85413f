"""Spreading activation over a fuzzy incidence: one batched hop chunks → attributes → chunks.

For query q with seed chunks s of degrees ρ(q, s) and query activations μ(q, a) (a ⊗ b = max(0, a + b − 1)):

    hop(q, c) = max( max_a μ(q,a) ⊗ I(c,a),
                     max_{s : c = s or doc(c) ≠ doc(s)} max_a ρ(q,s) ⊗ I(s,a) ⊗ I(c,a) )

i.e. two max-plus steps of eq. 16 (chunks → attributes, attributes → chunks) with the no-sibling
rule: a seed never spreads to the other chunks of its own document. The float64 definition is
:func:`contextrag.ref.spread_hop`.

The incidence is prepared once (:class:`SpreadIncidence`: I and Iᵀ in CSR, the document codes, and
device copies on demand), so a query touches only the seeds' rows and the columns of the attributes
they activate above 0. Backends: "ref" (float64, dense), "cpu" (C++/OpenMP, queries in parallel),
"triton" and "cuda" (one program/block per activated attribute column, atomic max into the output;
the few seed rows are gathered into activation entries with torch on the device).

NumPy in, NumPy out on the "cpu" and "ref" backends without importing torch: this is the op a CPU
query calls, and torch's import would be most of a cold start.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from .. import ref
from ._backend import native, select
from ._registry import IMPLS, register
from ._tensor import accepts_cupy, is_torch_tensor
from ._types import Array, ArrayT, Incidence

if TYPE_CHECKING:
    import torch

__all__ = ["SpreadIncidence", "spread_hop", "gather_py"]


_is_torch = is_torch_tensor     # decided without importing torch (a CPU query never needs it)


class SpreadIncidence:
    """A chunks × attributes fuzzy incidence prepared for :func:`spread_hop`.

    I: (n, M) scipy.sparse (or a dense NumPy/torch/CuPy array) with degrees in [0, 1], float32 or float64; doc: optional
    (n,) integer document code per row (rows of one document are siblings; give virtual rows codes of
    their own). Validated and transposed once; device copies are made on first use per device.
    """

    @accepts_cupy
    def __init__(self, I: Any, doc: Any = None) -> None:   # I: Incidence, doc: Array (narrowed by hand)
        if _is_torch(doc):
            doc = doc.cpu().numpy()
        if _is_torch(I):
            import torch
            I = I.detach().cpu()
            I = sp.csr_matrix(I.to_dense().numpy() if I.layout != torch.strided else I.numpy())
        elif not sp.issparse(I):
            a = np.asarray(I)
            if a.ndim != 2:
                raise ValueError(f"I must be 2-D (chunks × attributes), got shape {a.shape}")
            I = sp.csr_matrix(a)
        if len(I.shape) != 2:
            raise ValueError(f"I must be 2-D (chunks × attributes), got shape {I.shape}")
        I = sp.csr_matrix(I)
        if I.dtype not in (np.float32, np.float64):
            raise TypeError(f"I must be float32 or float64, got dtype {I.dtype}")
        I.sum_duplicates()
        _check_degrees(I)
        T = I.T.tocsr()
        T.sort_indices()
        self._fill(I, T, doc, t_owned=True)

    @classmethod
    def from_transposed(cls, I: sp.csr_matrix, T: sp.csr_matrix, doc: np.ndarray | None = None, *,
                        t_owned: bool = False) -> "SpreadIncidence":
        """The incidence ``I`` (CSR, float32/float64, degrees in [0, 1], no duplicate entries) given with
        its transpose ``T`` (CSR, each row's indices ascending), which the caller assembled without
        transposing ``I`` (an index keeps its lexical families by columns: index/prepared.py). Equal to
        ``SpreadIncidence(I, doc)`` when ``T`` is ``I``'s transpose (tested); the shapes and entry
        counts are checked, the entries are not compared. I's arrays are taken, not copied, where
        their dtypes are the incidence's; ``t_owned``: T is the caller's to give away, so its columns
        are put in degree order in place (not in a copy: GBs at a million chunks)."""
        if not all(sp.issparse(M) and M.format == "csr" for M in (I, T)):
            raise TypeError("I and T must be scipy CSR matrices")
        if T.shape != I.shape[::-1] or T.nnz != I.nnz or T.dtype != I.dtype:
            raise ValueError(f"T must be I's transpose: I is {I.dtype} {I.shape} with {I.nnz} entries, "
                             f"T {T.dtype} {T.shape} with {T.nnz}")
        if I.dtype not in (np.float32, np.float64):
            raise TypeError(f"I must be float32 or float64, got dtype {I.dtype}")
        if not (I.has_canonical_format and T.has_sorted_indices):
            raise ValueError("I must have no duplicate entries and T's rows sorted indices")
        _check_degrees(I)
        self = cls.__new__(cls)
        self._fill(I, T, doc, t_owned)
        return self

    def _fill(self, I: sp.csr_matrix, T: sp.csr_matrix, doc, t_owned: bool = False) -> None:
        """Take I's and T's arrays (T's reordered in place when ``t_owned``, else copied first)."""
        self.shape = (int(I.shape[0]), int(I.shape[1]))
        self.dtype = I.dtype
        ix = index_dtype(self.shape)
        self.indptr = I.indptr.astype(np.int64, copy=False)
        self.indices: np.ndarray = I.indices.astype(ix, copy=False)
        self.data = np.ascontiguousarray(I.data)
        self.t_indptr = T.indptr.astype(np.int64, copy=False)
        t_indices: np.ndarray = T.indices.astype(ix, copy=False)
        t_data = np.ascontiguousarray(T.data)
        moves = _by_degree(self.t_indptr, t_data)
        if moves is not None:       # reorder in place only arrays that are ours to change
            if t_indices is T.indices and not (t_owned and t_indices.flags.writeable):
                t_indices = t_indices.copy()
            if t_data is T.data and not (t_owned and t_data.flags.writeable):
                t_data = t_data.copy()
            _apply_moves(moves, t_indices, t_data)
        self.t_indices, self.t_data = t_indices, t_data
        self.by_degree = True
        if doc is not None:
            doc = np.asarray(doc)
            if doc.shape != (self.shape[0],) or not np.issubdtype(doc.dtype, np.integer):
                raise ValueError(f"doc must be an integer array of shape ({self.shape[0]},), "
                                 f"got {doc.dtype} {doc.shape}")
            doc = doc.astype(np.int64)
        self.doc = doc
        self._dev: dict[str, dict[str, Any]] = {}

    _FIELDS = ("indptr", "indices", "data", "t_indptr", "t_indices", "t_data")
    # Iᵀ's rows (the attributes' columns) hold their entries in decreasing degree, so the hop's walk of a
    # column stops at the first entry that no longer raises an item (csrc/cpu/spread.cpp); arrays stored
    # before that order was kept are read in index order, and walked whole
    by_degree = False

    def in_degree_order(self) -> "SpreadIncidence":
        """This incidence with each column's entries in decreasing degree (itself when they are)."""
        if self.by_degree:
            return self
        out = SpreadIncidence.__new__(SpreadIncidence)
        out.__dict__.update(self.__dict__)
        moves = _by_degree(np.asarray(self.t_indptr), np.asarray(self.t_data))
        if moves is not None:
            out.t_indices, out.t_data = np.array(self.t_indices), np.array(self.t_data)
            _apply_moves(moves, out.t_indices, out.t_data)
        out.by_degree, out._dev = True, {}
        return out

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Its prepared arrays (I and Iᵀ in CSR, the shape, the document codes), to store with an index."""
        out = {k: getattr(self, k) for k in self._FIELDS}
        out["shape"] = np.asarray(self.shape, np.int64)
        if self.by_degree:
            out["by_degree"] = np.ones(1, np.int8)
        if self.doc is not None:
            out["doc"] = self.doc
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "SpreadIncidence":
        """The inverse of :meth:`to_arrays`, neither validating nor transposing again: for arrays this
        class prepared and an index stored (checksummed), so a load maps them instead of rebuilding."""
        self = cls.__new__(cls)
        for k in cls._FIELDS:
            setattr(self, k, arrays[k])
        rows, cols = (int(x) for x in arrays["shape"])
        self.shape = (rows, cols)
        self.dtype = self.data.dtype
        want = {"indptr": (self.shape[0] + 1,), "t_indptr": (self.shape[1] + 1,)}
        for k, shp in want.items():
            if getattr(self, k).shape != shp:
                raise ValueError(f"stored spreading incidence: {k} has shape {getattr(self, k).shape}, expected {shp}")
        if {self.indices.shape, self.t_indices.shape, self.t_data.shape} != {self.data.shape}:
            raise ValueError("stored spreading incidence: indices and data disagree in length")
        if self.indices.dtype != self.t_indices.dtype or self.indices.dtype not in (np.int32, np.int64):
            raise ValueError(f"stored spreading incidence: indices are {self.indices.dtype} and "
                             f"{self.t_indices.dtype}, expected both int32 or both int64")
        doc = arrays.get("doc")
        if doc is not None and doc.shape != (self.shape[0],):
            raise ValueError(f"stored spreading incidence: doc has shape {doc.shape}, expected ({self.shape[0]},)")
        self.doc = doc
        self.by_degree = bool("by_degree" in arrays and arrays["by_degree"].size and arrays["by_degree"][0])
        self._dev = {}
        return self

    @property
    def n(self) -> int:
        return self.shape[0]

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    def csr(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=self.shape)

    def on(self, device: torch.device) -> dict[str, Any]:
        """Torch copies of the arrays on ``device`` (cached)."""
        import torch
        key = str(device)
        if key not in self._dev:
            names = ("indptr", "indices", "data", "t_indptr", "t_indices", "t_data")
            # the device kernels read int64 indices: a stored int32 index is widened on the device
            d: dict[str, Any] = {k: torch.from_numpy(getattr(self, k)).to(device) for k in names}
            d["indices"], d["t_indices"] = d["indices"].long(), d["t_indices"].long()
            d["doc"] = None if self.doc is None else torch.from_numpy(self.doc).to(device)
            self._dev[key] = d
        return self._dev[key]


def _seeds_numpy(seeds, seed_deg: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(Q, S) int64 seeds and (Q, S) degrees as NumPy arrays (the checks of :func:`_seeds`)."""
    s = seeds.detach().cpu().numpy() if _is_torch(seeds) else np.asarray(seeds)
    if s.dtype.kind not in "iu":
        raise TypeError(f"seeds must be an integer array, got {s.dtype}")
    d = seed_deg
    if d.dtype.kind != "f":
        raise TypeError(f"seed_deg must be float, got {d.dtype}")
    if s.ndim != 2 or d.shape != s.shape:
        raise ValueError(f"seeds and seed_deg must be (Q, S) of one shape, got {tuple(s.shape)} and {tuple(d.shape)}")
    if s.size:
        if int(s.max()) >= n or int(s.min()) < -1:
            raise ValueError(f"seeds must be chunk indices in [0, {n}) or -1 (no seed)")
        if not bool(np.isfinite(d).all()) or float(d.min()) < 0 or float(d.max()) > 1:
            raise ValueError("seed_deg must hold degrees in [0, 1]")
    return np.ascontiguousarray(s, dtype=np.int64), d


def _seeds(seeds, seed_deg, n: int):
    """(Q, S) int64 seeds and (Q, S) degrees as torch tensors (for torch degrees)."""
    import torch
    if not isinstance(seed_deg, torch.Tensor):
        raise TypeError(f"seed_deg must be a numpy.ndarray or torch.Tensor, got {type(seed_deg).__name__}")
    s = torch.as_tensor(seeds) if not isinstance(seeds, torch.Tensor) else seeds
    if s.dtype.is_floating_point or s.dtype == torch.bool:
        raise TypeError(f"seeds must be an integer array, got {s.dtype}")
    d = torch.as_tensor(seed_deg)
    if not d.dtype.is_floating_point:
        raise TypeError(f"seed_deg must be float, got {d.dtype}")
    if s.dim() != 2 or d.shape != s.shape:
        raise ValueError(f"seeds and seed_deg must be (Q, S) of one shape, got {tuple(s.shape)} and {tuple(d.shape)}")
    if s.numel():
        if int(s.max()) >= n or int(s.min()) < -1:
            raise ValueError(f"seeds must be chunk indices in [0, {n}) or -1 (no seed)")
        if not bool(torch.isfinite(d).all()) or float(d.min()) < 0 or float(d.max()) > 1:
            raise ValueError("seed_deg must hold degrees in [0, 1]")
    return s.to(torch.int64), d


def _mu_csr(mu, Q: int, M: int, dtype) -> sp.csr_matrix | None:
    if mu is None:
        return None
    if _is_torch(mu):
        mu = mu.detach().cpu()
        import torch
        mu = mu.to_dense().numpy() if mu.layout != torch.strided else mu.numpy()
    # (scipy-stubs types issparse's narrowing as SparseABC, which csr_matrix's overloads do not name)
    m = sp.csr_matrix(mu) if sp.issparse(mu) else sp.csr_matrix(np.asarray(mu, dtype=np.float64))  # type: ignore[call-overload]
    if m.shape != (Q, M):
        raise ValueError(f"mu must be (Q, M) = ({Q}, {M}), got {m.shape}")
    m.sum_duplicates()
    m.eliminate_zeros()
    if m.nnz and (not np.isfinite(m.data).all() or m.data.min() < 0 or m.data.max() > 1):
        raise ValueError("mu must hold degrees in [0, 1]")
    return sp.csr_matrix(m, dtype=dtype)


@accepts_cupy
def spread_hop(G: SpreadIncidence, seeds: Array, seed_deg: ArrayT, mu: Incidence | None = None, *,
               backend: str | None = None) -> ArrayT:
    """(Q, n) hop degrees for a batch of Q queries (definition: module docstring).

    Args:
        G: The prepared incidence, n chunks × M attributes.
        seeds: ``(Q, S)`` integer chunk indices, −1 for no seed.
        seed_deg: ``(Q, S)`` seed degrees ρ in [0, 1], float.
        mu: Optional ``(Q, M)`` query activations in [0, 1] (dense or scipy.sparse).
        backend: "ref", "cpu", "triton" or "cuda"; None picks the best available.

    Returns:
        ``(Q, n)`` hop degrees in the incidence's dtype: NumPy when ``seed_deg`` is NumPy (computed
        without importing torch on the "cpu" and "ref" backends), otherwise a torch tensor on
        ``seed_deg``'s device.
    """
    if not isinstance(G, SpreadIncidence):
        raise TypeError(f"G must be a SpreadIncidence (prepare the incidence once), got {type(G).__name__}")
    if isinstance(seed_deg, np.ndarray):
        s, d = _seeds_numpy(seeds, seed_deg, G.n)
        m = _mu_csr(mu, s.shape[0], G.shape[1], G.dtype)
        name, impl = select("spread_hop", "cpu", backend, IMPLS["spread_hop"])
        d = np.ascontiguousarray(d, dtype=G.dtype)
        if name in _NUMPY_IMPLS:
            return _NUMPY_IMPLS[name](G, s, d, m)
        import torch      # the Triton interpreter on the CPU
        hop: np.ndarray = impl(G, torch.from_numpy(s), torch.from_numpy(d), m).detach().cpu().numpy()
        return hop
    import torch
    s, d = _seeds(seeds, seed_deg, G.n)
    m = _mu_csr(mu, s.shape[0], G.shape[1], G.dtype)
    _, impl = select("spread_hop", d.device, backend, IMPLS["spread_hop"])
    hop_t: torch.Tensor = impl(G, s, d.to(torch.float64 if G.dtype == np.float64 else torch.float32), m)
    return hop_t


# ---- implementations -----------------------------------------------------------------------

# The "ref" and "cpu" backends on NumPy arrays: s (Q, S) int64, d (Q, S) in the incidence's dtype.
# Their registered entries below adapt torch tensors to them.

def _ref_numpy(G, s: np.ndarray, d: np.ndarray, m) -> np.ndarray:
    out = ref.spread_hop(G.csr(), s, d, None if m is None else m.toarray(), G.doc)
    hop: np.ndarray = out.astype(d.dtype, copy=False)
    return hop


def _check_degrees(I: sp.csr_matrix) -> None:
    if I.nnz:
        if not np.isfinite(I.data).all():
            raise ValueError("I contains NaN or inf")
        lo, hi = float(I.data.min()), float(I.data.max())
        if lo < 0.0 or hi > 1.0:
            raise ValueError(f"I must hold fuzzy degrees in [0, 1], got range [{lo:g}, {hi:g}]")


def index_dtype(shape: tuple) -> type:
    """The dtype of an incidence's row and column indices: int32 where both dimensions fit it (half
    the bytes of int64 to build, store and map: 43 million entries twice at a million chunks)."""
    return np.int32 if max(shape, default=0) <= np.iinfo(np.int32).max else np.int64


def _by_degree(indptr: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The moves (dst, src) that put each CSR row's entries in decreasing value (ties keep their
    order): ``a[dst] = a[src]`` for the indices and the data, or None when every row already has them
    so. Only the rows out of order are sorted and moved: a family whose degree is one weight per
    attribute (the term family) needs none of its 37 million entries moved at a million chunks.
    float32 degrees (≥ 0, so their bits order as their values): one stable sort of (row, ~bits) as
    uint64 keys, ~3 s for 43 million entries where a lexsort took 28 s."""
    rise = np.flatnonzero(data[1:] > data[:-1]) + 1           # entries above their predecessor
    rows = np.searchsorted(indptr, rise, side="right") - 1
    bad = np.unique(rows[indptr[rows] != rise])               # ... in the same row
    if bad.size == 0:
        return None
    lens = (indptr[bad + 1] - indptr[bad]).astype(np.int64)
    first = np.cumsum(lens) - lens
    pos = np.repeat(indptr[bad].astype(np.int64) - first, lens) + np.arange(int(lens.sum()), dtype=np.int64)
    rank = np.repeat(np.arange(bad.size, dtype=np.int64), lens)    # the row among those sorted
    sub = data[pos]
    if data.dtype == np.float32 and bad.size < 1 << 32:
        bits = np.where(sub > 0, sub, np.float32(0)).astype(np.float32).view(np.uint32)
        key = (rank.astype(np.uint64) << np.uint64(32)) | (~bits).astype(np.uint64)
        within = np.argsort(key, kind="stable")
    else:
        within = np.lexsort((-sub, rank))
    return pos, pos[within]


def _apply_moves(moves: tuple[np.ndarray, np.ndarray], *arrays: np.ndarray) -> None:
    dst, src = moves
    for a in arrays:
        a[dst] = a[src]          # the right side is gathered first: in place is safe


def gather_py(G: SpreadIncidence, s, d, m) -> np.ndarray:
    """The NumPy gather (per seed: its row, then the activated columns): the fallback without _C.
    s, d: NumPy arrays (or CPU torch tensors)."""
    s, d = (x.cpu().numpy() if _is_torch(x) else np.asarray(x) for x in (s, d))
    Q, n = s.shape[0], G.n
    dt = G.data.dtype
    out = np.zeros((Q, n), dt)
    one = dt.type(1)
    for q in range(Q):
        acts = []
        if m is not None:
            r0, r1 = m.indptr[q], m.indptr[q + 1]
            acts += [(a, v, -1) for a, v in zip(m.indices[r0:r1], m.data[r0:r1]) if v > 0]
        for sj, rj in zip(s[q].tolist(), d[q].astype(dt)):
            if sj < 0:
                continue
            p0, p1 = G.indptr[sj], G.indptr[sj + 1]
            v = (rj + G.data[p0:p1]) - one
            acts += [(a, x, sj) for a, x in zip(G.indices[p0:p1][v > 0], v[v > 0])]
        for a, v, me in acts:
            b, e = G.t_indptr[a], G.t_indptr[a + 1]
            c, t = G.t_indices[b:e], (v + G.t_data[b:e]) - one
            if me >= 0 and G.doc is not None:
                keep = (G.doc[c] != G.doc[me]) | (c == me)
                c, t = c[keep], t[keep]
            np.maximum.at(out[q], c, t)
    return out


def _cpu_numpy(G, s: np.ndarray, d: np.ndarray, m) -> np.ndarray:
    C = native()
    name = "spread_hop_f64" if G.dtype == np.float64 else "spread_hop_f32"
    if G.indices.dtype == np.int32 and G.t_indices.dtype == np.int32:
        name += "_i32"
    fn = getattr(C, name, None) if C else None
    if fn is None:
        return gather_py(G, s, d, m)
    out: np.ndarray = fn(G.indptr, G.indices, G.data, G.t_indptr, G.t_indices, G.t_data, G.n, G.doc, s, d,
                         None if m is None else m.indptr.astype(np.int64),
                         None if m is None else m.indices.astype(np.int64), None if m is None else m.data,
                         bool(G.by_degree))
    return out


_NUMPY_IMPLS = {"ref": _ref_numpy, "cpu": _cpu_numpy}


@register("spread_hop", "ref")
def _ref_spread(G, s, d, m):
    import torch
    out = _ref_numpy(G, s.cpu().numpy(), d.cpu().numpy(), m)
    return torch.from_numpy(out).to(device=d.device, dtype=d.dtype)


@register("spread_hop", "cpu")
def _cpu_spread(G, s, d, m):
    import torch
    return torch.from_numpy(_cpu_numpy(G, s.cpu().numpy(), d.cpu().numpy(), m))


def activation_entries(G: SpreadIncidence, s: torch.Tensor, d: torch.Tensor, m, device):
    """The chunks → attributes step as flat entries (q, a, v, sdoc, self) on ``device``: every seed
    row entry with v = (ρ + I(s, a)) − 1 > 0 (self = the seed) and every μ entry (self = −1)."""
    import torch
    g = G.on(device)
    s, d = s.to(device), d.to(device=device, dtype=g["data"].dtype)
    Q, S = s.shape
    qi = torch.arange(Q, device=device).repeat_interleave(S)
    sf, df_ = s.reshape(-1), d.reshape(-1)
    ok = sf >= 0
    qi, sf, df_ = qi[ok], sf[ok], df_[ok]
    start, lens = g["indptr"][sf], g["indptr"][sf + 1] - g["indptr"][sf]
    rep = torch.repeat_interleave(torch.arange(sf.numel(), device=device), lens)
    first = torch.cumsum(lens, 0) - lens
    pos = start[rep] + torch.arange(rep.numel(), device=device) - first[rep]
    v = (df_[rep] + g["data"][pos]) - 1.0
    keep = v > 0
    rep, pos, v = rep[keep], pos[keep], v[keep]
    eq, ea, ev, eself = qi[rep], g["indices"][pos], v, sf[rep]
    esdoc = g["doc"][eself] if g["doc"] is not None else torch.zeros_like(eself)
    if m is not None and m.nnz:
        mq = torch.from_numpy(np.repeat(np.arange(Q, dtype=np.int64), np.diff(m.indptr))).to(device)
        ma = torch.from_numpy(m.indices.astype(np.int64)).to(device)
        mv = torch.from_numpy(m.data).to(device=device, dtype=ev.dtype)
        neg = torch.full_like(mq, -1)
        eq, ea, ev = torch.cat([mq, eq]), torch.cat([ma, ea]), torch.cat([mv, ev])
        esdoc, eself = torch.cat([neg, esdoc]), torch.cat([neg, eself])
    return eq.contiguous(), ea.contiguous(), ev.contiguous(), esdoc.contiguous(), eself.contiguous()


@register("spread_hop", "triton")
def _triton_spread(G, s, d, m):
    from contextrag.kernels import spread as ks
    device = d.device
    ent = activation_entries(G, s, d, m, device)
    g = G.on(device)
    return ks.spread_columns(g["t_indptr"], g["t_indices"], g["t_data"], g["doc"], ent, s.shape[0], G.n)


@register("spread_hop", "cuda")
def _cuda_spread(G, s, d, m):
    import torch

    from ._cuda import DTYPE_CODE, cu, stream
    device = d.device
    eq, ea, ev, esdoc, eself = activation_entries(G, s, d, m, device)
    g = G.on(device)
    out = torch.zeros((s.shape[0], G.n), dtype=g["t_data"].dtype, device=device)
    if eq.numel() and G.n:
        cu().spread_hop(DTYPE_CODE[out.dtype], g["t_indptr"].data_ptr(), g["t_indices"].data_ptr(),
                         g["t_data"].data_ptr(), 0 if g["doc"] is None else g["doc"].data_ptr(),
                         eq.data_ptr(), ea.data_ptr(), ev.to(out.dtype).contiguous().data_ptr(), esdoc.data_ptr(),
                         eself.data_ptr(), int(eq.numel()), out.data_ptr(), int(G.n), stream(out))
    return out
