"""Triton and CUDA registrations of the k-means family (``kmeans_assign``, ``kmeans_update``,
``rq_kmeans_batched``); the API and the ref/cpu entries are in ``ops/kmeans.py``.

Importing this module imports neither triton nor the CUDA extension: every wrapper imports its
kernels on first call. Under ``TRITON_INTERPRET=1`` the Triton wrappers also accept CPU tensors.
Kernels: ``kernels/kmeans.py`` (Triton), ``csrc/cuda/kmeans.cu`` and ``kmeans_wmma.cu`` (CUDA).
"""
from __future__ import annotations

import functools
import os

import numpy as np
import torch

from . import _cuda
from ._cuda import DTYPE_CODE, acc_dtype, centroids, guard, ptr, stream
from ._registry import register


@functools.lru_cache(maxsize=None)
def _tk():
    """The Triton k-means kernels (imports triton)."""
    from contextrag.kernels import kmeans
    return kmeans


def check_labels(labels: torch.Tensor, n: int, k: int, device: torch.device | None = None) -> torch.Tensor:
    """labels as contiguous int64 (n,) on ``device`` (X's) with every value in [0, k): the update
    kernels index shared memory and one-hot rows with them, so int32 or out-of-range labels must not
    get through, and a label tensor on another device would reach the kernel as a foreign pointer."""
    if not isinstance(labels, torch.Tensor) or labels.dim() != 1 or labels.shape[0] != n:
        raise ValueError(f"labels must be a 1-D tensor of {n} cluster indices, got "
                         f"{tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__}")
    if device is not None and labels.device != torch.device(device):
        raise ValueError(f"labels must be on X's device {torch.device(device)}, got {labels.device}")
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise TypeError(f"labels must hold integers, got {labels.dtype}")
    labels = labels.to(torch.int64).contiguous()
    if n:
        lo, hi = torch.aminmax(labels)
        lo, hi = int(lo), int(hi)
        if lo < 0 or hi >= k:
            raise ValueError(f"labels must lie in [0, {k}) for k = {k}, got values in [{lo}, {hi}]")
    return labels



# ---- Triton --------------------------------------------------------------------------------

@register("kmeans_assign", "triton")
def _triton_assign(X, C):
    return _tk().assign(X, C)


@register("kmeans_update", "triton")
def _triton_update(X, labels, k):
    return _tk().update(X, check_labels(labels, X.shape[0], k, X.device), k)


# ---- CUDA ----------------------------------------------------------------------------------

def cuda_assign_segmented(X, row_off, C, c_off, tables=None):
    """Batched CUDA assignment; same contract as ``kernels.kmeans.assign_segmented``."""
    cu = _cuda.cu()
    X = X.contiguous()
    n, d = X.shape
    Cd, cn, acc = centroids(X, C)
    labels = torch.empty(n, dtype=torch.int64, device=X.device)
    d2 = torch.empty(n, dtype=acc, device=X.device)
    bm = cu.assign_rows_per_block()
    if tables is None:
        tables = _block_table(row_off, c_off, bm, X.device)
    blk_prob, blk_row0, row1, coff, kp = tables
    if n and blk_prob.numel():
        with guard(X):
            cu.kmeans_assign(DTYPE_CODE[X.dtype], ptr(X), ptr(Cd), ptr(cn), ptr(labels), ptr(d2), n, int(C.shape[0]), d,
                             ptr(blk_prob), ptr(blk_row0), ptr(row1), ptr(coff), ptr(kp),
                             int(blk_prob.numel()), stream(X))
    return labels, d2


def _block_table(row_off, c_off, BN, device):
    """kernels/kmeans.py block_table for the CUDA path, kept here so that the CUDA backend runs
    where Triton is not installed (the kernels module imports triton)."""
    ro = [int(v) for v in row_off]
    co = [int(v) for v in c_off]
    probs, starts = [], []
    for p in range(len(ro) - 1):
        for r in range(ro[p], ro[p + 1], BN):
            probs.append(p)
            starts.append(r)
    i32 = dict(dtype=torch.int32, device=device)
    return (torch.tensor(probs, **i32), torch.tensor(starts, **i32), torch.tensor(ro[1:], **i32),
            torch.tensor(co[:-1], **i32), torch.tensor([co[p + 1] - co[p] for p in range(len(co) - 1)], **i32))


def _use_tensor_cores() -> bool:
    return os.environ.get("CONTEXTRAG_CUDA_TC", "1") != "0"


