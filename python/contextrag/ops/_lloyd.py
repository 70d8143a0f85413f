"""The one Lloyd driver: centroid update, empty-cluster split, stopping rule and statistics.

The plain and bounded CPU loops in ``ops.kmeans`` and the Ray build in ``distributed.kmeans`` supply
only a *step*: for the current centroids, the per-cluster sums, counts and the inertia of the
assignment to them. Everything else is here, so those loops cannot drift apart (the Ray build is
tested to give the single-process centroids bit for bit). The batched GPU fit
(``ops._kmeans_gpu.rq_kmeans_batched_impl``) runs a loop of its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import torch

from .. import ref

SPLIT_EPS = ref.kmeans.SPLIT_EPS


@dataclass(frozen=True)
class LloydOptions:
    """How the CPU fit runs (results are the same labels either way, up to rounding-level ties).

    bounded: Elkan-bounded iterations (``ops._elkan``) where the bounds fit ``max_bound_bytes``;
        False runs the plain loop (a full distance GEMM per iteration).
    bf16_screen: the bounded loop's re-evaluation GEMM on bf16 operands where the CPU dispatch is
        AVX-512 with AVX512-BF16 (float32 X); labels stay exact (see docs/KERNELS.md).
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
    bounded: bool = True
    bf16_screen: bool = True
    max_bound_bytes: int = 2 << 30
    snapshot_bytes: int = 256 << 20
    hugepages: bool = False
    stats: list | None = field(default=None, repr=False)


DEFAULT_OPTIONS = LloydOptions()


class Step(NamedTuple):
    inertia: float          # Σ ‖x − c(x)‖² for the centroids the step was given
    sums: torch.Tensor      # (k, d) per-cluster sums of the points assigned to them
    counts: torch.Tensor    # (k,) int64
    reevaluated: float = 1.0   # share of points whose distances were computed (statistics)


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
        Cn = C.numpy().copy()
        cnt = counts.numpy()
        nz = cnt > 0
        S = sums.numpy()
        Cn[nz] = (S[nz] / cnt[nz].astype(S.dtype)[:, None]).astype(Cn.dtype)
        C = torch.from_numpy(Cn)
    else:
        C = C.clone()
        counts = counts.to(C.device)
        nz = counts > 0
        C[nz] = (sums.to(C.device)[nz] / counts[nz].to(sums.dtype)[:, None]).to(C.dtype)
    split_empty(C, counts.clone())
    return C


def converged(prev: float, inertia: float, tol: float) -> bool:
    """The stopping rule: the inertia fell by no more than ``tol`` relative to the previous one."""
    return prev < float("inf") and prev - inertia <= tol * max(prev, 1e-300)


def run(C: torch.Tensor, n_iter: int, tol: float, step: Callable[[torch.Tensor], Step],
        stats: list | None = None) -> tuple[torch.Tensor, int]:
    """Lloyd iterations from C: at most n_iter steps, each followed by the centroid update; stops
    early by ``converged``. Returns (centroids after the last update, iterations run)."""
    prev = float("inf")
    it = 0
    if stats is not None:
        stats.clear()
    for it in range(1, n_iter + 1):
        s = step(C)
        if stats is not None and it > 1:
            stats.append(float(s.reevaluated))
        C = updated_centroids(C, s.sums, s.counts)
        if converged(prev, s.inertia, tol):
            break
        prev = s.inertia
    return C, it
