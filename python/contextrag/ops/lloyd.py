"""The Lloyd driver every k-means executor runs: assignment, reduction, centroid update,
empty-cluster split, stopping rule and statistics.

An executor supplies two things and nothing else:

* an **assigner** ``assign(C) -> Assignment``: the nearest centre of each of its rows (labels, or a
  handle on labels kept where the rows live) and the squared distances (per row, their sum, or a
  callable giving the sum once the reduction has run);
* a **reducer** ``reduce(labels, k) -> (sums, counts)``: the per-cluster sums (k, d) and counts (k,).

The single-process CPU loops (``ops.kmeans``: plain, and the bounded engine ``ops._elkan`` whose
reducer keeps its sums incrementally), the batched GPU RQ-KMeans (``ops._kmeans_gpu``: every problem's
centroids concatenated, one segment per problem) and the Ray build (``distributed.kmeans``: shards
assign, an ordered or tree reduction) all run :func:`lloyd`, so the update and stopping rule cannot
drift apart (the Ray build is tested to give the single-process centroids bit for bit).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, cast

import numpy as np
import torch

from .. import ref

SPLIT_EPS = ref.kmeans.SPLIT_EPS


@dataclass(frozen=True)
class LloydOptions:
    """How the CPU fit runs (results are the same labels either way, up to rounding-level ties).

    bounded: Elkan-bounded iterations (``ops._elkan``) where the bounds fit ``max_bound_bytes``;
        False runs the plain loop (a full distance GEMM per iteration); None (the default) bounds
        only fits whose distance work per iteration (n·k·d) reaches ``ops._elkan.BOUNDED_MIN_MACS``,
        below which the bounds' bookkeeping costs more than the GEMM it skips.
    bf16_screen: the bounded loop's re-evaluation GEMM on bf16 operands where
        ``ops._precision.choose`` picks bf16 (CONTEXTRAG_PRECISION, CONTEXTRAG_ISA, the CPU; float32
        X); labels stay exact (see docs/KERNELS.md). False keeps it fp32 whatever the choice.
    max_bound_bytes: the bounded loop's n·k float32 bounds (plus the bf16 copy of X) above this
        run the plain loop.
    snapshot_bytes: the bounded loop keeps past centres (float64) for the displacements its
        bounds need within this budget; beyond it the oldest epoch is merged into the next (looser
        bounds, same labels).
    hugepages: the bounded loop's large work buffers as numpy allocates them (transparent huge
        pages) instead of ordinary pages; for the benchmark's comparison only.
    stats: if a list, each iteration after the first appends the share of points whose distances
        were re-evaluated (1.0 for the plain loop).
    """
    bounded: bool | None = None
    bf16_screen: bool = True
    max_bound_bytes: int = 2 << 30
    snapshot_bytes: int = 256 << 20
    hugepages: bool = False
    stats: list | None = field(default=None, repr=False)


DEFAULT_OPTIONS = LloydOptions()


class Assignment(NamedTuple):
    labels: object          # (n,) nearest-centre indices, or the executor's handle on them
    d2: object              # (n,) squared distances, their sum (float), or a callable giving the sum;
                            # with segments: the per-segment sums (P,)
    reevaluated: float = 1.0   # share of points whose distances were computed (statistics)


class Step(NamedTuple):
    inertia: float | list[float]   # Σ ‖x − c(x)‖² for the centroids the step was given (per segment: a list)
    sums: torch.Tensor      # (k, d) per-cluster sums of the points assigned to them
    counts: torch.Tensor    # (k,) int64
    reevaluated: float = 1.0   # share of points whose distances were computed (statistics)


Assigner = Callable[[torch.Tensor], Assignment]
Reducer = Callable[[object, int], tuple]


def split_empty(C: torch.Tensor, counts: torch.Tensor) -> int:
    """FAISS's perturbation split of empty clusters, taking the largest cluster (see ref.kmeans).
    C and counts are updated in place; returns the number of splits."""
    empty = (counts == 0).nonzero().flatten().tolist()
    if not empty:
        return 0
    d = C.shape[1]
    sign = torch.where(torch.arange(d, device=C.device) % 2 == 0, 1.0, -1.0).to(C.dtype)
    cnt = counts.tolist()
    n_split = 0
    for ci in empty:
        cj = max(range(len(cnt)), key=lambda j: (cnt[j], -j))
        if cnt[cj] <= 1:
            break
        C[ci] = C[cj] * (1.0 + sign * SPLIT_EPS)
        C[cj] = C[cj] * (1.0 - sign * SPLIT_EPS)
        cnt[ci] = cnt[cj] // 2
        cnt[cj] -= cnt[ci]
        n_split += 1
    counts.copy_(torch.tensor(cnt, dtype=counts.dtype))
    return n_split


def updated_centroids(C: torch.Tensor, sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Cluster means (divided in the sums' dtype, then rounded to C's), C kept for empty clusters,
    which split_empty then fills. `counts` is not modified."""
    if C.device.type == "cpu" and sums.device.type == "cpu":
        # NumPy for these (k, d) ops on the CPU: torch would run each on its thread pool (see
        # ops._elkan.ElkanState.step); the same IEEE division and rounding, so the same bits.
        cnt = counts.numpy()
        S = sums.numpy()
        nz = cnt > 0
        if nz.all():   # the usual case, without the masks or the split's torch ops
            return torch.from_numpy((S / cnt.astype(S.dtype)[:, None]).astype(C.numpy().dtype))
        Cn = C.numpy().copy()
        Cn[nz] = (S[nz] / cnt[nz].astype(S.dtype)[:, None]).astype(Cn.dtype)
        C = torch.from_numpy(Cn)
    else:
        C = C.clone()
        counts = counts.to(C.device)
        nzt = counts > 0
        C[nzt] = (sums.to(C.device)[nzt] / counts[nzt].to(sums.dtype)[:, None]).to(C.dtype)
    split_empty(C, counts.clone())
    return C


