"""The shard worker: owns one contiguous row range of the embeddings (and its residuals per level).

Plain Python so it runs (and is tested) without Ray; ``contextrag.distributed.cluster`` wraps it as a
Ray actor with restarts. Every method is a pure function of

* the shard file on disk (the embeddings, written once by the embedding stage),
* the per-level code files this worker persisted (``codes_L{l}.npy`` in its state directory),
* and its arguments (codebooks, centroids, parameters),

with in-memory caches that are only shortcuts. An actor that dies and restarts (Ray re-runs
``__init__``) reloads its shard and recomputes whatever cache a retried call needs, so a retried call
returns the same bits as the first attempt would have.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch

from ..ops._backend import select
from ..ops._registry import IMPLS
from ..ops import fcm_memberships, luk_down, luk_up, meet_cardinality
from .layout import rowexact


def _atomic_save(path: str, arr: np.ndarray) -> None:
    tmp = f"{path}.tmp{os.getpid()}.npy"
    np.save(tmp, arr)
    os.replace(tmp, path)


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


class ShardWorker:
    """One shard: rows [start, stop) of an n_total-row embedding matrix stored in ``path`` (.npy)."""

    def __init__(self, shard_id: int, path: str, start: int, stop: int, n_total: int, state_dir: str, *,
                 device: str | None = None, backend: str | None = None, fault: dict | None = None):
        self.shard_id = int(shard_id)
        self.path = path
        self.start, self.stop, self.n_total = int(start), int(stop), int(n_total)
        self.state_dir = state_dir
        os.makedirs(state_dir, exist_ok=True)
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.backend = backend
        self.fault = fault
        X = np.load(path, mmap_mode=None)
        if X.ndim != 2 or X.shape[0] != self.stop - self.start:
            raise ValueError(f"shard file {path} has shape {X.shape}, expected ({self.stop - self.start}, d)")
        self.X = torch.from_numpy(np.ascontiguousarray(X)).to(self.device)
        self.wd = torch.float64 if self.X.dtype == torch.float64 else torch.float32
        _, self._assign = select("kmeans_assign", self.device, backend, IMPLS["kmeans_assign"])
        self._R = None          # residual entering level self._R_level
        self._R_level = -1
        self._labels = None     # (key, labels, d2) of the last assignment
        self._ctx = None        # (key, I_shard dense tensor)
        self._ext = {}          # extents cache: key -> tensor
        self.restarts_seen = self._count_start()

    # ---- bookkeeping --------------------------------------------------------------------------
    def _count_start(self) -> int:
        """How many times this shard's worker has started (a restart increments it)."""
        p = os.path.join(self.state_dir, "starts.txt")
        k = int(open(p).read()) + 1 if os.path.exists(p) else 1
        with open(p + ".tmp", "w") as f:
            f.write(str(k))
        os.replace(p + ".tmp", p)
        return k

    def _maybe_fail(self, where: str, **ctx) -> None:
        """Fault injection for tests: exit the process on the first matching call only."""
        f = self.fault
        if not f or f.get("shard") != self.shard_id or f.get("where") != where:
            return
        if any(f.get(k) is not None and f.get(k) != v for k, v in ctx.items()):
            return
        marker = f["marker"]
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(1)

    def info(self) -> dict:
        return {"shard": self.shard_id, "rows": int(self.X.shape[0]), "dim": int(self.X.shape[1]),
                "start": self.start, "stop": self.stop, "pid": os.getpid(), "device": str(self.device),
                "starts": self.restarts_seen, "dtype": str(self.X.dtype).replace("torch.", ""),
                "bytes": int(self.X.element_size() * self.X.numel())}

    # ---- residuals ------------------------------------------------------------------------------
    def _codes_path(self, level: int) -> str:
        return os.path.join(self.state_dir, f"codes_L{level}.npy")

    def _residual(self, level: int, books) -> torch.Tensor:
        """The residual entering ``level``: X − Σ_{j<level} C_j[code_j], with the same float ops
        (and order) as ops.rq_kmeans, from the persisted codes of the earlier levels."""
        if self._R_level == level:
            return self._R
        if self._R_level < 0 or self._R_level > level:
            self._R = self.X.to(self.wd).clone()
            self._R_level = 0
        while self._R_level < level:
            j = self._R_level
            codes = torch.from_numpy(np.load(self._codes_path(j))).to(self.device)
            C = torch.as_tensor(books[j]).to(device=self.device, dtype=self.wd)
            self._R -= C[codes]
            self._R_level += 1
        return self._R

    def _train(self, R, train):
        if train is None:
            return R, self.start, self.n_total
        local_idx, offset, n_train = train
        idx = torch.from_numpy(np.asarray(local_idx, dtype=np.int64)).to(self.device)
        return R[idx], int(offset), int(n_train)

    def _assign_rows(self, T, offset, n_rows, C):
        return rowexact(self._assign, T, offset, n_rows, C)

    # ---- Lloyd ----------------------------------------------------------------------------------
    def assign(self, level: int, it: int, books, C, train=None) -> float:
        """Label this shard's training rows against C; cache them; return Σ d² (float64)."""
        self._maybe_fail("assign", level=level, iteration=it)
        R = self._residual(level, books)
        T, off, nt = self._train(R, train)
        Ct = torch.as_tensor(C).to(device=self.device, dtype=self.wd)
        labels, d2 = self._assign_rows(T, off, nt, Ct)
        self._labels = ((level, it), labels)
        return float(d2.double().sum())

    def fold(self, level: int, it: int, books, C, train, pieces, carry, mode: str = "ordered"):
        """Per-cluster sums and counts of this shard's labelled rows.

        ``mode='ordered'``: ``pieces`` = [(seg, a, b), ...] splits this shard's training rows into the
        runs that belong to the segments of the single-process reduction plan (contiguous row ranges
        each summed from zero in row order, see ``kmeans.reduction_plan``). The first piece continues
        ``carry[seg]`` (the previous shard's running sums of the same segment) when given, so a
        chain of shards repeats the single-process float additions one by one.
        ``mode='tree'``: float64 sums of this shard alone (the driver adds them).
        Returns ({seg: sums}, counts).
        """
        self._maybe_fail("fold", level=level, iteration=it)
        k = int(np.asarray(C).shape[0]) if not isinstance(C, torch.Tensor) else int(C.shape[0])
        if self._labels is None or self._labels[0] != (level, it):
            self.assign(level, it, books, C, train)   # after a restart: recompute, same bits
        labels = self._labels[1]
        R = self._residual(level, books)
        T, _, _ = self._train(R, train)
        counts = _np(torch.bincount(labels, minlength=k)).astype(np.int64)
        if mode == "tree":
            sums = torch.zeros((k, T.shape[1]), dtype=torch.float64, device=self.device)
            sums.index_add_(0, labels, T.double())
            return {0: _np(sums)}, counts
        if mode != "ordered":
            raise ValueError(f"mode must be 'ordered' or 'tree', got {mode!r}")
        out = {}
        prev = carry[0] if carry is not None else {}
        for seg, a, b in pieces:
            if seg in prev:
                sums = torch.as_tensor(np.array(prev[seg], copy=True)).to(device=self.device, dtype=self.wd)
            else:
                sums = torch.zeros((k, T.shape[1]), dtype=self.wd, device=self.device)
            sums.index_add_(0, labels[a:b], T[a:b].to(self.wd))
            out[seg] = _np(sums)
        return out, counts

    def finish_level(self, level: int, books, C) -> dict:
        """Final assignment of every row of the shard to C; persist the codes; advance the residual.

        Returns {'inertia': Σ ‖r_{level+1}‖² (float64), 'counts': per-cluster counts}.
        """
        self._maybe_fail("finish", level=level)
        R = self._residual(level, books)
        Ct = torch.as_tensor(C).to(device=self.device, dtype=self.wd)
        labels, _ = self._assign_rows(R, self.start, self.n_total, Ct)
        _atomic_save(self._codes_path(level), _np(labels).astype(np.int64))
        R -= Ct[labels]
        self._R_level = level + 1
        return {"inertia": float((R.double() * R.double()).sum()),
                "counts": _np(torch.bincount(labels, minlength=Ct.shape[0])).astype(np.int64)}

    def rows(self, level: int, books, local_idx) -> np.ndarray:
        """Residual rows (of this shard, local indices) entering ``level``: samples for the init."""
        R = self._residual(level, books)
        idx = torch.from_numpy(np.asarray(local_idx, dtype=np.int64)).to(self.device)
        return _np(R[idx]).copy()

    def codes(self, n_levels: int) -> np.ndarray:
        if self.X.shape[0] == 0:
            return np.zeros((0, n_levels), np.int64)
        return np.stack([np.load(self._codes_path(j)) for j in range(n_levels)], axis=1)

    # ---- fuzzy context (map side) -----------------------------------------------------------------
    def _context(self, spec: dict) -> torch.Tensor:
        """This shard's rows of I: FCM memberships of the residual at each level (index.context's "rq"
        family: per level U = fcm_memberships(r_ℓ, C_ℓ, m, top_k), optional row-max normalisation,
        times the family weight, clipped to [0, 1])."""
        key = spec["key"]
        if self._ctx is not None and self._ctx[0] == key:
            return self._ctx[1]
        books = spec["books"]
        blocks = []
        for lvl, C in enumerate(books):
            R = self._residual(lvl, books)
            Ct = torch.as_tensor(C).to(device=self.device, dtype=self.wd)
            U = rowexact(lambda x, c: fcm_memberships(x, c, m=float(spec["m"]), top_k=spec.get("top_k"),
                                                      backend=self.backend), R, self.start, self.n_total, Ct)
            if spec.get("normalize") == "max":
                U = U / U.max(dim=1, keepdim=True).values.clamp_min(1e-30)
            blocks.append(U.to(torch.float32))
        I = torch.cat(blocks, dim=1) if blocks else torch.zeros((self.X.shape[0], 0))
        w = float(spec.get("weight", 1.0))
        if w != 1.0:
            I = (I * np.float32(w)).clamp(0.0, 1.0)
        self._ctx = (key, I.contiguous())
        self._ext = {}
        return self._ctx[1]

    def context_rows(self, spec: dict) -> dict:
        """This shard's per-chunk outputs (the index stores them): codes, memberships, ‖residual‖²."""
        self._maybe_fail("context")
        I = self._context(spec)
        L = len(spec["books"])
        R = self._residual(L, spec["books"])
        resid = (R * R).sum(dim=1).to(torch.float32)
        return {"codes": self.codes(L), "I": _np(I).copy(), "residual_sq": _np(resid).copy()}

    def _extents(self, spec, B) -> torch.Tensor:
        """B↓ restricted to this shard's chunks: luk_down is per chunk, so it never leaves the shard."""
        I = self._context(spec)
        key = (id(B), getattr(B, "shape", None))
        if key not in self._ext:
            Bt = torch.as_tensor(np.asarray(B, dtype=np.float32)).to(I.device)
            self._ext = {key: luk_down(Bt, I, backend=self.backend) if I.shape[0] else
                         torch.zeros((Bt.shape[0], 0), dtype=I.dtype)}
        return self._ext[key]

    def up_partial(self, spec: dict, A=None, B=None, pair=None) -> np.ndarray:
        """Partial A↑ over this shard's chunks: min over g in the shard of (A(g) → I(g, m)).

        The object sets are, in order of precedence: the extents of intents ``B`` (``B↓`` on this
        shard), combined pairwise by ``pair=(i, j, op)`` arrays with op 'max' (soft join) or 'min'
        (soft meet); or this shard's columns of the attribute concepts (A='attributes': I(·, m) for
        each m); or a given (s, n_shard) array ``A``. The driver takes the elementwise min over shards.
        """
        self._maybe_fail("up")
        I = self._context(spec)
        if B is not None:
            E = self._extents(spec, B)
            if pair is not None:
                i, j, op = pair
                a, b = E[torch.as_tensor(np.asarray(i))], E[torch.as_tensor(np.asarray(j))]
                E = torch.maximum(a, b) if op == "max" else torch.minimum(a, b)
            A = E
        elif isinstance(A, str) and A == "attributes":
            A = I.t().contiguous()
        else:
            A = torch.as_tensor(np.asarray(A, dtype=np.float32)).to(I.device)
        if I.shape[0] == 0:
            return np.ones((A.shape[0], I.shape[1]), np.float32)
        return _np(luk_up(A, I, backend=self.backend)).copy()

    def extent_sums(self, spec: dict, B) -> np.ndarray:
        """Σ_g B↓(g) over this shard (partial fuzzy cardinalities of the extents)."""
        E = self._extents(spec, B)
        return _np(E.double().sum(dim=1)).copy()

    def extents(self, spec: dict, B) -> np.ndarray:
        return _np(self._extents(spec, B)).copy()

    def meet_partial(self, spec: dict, B, rows_a, rows_b) -> np.ndarray:
        """Partial Σ_g min(E_a(g), E_b(g)) over this shard, for extents E = B↓ (rows_a × rows_b)."""
        self._maybe_fail("meet")
        E = self._extents(spec, B)
        a = E[torch.as_tensor(np.asarray(rows_a, dtype=np.int64))]
        b = E[torch.as_tensor(np.asarray(rows_b, dtype=np.int64))]
        if E.shape[1] == 0:
            return np.zeros((a.shape[0], b.shape[0]), np.float64)
        return _np(meet_cardinality(a.double(), b.double(), backend=self.backend)).copy()

    def cooc_partial(self, spec: dict, B, doc_ids, window: int, halo) -> np.ndarray:
        """Partial co-occurrence counts between the node sets (rows of B) over windows of ``window``
        consecutive chunks of one document that *start* in this shard.

        Membership of chunk g in node s: B↓(g) >= the node's threshold ``spec['cooc_member']``
        (default 0.5). ``doc_ids``: this shard's document ids (or ints); ``halo``: (doc_ids, member
        rows) of the first window−1 chunks of the following shards, so windows may end past the
        shard. Returns an (s, s) int64 matrix of window counts where both nodes appear.
        """
        E = self._extents(spec, B)
        thr = float(spec.get("cooc_member", 0.5))
        M = (_np(E) >= thr).T            # (n_shard, s) bool
        docs = list(doc_ids)
        if halo is not None:
            hd, hm = halo
            docs = docs + list(hd)
            M = np.concatenate([M, np.asarray(hm, dtype=bool).reshape(-1, M.shape[1])], axis=0)
        return window_counts(M, docs, window, n_starts=self.X.shape[0])

    def member_rows(self, spec: dict, B, first: int) -> np.ndarray:
        E = self._extents(spec, B)
        thr = float(spec.get("cooc_member", 0.5))
        return (_np(E[:, :first]) >= thr).T.copy()


def window_counts(M: np.ndarray, docs: list, window: int, *, n_starts: int | None = None) -> np.ndarray:
    """Count windows of ``window`` consecutive rows of one document in which nodes i and j both have a
    member: (s, s) int64, diagonal = windows containing node i. Windows start at rows < n_starts;
    a window at a document's end is shorter (it never crosses into the next document), and a
    document shorter than the window contributes one window."""
    n, s = M.shape
    n_starts = n if n_starts is None else n_starts
    out = np.zeros((s, s), np.int64)
    for t in range(n_starts):
        if t > 0 and docs[t - 1] == docs[t] and t + window - 1 < n and docs[t + window - 1] == docs[t] \
                and False:
            pass
        # a window is identified by its first row; only rows that start a full window, or the
        # first row of a document shorter than the window, start one
        end = t
        while end + 1 < n and end + 1 < t + window and docs[end + 1] == docs[t]:
            end += 1
        if end - t + 1 < window and t > 0 and docs[t - 1] == docs[t]:
            continue
        v = M[t:end + 1].any(axis=0).astype(np.int64)
        out += np.outer(v, v)
    return out
