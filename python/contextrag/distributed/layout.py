"""Shard layout and the row-exact distance pass (no Ray here: importable and testable anywhere).

Why row-exactness needs care: the single-process Lloyd loop (ops/kmeans.py) computes distances in
row blocks (``assign_block_rows``: ROW_BLOCK, or ``cpu_row_block(n, k)`` with the native epilogue)
with one GEMM per block. A BLAS GEMM gives every row the same bits
whatever the block's height *as long as the block is not tiny*: measured on MKL, blocks of 1, 2, 3,
5 or 7 rows take a different (gemv-like) kernel and round differently, blocks of 8+ rows agree
bitwise with any larger block. So a shard computes each run of its rows that falls into one of the
single-process blocks (the *global* block grid) as one GEMM, padding runs shorter than
``MIN_GEMM_ROWS`` with zero rows, unless the run is the whole global block (then the single process
used the same small height). Shard boundaries never split a global block shorter than
``MIN_GEMM_ROWS`` (only the last block of the grid can be that short).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..ops.kmeans import ROW_BLOCK, train_rows

MIN_GEMM_ROWS = 16


def shard_bounds(n: int, n_shards: int, *, doc_ids=None, block: int = ROW_BLOCK) -> list[tuple[int, int]]:
    """Split rows [0, n) into ``n_shards`` contiguous, near-equal [start, stop) ranges.

    With ``doc_ids`` (one per row, a document's chunks consecutive) every cut falls on a document
    boundary, so a window of consecutive chunks of one document never spans two shards. Never cuts
    the last global block when it is shorter than MIN_GEMM_ROWS (see module doc). Shards may be
    empty (n < n_shards, or documents larger than a shard).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    if isinstance(n_shards, bool) or not isinstance(n_shards, (int, np.integer)) or n_shards < 1:
        raise ValueError(f"n_shards must be an int >= 1, got {n_shards!r}")
    n, n_shards = int(n), int(n_shards)
    tail = n % block
    forbidden_lo = n - tail if (n > block and 0 < tail < MIN_GEMM_ROWS) else n   # cuts in (lo, n) banned
    if doc_ids is not None:
        if len(doc_ids) != n:
            raise ValueError(f"doc_ids has {len(doc_ids)} entries for n={n} rows")
        allowed = [0] + [i for i in range(1, n) if doc_ids[i] != doc_ids[i - 1]] + [n]
    else:
        allowed = None
    cuts = [0]
    for i in range(1, n_shards):
        c = round(i * n / n_shards)
        if allowed is not None:
            j = int(np.searchsorted(allowed, c))
            cand = [allowed[t] for t in (j - 1, j) if 0 <= t < len(allowed)]
            c = min(cand, key=lambda x: (abs(x - c), x))
        if forbidden_lo < c < n:
            c = forbidden_lo
            if allowed is not None:
                c = allowed[int(np.searchsorted(allowed, c, side="right")) - 1]
        cuts.append(max(c, cuts[-1]))
    cuts.append(n)
    return [(cuts[i], cuts[i + 1]) for i in range(n_shards)]


def global_segments(offset: int, n_local: int, n_total: int, block: int = ROW_BLOCK):
    """Yield (a, b, global_block_rows): local row runs [a, b) that each lie inside one global block."""
    a = 0
    while a < n_local:
        g = (offset + a) // block
        g_end = min((g + 1) * block, n_total)
        b = min(n_local, g_end - offset)
        yield a, b, g_end - g * block
        a = b


def assign_block_rows(n_total: int, k: int, device: str = "cpu") -> int:
    """The row-block height ops.kmeans_assign uses for an ``n_total``-row call with k centroids."""
    from ..ops import kmeans as _km
    if str(device).startswith("cpu") and hasattr(_km, "cpu_row_block") and _km.native_fn("kmeans_epilogue"):
        return int(_km.cpu_row_block(n_total, k))
    return ROW_BLOCK


def rowexact(fn: Callable, X: torch.Tensor, offset: int, n_total: int, *args, block: int = ROW_BLOCK,
             row_kw: dict | None = None):
    """Run a row-wise blocked op ``fn(X_rows, *args) -> tensor or tuple of tensors`` over a shard.

    ``X`` holds global rows [offset, offset + len(X)) of an ``n_total``-row matrix; each run of rows
    inside one global block goes to ``fn`` as one call, so every row sees the same GEMM as in the
    single-process loop. ``row_kw``: keyword tensors with one entry per row of X, sliced (and
    zero-padded) alongside it. Returns the outputs concatenated along rows.
    """
    n = X.shape[0]
    if n == 0:
        out = fn(X, *args)
        return out
    parts = []
    for a, b, g_rows in global_segments(offset, n, n_total, block):
        xs = X[a:b]
        kw = {k: v[a:b] for k, v in (row_kw or {}).items()}
        m = b - a
        if m < MIN_GEMM_ROWS and m != g_rows:
            pad = torch.zeros((MIN_GEMM_ROWS - m, X.shape[1]), dtype=X.dtype, device=X.device)
            kw = {k: torch.cat([v, v.new_zeros((MIN_GEMM_ROWS - m,) + tuple(v.shape[1:]))]).contiguous()
                  for k, v in kw.items()}
            out = fn(torch.cat([xs, pad]), *args, **kw)
            out = tuple(o[:m] for o in out) if isinstance(out, tuple) else out[:m]
        else:
            out = fn(xs, *args, **{k: v.contiguous() for k, v in kw.items()})
        parts.append(out)
    if isinstance(parts[0], tuple):
        return tuple(torch.cat([p[i] for p in parts]) for i in range(len(parts[0])))
    return torch.cat(parts)


def train_subsample(n: int, k: int, cap: int | None, seed: int) -> np.ndarray | None:
    """The sorted training rows ops.kmeans_fit draws for ``max_points_per_centroid`` (None: all rows)."""
    return train_rows(n, k, cap, seed)


def check_documents_whole(metas) -> None:
    """Raise unless every document's chunks lie in one shard (co-occurrence windows must be local).

    ``metas``: per shard {'doc_ids': [...]} in row order (empty shards allowed)."""
    prev_last, seen = None, set()
    for i, m in enumerate(metas):
        ids = list(m["doc_ids"]) if m is not None else []
        if not ids:
            continue
        if ids[0] == prev_last:
            raise ValueError(f"document {ids[0]!r} spans shards {i - 1} and {i}: shard the rows with "
                             "shard_bounds(..., doc_ids=...) so windows of one document stay in one shard")
        runs = [ids[0]] + [b for a, b in zip(ids, ids[1:]) if a != b]
        for d in runs:
            if d in seen:
                raise ValueError(f"document {d!r} is not contiguous in row order (found again in shard {i})")
            seen.add(d)
        if len(runs) != len(set(runs)):
            raise ValueError(f"a document is not contiguous in row order inside shard {i}")
        prev_last = ids[-1]