@register("kmeans_assign", "cuda")
def _cuda_assign(X, C, *, tensor_cores: bool | None = None):
    """fp16/bf16 X runs on tensor cores (WMMA) unless ``tensor_cores=False`` or CONTEXTRAG_CUDA_TC=0;
    fp32/fp64 X (and the batched form) run the register-blocked CUDA-core kernel."""
    cu = _cuda.cu()
    X = X.contiguous()
    n, d = X.shape
    Cd, cn, acc = centroids(X, C)
    labels = torch.empty(n, dtype=torch.int64, device=X.device)
    d2 = torch.empty(n, dtype=acc, device=X.device)
    if tensor_cores is None:
        tensor_cores = _use_tensor_cores()
    if n:
        with guard(X):
            _cuda_assign_launch(cu, X, Cd, cn, labels, d2, n, int(C.shape[0]), d, tensor_cores)
    return labels, d2


def _cuda_assign_launch(cu, X, Cd, cn, labels, d2, n, k, d, tensor_cores):
    if (tensor_cores and X.dtype in (torch.float16, torch.bfloat16)
            and torch.cuda.get_device_capability(X.device)[0] >= 8):
        cu.kmeans_assign_tc(DTYPE_CODE[X.dtype], ptr(X), ptr(Cd), ptr(cn), ptr(labels), ptr(d2),
                            n, k, d, stream(X))
    else:
        cu.kmeans_assign(DTYPE_CODE[X.dtype], ptr(X), ptr(Cd), ptr(cn), ptr(labels), ptr(d2), n,
                         k, d, 0, 0, 0, 0, 0, 0, stream(X))


@register("kmeans_update", "cuda")
def _cuda_update(X, labels, k):
    cu = _cuda.cu()
    X = X.contiguous()
    n, d = X.shape
    labels = check_labels(labels, n, k, X.device)
    sums = torch.zeros((k, d), dtype=acc_dtype(X), device=X.device)
    counts = torch.zeros(k, dtype=torch.int64, device=X.device)
    if n:
        with guard(X):
            cu.kmeans_update(DTYPE_CODE[X.dtype], ptr(X), ptr(labels), ptr(sums), ptr(counts), n, k, d,
                             stream(X))
    return sums, counts


# ---- batched RQ-KMeans ---------------------------------------------------------------------

def _kmeans_pp_batched(T, t_off, t_prob, ks, seed):
    """k-means++ seeding of every problem: ``ops.kmeans.kmeans_plus_plus`` (greedy, on its seeded
    subsample, one small GEMM per step) on each problem's rows, so each problem gets exactly the
    seeds ``ops.rq_kmeans`` would give it alone. Returns the concatenated (Σ k, d) centroids."""
    from .kmeans import kmeans_plus_plus
    parts = [kmeans_plus_plus(T[int(t_off[p]):int(t_off[p + 1])], int(k), seed)
             for p, k in enumerate(ks) if int(t_off[p + 1] - t_off[p]) > 0 and k > 0]
    if not parts:
        return torch.zeros((0, T.shape[1]), dtype=T.dtype, device=T.device)
    return torch.cat(parts).to(torch.float64 if T.dtype == torch.float64 else torch.float32)