def converged(prev: float, inertia: float, tol: float) -> bool:
    """The stopping rule: the inertia fell by no more than ``tol`` relative to the previous one."""
    return prev < float("inf") and prev - inertia <= tol * max(prev, 1e-300)


def _total(d2, segments: int | None):
    if callable(d2):
        d2 = d2()
    if segments is not None:
        return [float(v) for v in (d2.tolist() if isinstance(d2, torch.Tensor) else d2)]
    if isinstance(d2, torch.Tensor):
        if d2.device.type == "cpu":   # NumPy on the calling thread, not a reduction on torch's pool
            return float(d2.numpy().sum(dtype=np.float64))
        return float(d2.sum(dtype=torch.float64))
    return float(d2)


def lloyd_step(C: torch.Tensor, assign: Assigner, reduce: Reducer, segments: int | None = None) -> Step:
    """One Lloyd step for centroids C: assign every row, reduce to per-cluster sums and counts.
    ``segments``: the number of independent problems whose centroids C concatenates (inertia per
    problem); None for one problem."""
    a = assign(C)
    if not isinstance(a, Assignment):
        a = Assignment(*a)
    sums, counts = reduce(a.labels, C.shape[0])
    return Step(_total(a.d2, segments), sums, counts, a.reevaluated)


def lloyd(C: torch.Tensor, assign: Assigner, reduce: Reducer, *, n_iter: int, tol: float,
          segments: list[tuple[int, int]] | None = None, stats: list | None = None) -> tuple[torch.Tensor, int]:
    """Lloyd iterations from C: at most n_iter steps (:func:`lloyd_step`), each followed by the
    centroid update; stops early by ``converged``. Returns (centroids after the last update,
    iterations run).

    ``segments``: [(start, stop), ...] row ranges of C holding independent problems (the batched
    RQ-KMeans): each gets its own update, empty-cluster split and stopping rule; a problem that has
    stopped keeps its centroids while the others go on, and the run ends when all have stopped.
    ``stats``: if a list, each iteration after the first appends the step's re-evaluated share."""
    return run(C, n_iter, tol, lambda C_: lloyd_step(C_, assign, reduce, None if segments is None else len(segments)),
               stats, segments)


def run(C: torch.Tensor, n_iter: int, tol: float, step: Callable[[torch.Tensor], Step],
        stats: list | None = None, segments: list[tuple[int, int]] | None = None) -> tuple[torch.Tensor, int]:
    """:func:`lloyd` for an executor whose assignment and reduction are one call (``step(C) -> Step``)."""
    it = 0
    if stats is not None:
        stats.clear()
    if segments is None:
        prev = float("inf")
        for it in range(1, n_iter + 1):
            s = step(C)
            if stats is not None and it > 1:
                stats.append(float(s.reevaluated))
            C = updated_centroids(C, s.sums, s.counts)
            total = cast(float, s.inertia)          # one sum without segments
            if converged(prev, total, tol):
                break
            prev = total
        return C, it
    prevs = [float("inf")] * len(segments)
    active = [b > a for a, b in segments]
    if not any(active):
        return C, 0
    for it in range(1, n_iter + 1):
        s = step(C)
        if stats is not None and it > 1:
            stats.append(float(s.reevaluated))
        C = C.clone()
        totals = cast("list[float]", s.inertia)    # one sum per segment
        for p, (a, b) in enumerate(segments):
            if not active[p]:
                continue
            C[a:b] = updated_centroids(C[a:b], s.sums[a:b], s.counts[a:b])
            if converged(prevs[p], totals[p], tol):
                active[p] = False
            else:
                prevs[p] = totals[p]
        if not any(active):
            break
    return C, it
