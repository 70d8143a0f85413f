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

import numpy as np
import torch

from ..ops import luk_down, luk_up, meet_cardinality
from ..ops.kmeans import is_native_cpu, kmeans_impls
from .layout import assign_block_rows, rowexact


def _atomic_save(path: str, arr: np.ndarray) -> None:
    tmp = f"{path}.tmp{os.getpid()}.npy"
    np.save(tmp, arr)
    os.replace(tmp, path)


def sp_members(res):
    import scipy.sparse as sp
    return sp.csr_matrix(res.members, dtype=bool)


def _np(t) -> np.ndarray:
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


class ShardWorker:
    """One shard: rows [start, stop) of an n_total-row embedding matrix stored in ``path`` (.npy)."""

    def __init__(self, shard_id: int, path: str, start: int, stop: int, n_total: int, state_dir: str, *,
                 device: str | None = None, backend: str | None = None, fault: dict | None = None,
                 meta: dict | None = None):
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
        self.meta = meta        # {'doc_ids': [...], 'positions': [...]} of this shard's chunks
        X = np.load(path, mmap_mode=None)
        if X.ndim != 2 or X.shape[0] != self.stop - self.start:
            raise ValueError(f"shard file {path} has shape {X.shape}, expected ({self.stop - self.start}, d)")
        self.X = torch.from_numpy(np.ascontiguousarray(X)).to(self.device)
        self.wd = torch.float64 if self.X.dtype == torch.float64 else torch.float32
        self._assign, _ = kmeans_impls(self.device, backend)
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

    def cpu_seconds(self) -> float:
        """User + system CPU time of this worker process so far (all its threads)."""
        import resource
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    def info(self) -> dict:
        import resource
        return {"maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,"shard": self.shard_id, "rows": int(self.X.shape[0]), "dim": int(self.X.shape[1]),
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

    def _assign_rows(self, T, offset, n_rows, C, lloyd: bool = False):
        """Labels and d² of rows T (global rows [offset, ...) of an n_rows-row matrix), as the single
        process computes them. Inside Lloyd iterations ops.kmeans_fit hands the native CPU assign the
        rows' precomputed ‖x‖² (GEMM-form d², seen only by the stopping test): so do we."""
        block = assign_block_rows(n_rows, int(C.shape[0]), str(self.device))
        cpu_fast = is_native_cpu(assign=self._assign) and self.device.type == "cpu"
        if lloyd and cpu_fast and "xn" in getattr(self._assign, "__code__").co_varnames:
            Tw = T.to(self.wd).contiguous()
            xn = torch.einsum("ij,ij->i", Tw, Tw).contiguous()
            return rowexact(self._assign, Tw, offset, n_rows, C, block=block, row_kw={"xn": xn})
        return rowexact(self._assign, T, offset, n_rows, C, block=block)

    # ---- Lloyd ----------------------------------------------------------------------------------
    def assign(self, level: int, it: int, books, C, train=None) -> float:
        """Label this shard's training rows against C; cache them; return Σ d² (float64)."""
        self._maybe_fail("assign", level=level, iteration=it)
        R = self._residual(level, books)
        T, off, nt = self._train(R, train)
        Ct = torch.as_tensor(C).to(device=self.device, dtype=self.wd)
        labels, d2 = self._assign_rows(T, off, nt, Ct, lloyd=True)
        self._labels = ((level, it), labels)
        return float(d2.double().sum())

    def fold(self, level: int, it: int, books, C, train, pieces, carry, mode: str = "ordered"):
        """Per-cluster sums and counts of this shard's labelled rows.

        ``mode='ordered'``: ``pieces`` = [(seg, a, b), ...] splits this shard's training rows into the
        runs that belong to the segments of the single-process reduction plan (contiguous row ranges
        each summed from zero in row order (float64 on the CPU), see ``kmeans.reduction_plan``). The first piece continues
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
        # as the single process's update: float64 sums on the CPU (native centroid_sums), the work
        # dtype on GPUs (torch/Triton index_add)
        sd = torch.float64 if self.device.type == "cpu" else self.wd
        for seg, a, b in pieces:
            if seg in prev:
                sums = torch.as_tensor(np.array(prev[seg], copy=True)).to(device=self.device, dtype=sd)
            else:
                sums = torch.zeros((k, T.shape[1]), dtype=sd, device=self.device)
            sums.index_add_(0, labels[a:b], T[a:b].to(sd))
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
        """This shard's rows of the fuzzy context I, computed by the index's own per-chunk code: the
        "rq" family's ``transform`` (codes, FCM memberships of the residual per level, crisp members)
        and ``index.context.block_from`` (family weight): the same bits per row as the single-process
        pass (see layout: GEMM rows do not depend on the block height from MIN_GEMM_ROWS up)."""
        key = spec["key"]
        if self._ctx is not None and self._ctx[0] == key:
            return self._ctx[1]
        import scipy.sparse as sp
        from ..index.context import FAMILIES, ChunkView, FamilyResult, as_result, block_from, dense
        from .layout import MIN_GEMM_ROWS
        cfg = spec["config"]
        books = [np.asarray(b, dtype=np.float32) for b in spec["books"]]
        state = {f"codebook_{i}": b for i, b in enumerate(books)}
        X = _np(self.X).astype(np.float32, copy=False)
        n, d = X.shape
        fam = FAMILIES["rq"]
        # the family's per-chunk pass over the whole shard (GEMM row results do not depend on the
        # block height from MIN_GEMM_ROWS rows up); a shard smaller than that is padded with zero rows
        pad = MIN_GEMM_ROWS - n if 0 < n < MIN_GEMM_ROWS and n != self.n_total else 0
        xs = np.concatenate([X, np.zeros((pad, d), np.float32)]) if pad else X
        view = ChunkView([""] * len(xs), [""] * len(xs), [""] * len(xs), np.zeros(len(xs), np.int32))
        r = as_result(fam.transform(view, xs, cfg, state), "rq", len(xs))
        res = FamilyResult(dense(r.matrix)[:n], r.names, r.groups, sp.csr_matrix(r.members)[:n], r.state,
                           {k: v[:n] for k, v in r.rows.items()}, r.info)
        blk = block_from("rq", float(spec.get("weight", 1.0)), res, cfg)
        I = torch.from_numpy(np.ascontiguousarray(dense(blk.matrix), dtype=np.float32))
        self._ctx = (key, I, res, sp.csr_matrix(blk.members, dtype=bool))
        self._ext = {}
        return I

    def context_rows(self, spec: dict) -> dict:
        """This shard's per-chunk outputs (the index stores them): codes, memberships (before the family
        weight), ‖residual‖², crisp members."""
        self._maybe_fail("context")
        self._context(spec)
        res = self._ctx[2]
        return {"codes": res.rows["codes"], "I": np.asarray(res.matrix, np.float32),
                "residual_sq": res.rows["residual_sq"], "members": sp_members(res),
                "names": list(res.names), "groups": np.asarray(res.groups), "state": res.state}

    def context_summary(self, spec: dict) -> dict:
        """Compute this shard's context rows and keep them here; return only their sizes."""
        self._maybe_fail("context")
        I = self._context(spec)
        return {"rows": int(I.shape[0]), "bytes": int(I.numel() * I.element_size()),
                "members_nnz": int(self._ctx[3].nnz)}

    def node_members_nnz(self, spec: dict, kind, parents, attr) -> int:
        return int(self.node_members(spec, kind, parents, attr).nnz)

    def _extents(self, spec, B) -> torch.Tensor:
        """B↓ restricted to this shard's chunks: luk_down is per chunk, so it never leaves the shard."""
        I = self._context(spec)
        Bt = torch.as_tensor(np.asarray(B, dtype=np.float32)).to(I.device)
        if I.shape[0] == 0:
            return torch.zeros((Bt.shape[0], 0), dtype=I.dtype)
        return luk_down(Bt, I, backend=self.backend)

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

    # ---- concept graph (map side of index.graph's rules) --------------------------------------------
    def _members(self, spec: dict):
        """Crisp supports of this shard's chunks (the family's members, weighted block)."""
        self._context(spec)
        return self._ctx[3]

    def support(self, spec: dict) -> np.ndarray:
        """Per attribute: how many of this shard's chunks are crisp members (int64, exact)."""
        self._maybe_fail("support")
        return np.asarray(self._members(spec).sum(axis=0), dtype=np.int64).ravel()

    def seed_pairs(self, spec: dict, seeds) -> tuple:
        """Partial core meet cardinalities Σ_g min(core_i(g), core_j(g)) (float64) and crisp
        intersection counts (int64) of the seed attributes over this shard (graph.select_nodes)."""
        self._maybe_fail("pairs")
        seeds = np.asarray(seeds, dtype=np.int64)
        I = _np(self._context(spec))
        memT = self._members(spec).T.tocsr()[seeds]
        core = np.ascontiguousarray(I[:, seeds].T, dtype=np.float64) * memT.toarray()
        K = np.asarray(meet_cardinality(core, core, backend=self.backend), dtype=np.float64) if len(seeds) \
            and core.shape[1] else np.zeros((len(seeds), len(seeds)))
        inter = (memT.astype(np.int64) @ memT.T.astype(np.int64)).toarray() if len(seeds) else \
            np.zeros((0, 0), np.int64)
        return K, np.asarray(inter, dtype=np.int64)

    def _node_extents(self, spec, kind, parents, attr, nodes) -> np.ndarray:
        """Fuzzy extents of graph nodes on this shard (seeds: I columns; joins max, meets min of the
        parents: ConceptGraph.extents)."""
        from ..index.graph import JOIN, SEED
        from ..ops import soft_join, soft_meet
        I = _np(self._context(spec))
        out = np.empty((len(nodes), I.shape[0]), dtype=np.float32)
        for r, v in enumerate(nodes):
            if kind[v] == SEED:
                out[r] = I[:, attr[v]]
            else:
                a, b = (I[:, attr[int(p)]] for p in parents[v])
                out[r] = soft_join(a, b) if kind[v] == JOIN else soft_meet(a, b)
        return out

    def node_up(self, spec: dict, kind, parents, attr, nodes) -> np.ndarray:
        """Partial intents extent↑ (luk_up: a min over chunks) of the given nodes over this shard."""
        self._maybe_fail("up")
        I = _np(self._context(spec))
        E = self._node_extents(spec, kind, parents, attr, np.asarray(nodes))
        if I.shape[0] == 0:
            return np.ones((len(nodes), I.shape[1]), np.float32)
        return np.asarray(luk_up(E, I, backend=self.backend), dtype=np.float32)

    def node_members(self, spec: dict, kind, parents, attr):
        """This shard's columns of the node membership matrix (graph.node_members: per chunk)."""
        from ..index.graph import node_members
        return node_members(np.asarray(kind), np.asarray(parents), np.asarray(attr), self._members(spec))

    def cooc(self, spec: dict, kind, parents, attr, window: int):
        """Partial (V, V) co-occurrence window counts over the documents of this shard.

        Shards hold whole documents (``layout.shard_bounds(doc_ids=...)``), so every window
        (graph.windows: ``window`` consecutive chunks of one document) lies in one shard and the
        counts are a plain sum over shards."""
        self._maybe_fail("cooc")
        import scipy.sparse as sp
        from ..index.graph import windows
        if self.meta is None:
            raise ValueError("co-occurrence needs the chunks' doc_ids and positions (ShardSet(meta=...))")
        mem = self.node_members(spec, kind, parents, attr)
        win = windows(list(self.meta["doc_ids"]), np.asarray(self.meta["positions"]), int(window))
        if mem.shape[0] == 0 or win.shape[0] == 0:
            return sp.csr_matrix((mem.shape[0], mem.shape[0]), dtype=np.int64)
        NW = (mem.astype(np.int32) @ win.T.astype(np.int32)) > 0
        return (NW.astype(np.int64) @ NW.T.astype(np.int64)).tocsr()

    def attr_sums(self, spec: dict) -> np.ndarray:
        """Partial Σ of the embeddings of each attribute's crisp members (float64, (M, d))."""
        mem = self._members(spec).T.tocsr().astype(np.float64)
        return np.asarray(mem @ _np(self.X).astype(np.float64))

    def embeddings(self) -> np.ndarray:
        """The raw rows. Only the final index write asks for them (its format holds every embedding)."""
        return _np(self.X).copy()