def rq_kmeans_batched_impl(problems, sizes, *, n_iter, tol, seed, max_points_per_centroid,
                           assign_seg, update=None):
    """RQ-KMeans for many independent problems, every Lloyd step of a level in one launch.

    Rows of all problems are concatenated; ``assign_seg`` assigns each problem's rows to its own
    slice of the concatenated codebook (per-problem centroid offsets): the assigner of the shared
    driver ``ops.lloyd.lloyd``, one segment per problem. Sums and counts for all problems come from
    one scatter over global cluster ids (the reducer). Each problem keeps its own stopping rule,
    empty-cluster splits, subsample and seeds, exactly as :func:`contextrag.ops.rq_kmeans` would
    run it alone; a problem that has converged keeps its centroids while the others go on.
    """
    from . import kmeans as K
    from .lloyd import Assignment, lloyd

    tX = []
    kinds = []
    for i, X in enumerate(problems):
        t, kind = K._check_X(X, f"problems[{i}]")
        tX.append(t)
        kinds.append(kind)
    if not tX:
        return []
    dev, d = tX[0].device, tX[0].shape[1]
    for i, t in enumerate(tX):
        if t.device != dev or t.shape[1] != d:
            raise ValueError(f"problems[{i}] must be on {dev} with {d} columns, got {t.device}, {tuple(t.shape)}")
    wd = K._work_dtype(tX[0])
    if any(K._work_dtype(t) != wd for t in tX):
        raise ValueError("problems must all be float64 or all be float32/half")
    P = len(tX)
    used = [K.clamp_sizes(sizes, t.shape[0]) for t in tX]
    L = len(used[0])
    ns = [t.shape[0] for t in tX]
    row_off = np.cumsum([0] + ns)
    # the storage dtype through the levels (fp16/bf16 rows feed the tensor-core assign); centroids,
    # sums and inertia stay in the work dtype
    half = tX[0].dtype in (torch.float16, torch.bfloat16) and all(t.dtype == tX[0].dtype for t in tX)
    R = torch.cat([t if half else t.to(wd) for t in tX]) if P else None
    row_prob = torch.repeat_interleave(torch.arange(P, device=dev), torch.tensor(ns, device=dev))
    books = [[] for _ in range(P)]
    codes = [[] for _ in range(P)]
    inertia = [[] for _ in range(P)]
    live = [p for p in range(P) if ns[p] > 0]
    for lvl in range(L):
        ks = [used[p][lvl] if ns[p] > 0 else 0 for p in range(P)]
        c_off = np.cumsum([0] + ks)
        # training rows of each problem (seeded subsample, as kmeans_fit draws it)
        trains = []
        for p in range(P):
            Rp = R[row_off[p]:row_off[p + 1]]
            idx = K.train_rows(ns[p], ks[p], max_points_per_centroid, seed + lvl) if ns[p] else None
            if idx is not None:
                Rp = Rp[torch.from_numpy(idx).to(dev)]
            trains.append(Rp)
        T = torch.cat(trains)
        t_off = np.cumsum([0] + [t.shape[0] for t in trains])
        t_prob = torch.repeat_interleave(torch.arange(P, device=dev),
                                         torch.tensor([t.shape[0] for t in trains], device=dev))
        C = _kmeans_pp_batched(T, t_off, t_prob, ks, seed + lvl)
        c_off_t = torch.tensor(c_off[:-1], device=dev)
        cache: dict = {}

        def assign(C, T=T, t_off=t_off, t_prob=t_prob, c_off=c_off, cache=cache):
            labels, d2 = assign_seg(T, t_off, C, c_off, cache)
            inert = torch.zeros(P, dtype=torch.float64, device=dev).index_add_(0, t_prob, d2.double())
            return Assignment(labels + c_off_t[t_prob], inert)   # global cluster ids

        def reduce(glob, ktot, T=T):
            if update is not None:
                return update(T, glob, ktot)
            sums = torch.zeros((ktot, d), dtype=wd, device=dev).index_add_(0, glob, T.to(wd))
            return sums, torch.bincount(glob, minlength=ktot)

        segments = [(int(c_off[p]), int(c_off[p + 1])) if p in live else (0, 0) for p in range(P)]
        C, _ = lloyd(C, assign, reduce, n_iter=n_iter, tol=tol, segments=segments)
        labels, _ = assign_seg(R, row_off, C, c_off, {})
        glob = labels + c_off_t[row_prob]
        R = R - C[glob].to(R.dtype)
        Rw = R.to(wd)
        res2 = torch.zeros(P, dtype=torch.float64, device=dev).index_add_(0, row_prob, (Rw * Rw).sum(dim=1).double())
        res2 = res2.tolist()
        for p in range(P):
            books[p].append(C[int(c_off[p]):int(c_off[p + 1])])
            codes[p].append(labels[row_off[p]:row_off[p + 1]])
            inertia[p].append(float(res2[p]))
    out = []
    for p in range(P):
        kind = kinds[p]
        cd = torch.stack(codes[p], dim=1) if ns[p] else torch.zeros((0, L), dtype=torch.int64)
        bk = books[p] if ns[p] else [torch.zeros((0, d), dtype=wd)] * L
        out.append(K.RQResult([kind.out(b) for b in bk], kind.out(cd), used[p], inertia[p]))
    return out


def _triton_assign_seg(T, row_off, C, c_off, cache):
    km = _tk()
    if "tables" not in cache:
        cache["tables"] = km.block_table(row_off, c_off, device=T.device, dtype=T.dtype)
    return km.assign_segmented(T, row_off, C, c_off, tables=cache["tables"])


def _cuda_assign_seg(T, row_off, C, c_off, cache):
    if "tables" not in cache:
        cache["tables"] = _block_table(row_off, c_off, _cuda.cu().assign_rows_per_block(), T.device)
    return cuda_assign_segmented(T, row_off, C, c_off, cache["tables"])


@register("rq_kmeans_batched", "triton")
def _triton_rq_batched(problems, sizes, *, n_iter, tol, seed, max_points_per_centroid):
    return rq_kmeans_batched_impl(problems, sizes, n_iter=n_iter, tol=tol, seed=seed,
                                  max_points_per_centroid=max_points_per_centroid,
                                  assign_seg=_triton_assign_seg)


@register("rq_kmeans_batched", "cuda")
def _cuda_rq_batched(problems, sizes, *, n_iter, tol, seed, max_points_per_centroid):
    return rq_kmeans_batched_impl(problems, sizes, n_iter=n_iter, tol=tol, seed=seed,
                                  max_points_per_centroid=max_points_per_centroid,
                                  assign_seg=_cuda_assign_seg)
