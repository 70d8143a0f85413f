"""Distributed Lloyd / RQ-KMeans on shard actors: the driver holds only centroids.

Each iteration: the driver puts the centroids C in the object store once; every shard labels its rows
(in parallel) and returns Σd²; per-cluster sums and counts come back either

* ``reduce='ordered'`` (default): as a chain shard 0 → 1 → … where each shard continues the running
  sums of the previous one (float64 on the CPU, the work dtype on GPUs, as the single process's
  update) in global row order. That is the exact sequence of additions of
  the single-process plain loop's ``centroid_sums`` in ops/kmeans.py; the single-process default
  (bounded) loop updates its float64 sums incrementally. Float64 sums of float32 rows are exact
  unless the values span a huge exponent range, so all three give the same sums, hence the same
  float32 centroids and every label, bit for bit. The chain serialises only the O(n·d) sum (the
  O(n·k·d) assignment stays parallel); each hop carries k·d values.
* ``reduce='tree'``: every shard returns float64 partial sums and the driver adds them: fully
  parallel and more accurate, equal to the single-process result up to rounding (a label can differ
  only where two centroids are within rounding of each other).

The driver then applies the same mean update and the same deterministic empty-cluster split
(``ops.lloyd.split_empty``) and the same relative-inertia stopping test: the iterations run in the
shared driver ``ops.lloyd.lloyd``: the shards are its assigner (labels stay on them), the ordered
chain or the tree sum its reducer.
The one difference: the stopping test sums the per-shard Σd² in float64 instead of one float32 sum,
so the two can stop at different iterations only when the relative decrease is within float32
rounding (~1e-7) of ``tol``.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..ops.kmeans import (DEFAULT_POINTS_PER_CENTROID, clamp_sizes, is_native_cpu, kmeans_impls, kmeans_plus_plus,
                          native_fn)
from ..ops.lloyd import Assignment, lloyd
from .layout import train_subsample


@dataclass
class DistRQResult:
    codebooks: list                 # (k_ℓ, d) float arrays, one per level
    sizes: tuple                    # codebook sizes used (after clamping)
    inertia: list                   # Σ ‖residual‖² after each level
    n_iter: list                    # Lloyd iterations per level
    counts: list                    # per-level cluster sizes (final assignment)
    timings: dict = field(default_factory=dict)   # seconds per phase
    message_bytes: dict = field(default_factory=dict)  # bytes driver<->shards per phase


def _train_specs(shards, idx):
    """Per shard: (local training rows, their offset in the training order, training-set size)."""
    if idx is None:
        return [None] * len(shards.specs)
    out = []
    for s in shards.specs:
        lo, hi = np.searchsorted(idx, [s.start, s.stop])
        out.append((idx[lo:hi] - s.start, int(lo), int(len(idx))))
    return out


def reduction_plan(n_train: int, device: str = "cpu", backend: str | None = None,
                   threads: int | None = None) -> list[tuple[int, int]]:
    """The order in which the single-process ``kmeans_update`` adds rows into per-cluster sums, as
    contiguous segments of the training order, each folded from zero in row order, the segment sums
    then added in segment order.

    torch's ``index_add_`` (ops/kmeans.py ``_torch_update``): one segment. A parallel native
    ``centroid_sums`` (one private block per OpenMP thread, static schedule, blocks added in thread
    order): one segment per thread, as libgomp's static schedule splits the rows. ``threads``: the
    single machine's OpenMP thread count (default: this process's).
    """
    _, upd = kmeans_impls(device, backend)
    parallel_native = is_native_cpu(update=upd) and str(device).startswith("cpu")
    if not parallel_native or n_train == 0:
        return [(0, n_train)]          # torch index_add_: one fold over the rows in order
    omp_threads = native_fn("omp_max_threads")
    nt = threads if threads is not None else (int(omp_threads()) if omp_threads is not None else 1)
    q, r = divmod(n_train, nt)
    segs = []
    for t in range(nt):
        a = t * q + min(t, r)
        b = a + q + (1 if t < r else 0)
        segs.append((a, b))
    return segs


def _pieces(shards, trains, plan):
    """Per shard: [(segment, local a, local b)] of its training rows, in training order."""
    out = []
    for s, tr in zip(shards.specs, trains):
        off, m = (s.start, s.stop - s.start) if tr is None else (tr[1], len(tr[0]))
        mine = []
        for seg, (a, b) in enumerate(plan):
            lo, hi = max(a, off), min(b, off + m)
            if lo < hi:
                mine.append((seg, lo - off, hi - off))
        out.append(mine)
    return out


def _fetch_rows(shards, level, books_ref, rows):
    """Residual rows (global indices, any order) entering ``level``, gathered from their shards."""
    rows = np.asarray(rows, dtype=np.int64)
    out = None
    refs = []
    for s, a in zip(shards.specs, shards.actors):
        sel = np.flatnonzero((rows >= s.start) & (rows < s.stop))
        if len(sel):
            refs.append((sel, a.rows.remote(level, books_ref, rows[sel] - s.start)))
    for sel, ref in refs:
        part = shards.get(ref)
        if out is None:
            out = np.empty((len(rows), part.shape[1]), dtype=part.dtype)
        out[sel] = part
    return out


def _initial(shards, level, books_ref, k, n_train, train_idx, init, seed, wd, init_sample, d):
    """Initial centroids as ``ops.kmeans_fit`` would pick them from the training rows."""
    def global_rows(pos):  # positions in the training order -> global row ids
        return pos if train_idx is None else train_idx[pos]

    if isinstance(init, str):
        if init == "random":
            rng = np.random.default_rng(seed)
            pick = rng.choice(n_train, size=k, replace=False)
            return torch.from_numpy(_fetch_rows(shards, level, books_ref, global_rows(pick))).to(wd).clone()
        if init == "k-means++":
            cap = init_sample if init_sample is not None else max(64 * k, 32768)
            if n_train <= cap:
                # the whole training set fits the sample: exactly the single-process seeding
                S = _fetch_rows(shards, level, books_ref, global_rows(np.arange(n_train)))
            else:
                rng = np.random.default_rng([seed, 7919])
                pos = np.sort(rng.choice(n_train, size=cap, replace=False))
                S = _fetch_rows(shards, level, books_ref, global_rows(pos))
            return kmeans_plus_plus(torch.from_numpy(S), k, seed).to(wd)
        raise ValueError(f"init must be 'k-means++', 'random' or a (k, d) array, got {init!r}")
    C = torch.as_tensor(np.asarray(init))
    if tuple(C.shape) != (k, d):
        raise ValueError(f"init must have shape ({k}, {d}), got {tuple(C.shape)}")
    return C.to(wd).clone()


def rq_kmeans(shards, sizes=(96, 24, 12), *, n_iter: int = 25, tol: float = 1e-4, seed: int = 0,
              init="k-means++", max_points_per_centroid: int | None = DEFAULT_POINTS_PER_CENTROID,
              reduce: str = "ordered",
              init_sample: int | None = None, on_iteration=None) -> DistRQResult:
    """RQ-KMeans over the rows owned by ``shards`` (a ``cluster.ShardSet``), same contract as
    ``ops.rq_kmeans``: level ℓ clusters the residual of level ℓ−1; ``init`` is 'k-means++', 'random'
    or a list of per-level (k_ℓ, d) arrays; ``seed + ℓ`` seeds level ℓ.

    Codes stay on the shards (``ShardSet.map('codes', L)``). ``init='k-means++'`` seeds from the
    training rows themselves when there are at most ``init_sample`` (default max(64·k, 32768)) of them, which
    equals the single-process seeding; otherwise from a seeded sample of that many rows (the only raw
    rows that ever reach the driver). ``on_iteration(level, it, shards)`` is called while the shards
    are working on an iteration (tests kill actors there).
    """
    if reduce not in ("ordered", "tree"):
        raise ValueError(f"reduce must be 'ordered' or 'tree', got {reduce!r}")
    ray = shards._ray
    infos = shards.info()
    n = sum(i["rows"] for i in infos)
    if n != shards.n_total:
        raise ValueError(f"shards hold {n} rows, expected {shards.n_total}")
    d = infos[0]["dim"]
    wd = torch.float64 if infos[0]["dtype"] == "float64" else torch.float32
    used = clamp_sizes(sizes, n)
    inits = list(init) if isinstance(init, (list, tuple)) else [init] * len(used)
    if len(inits) != len(used):
        raise ValueError(f"init must give one entry per level ({len(used)}), got {len(inits)}")
    books, inertias, iters, counts_all = [], [], [], []
    tm = {"init": 0.0, "iterations": 0.0, "finish": 0.0}
    mb = {"centroids_out": 0, "sums_in": 0, "hops": 0}
    for lvl, k in enumerate(used):
        t0 = time.perf_counter()
        lseed = seed + lvl
        books_ref = ray.put([b.numpy() for b in books])
        tidx = train_subsample(n, k, max_points_per_centroid, lseed)
        n_train = n if tidx is None else len(tidx)
        tspecs = _train_specs(shards, tidx)
        trains = [ray.put(t) for t in tspecs]
        plan = reduction_plan(n_train, infos[0]["device"]) if reduce == "ordered" else [(0, n_train)]
        pieces = _pieces(shards, tspecs, plan)
        C = _initial(shards, lvl, books_ref, k, n_train, tidx, inits[lvl], lseed, wd, init_sample, d)
        tm["init"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        iters_run = itertools.count(1)

        # the driver (ops.lloyd) owns the update, split and stopping rule; the shards assign, the
        # ordered chain or the tree below reduces
        def assign(C, lvl=lvl, books_ref=books_ref, trains=trains, iters_run=iters_run):
            it = next(iters_run)
            C_ref = ray.put(C.numpy())
            mb["centroids_out"] += C.numel() * C.element_size() * len(shards)
            d2_refs = [a.assign.remote(lvl, it, books_ref, C_ref, tr) for a, tr in zip(shards.actors, trains)]
            # labels stay on the shards: the handle is (iteration, centroids); Σd² is read after the reduction
            return Assignment((it, C_ref), lambda: float(np.sum(ray.get(d2_refs))))

        def reduce_sums(handle, k, lvl=lvl, books_ref=books_ref, trains=trains, plan=plan, pieces=pieces):
            it, C_ref = handle
            if reduce == "ordered":
                last = {}                # segment -> ref of the shard output holding its running sums
                refs = []
                for a, tr, pc in zip(shards.actors, trains, pieces):
                    carry = last.get(pc[0][0]) if pc else None
                    ref = a.fold.remote(lvl, it, books_ref, C_ref, tr, pc, carry, "ordered")
                    mb["hops"] += 1
                    refs.append(ref)
                    for seg, _, _ in pc:
                        last[seg] = ref
                if on_iteration is not None:
                    on_iteration(lvl, it, shards)
                outs = ray.get(refs)
                mb["sums_in"] += sum(sum(v.nbytes for v in o[0].values()) + o[1].nbytes for o in outs)
                final = {}
                for o in outs:
                    final.update(o[0])                  # later shards hold the longer running sums
                sums = torch.zeros((k, d), dtype=torch.float64 if infos[0]["device"].startswith("cpu") else wd)
                for seg in range(len(plan)):
                    if seg in final:               # a segment with no rows adds zeros
                        sums += torch.from_numpy(np.array(final[seg]))
                counts = np.sum([o[1] for o in outs], axis=0)
            else:
                refs = [a.fold.remote(lvl, it, books_ref, C_ref, tr, None, None, "tree")
                        for a, tr in zip(shards.actors, trains)]
                if on_iteration is not None:
                    on_iteration(lvl, it, shards)
                parts = ray.get(refs)
                mb["sums_in"] += sum(p[0][0].nbytes + p[1].nbytes for p in parts)
                sums = torch.from_numpy(np.sum([p[0][0] for p in parts], axis=0))
                counts = np.sum([p[1] for p in parts], axis=0)
            return sums, torch.from_numpy(np.asarray(counts, dtype=np.int64))

        C, it = lloyd(C, assign, reduce_sums, n_iter=n_iter, tol=tol)
        tm["iterations"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        C_ref = ray.put(C.numpy())
        fin = ray.get([a.finish_level.remote(lvl, books_ref, C_ref) for a in shards.actors])
        tm["finish"] += time.perf_counter() - t0
        books.append(C)
        iters.append(it)
        inertias.append(float(sum(f["inertia"] for f in fin)))
        counts_all.append(np.sum([f["counts"] for f in fin], axis=0))
    return DistRQResult([b.numpy() for b in books], used, inertias, iters, counts_all, tm, mb)
