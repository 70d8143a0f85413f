"""Semiring products for the fuzzy Galois connection, routing and meet cardinality.

One kernel, three semirings, selected by a compile-time ``OP``:

* ``MINPLUS`` (Łukasiewicz up/down):  out[i, j] = min(1, 1 + min_k (B[k, j] − A[i, k]))
* ``MAXPLUS`` (fuzzy routing, eq. 16): out[i, j] = max(0, max_k (A[i, k] + B[k, j]) − 1)
* ``MINSUM`` (meet cardinality):      out[i, j] = Σ_k min(A[i, k], B[k, j])

Operands are addressed through strides, so transposed views (``I.t()``) cost nothing. Each program
owns a BM×BN output tile held in registers and walks the reduction in BK-wide slabs, each as BK
rank-1 updates (a column of A against a row of B, combined and folded into the tile element-wise):
no reduction crosses lanes or warps, so no shared memory is used. The clamp (the Łukasiewicz
epilogue) is applied once, after the whole reduction.

When the output is too small to fill the GPU (132 × 1,000,000 × 132: a 132×132 output with a
million-long reduction), the reduction is split over a third grid axis; each split writes a partial
tile to a workspace and ``semiring_mm`` combines the partials (min/max are exact in any order; the
sum changes association, which meet_cardinality's tolerance covers) before the epilogue.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._utils import interpret, launch, sm_count

MINPLUS, MAXPLUS, MINSUM = 0, 1, 2
_OPS = {"minplus": MINPLUS, "maxplus": MAXPLUS, "minsum": MINSUM}


@triton.jit
def _rank1(acc, a_row, b_col, k, s_ak, s_bk, mmask, nmask, OP: tl.constexpr):
    """acc ⊕= A[:, k] ⊗ B[k, :] in semiring OP (k int64: k × stride may pass 2³¹)."""
    a = tl.load(a_row + k * s_ak, mask=mmask, other=0)
    b = tl.load(b_col + k * s_bk, mask=nmask, other=0)
    if OP == 0:
        return tl.minimum(acc, b[None, :] - a[:, None])
    elif OP == 1:
        return tl.maximum(acc, a[:, None] + b[None, :])
    else:
        return acc + tl.minimum(a[:, None], b[None, :])


@triton.jit
def _semiring_kernel(a_ptr, b_ptr, out_ptr, M, N, K, k_per_split,
                     s_am, s_ak, s_bk, s_bn, s_om, s_on, s_os,
                     OP: tl.constexpr, EPILOGUE: tl.constexpr, ACC: tl.constexpr,
                     BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # N on grid axis 0 (up to 2³¹−1 programs): axes 1 and 2 stop at 65,535, which N = 5M would pass
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_s = tl.program_id(2)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mmask = offs_m < M
    nmask = offs_n < N
    # element offsets in int64: index × stride passes 2³¹ for operands of more than 2³¹ elements
    # (A of 2,148 × 1M; Iᵀ with 10M chunks), where int32 products would wrap
    om = offs_m.to(tl.int64)
    on = offs_n.to(tl.int64)
    k_lo = pid_s * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)
    if OP == 2:
        acc = tl.zeros((BM, BN), dtype=ACC)
    elif OP == 0:
        acc = tl.full((BM, BN), float("inf"), dtype=ACC)
    else:
        acc = tl.full((BM, BN), float("-inf"), dtype=ACC)
    # Rank-1 updates: column k of A against row k of B, folded straight into the (BM, BN)
    # accumulator. Nothing is reduced across lanes or warps, so the loop needs no shared memory (a
    # BM×BK×BN block reduced over its middle axis would make Triton 3.6 lay BK over the warps and
    # stage 64 KB per program through shared memory). Whole BK-slabs are unrolled; the tail (< BK) runs one k at a time, so no k is
    # ever masked and padded rows and columns (never stored) may hold anything.
    a_row = a_ptr + om * s_am
    b_col = b_ptr + on * s_bn
    k_full = k_lo + tl.maximum(k_hi - k_lo, 0) // BK * BK
    for k0 in range(k_lo, k_full, BK):
        for j in tl.static_range(BK):
            acc = _rank1(acc, a_row, b_col, tl.cast(k0 + j, tl.int64), s_ak, s_bk, mmask, nmask, OP)
    for k in range(k_full, k_hi):
        acc = _rank1(acc, a_row, b_col, tl.cast(k, tl.int64), s_ak, s_bk, mmask, nmask, OP)
    if EPILOGUE:
        if OP == 0:
            acc = tl.minimum(acc + 1.0, 1.0)
        elif OP == 1:
            acc = tl.maximum(acc - 1.0, 0.0)
    tl.store(out_ptr + pid_s.to(tl.int64) * s_os + om[:, None] * s_om + on[None, :] * s_on, acc,
             mask=mmask[:, None] & nmask[None, :])


def _tile(x: int) -> int:
    """64, or 32 where it pads less (132 -> 160 rather than 192: the index's 132-wide sets)."""
    return 32 if triton.cdiv(x, 32) * 32 < triton.cdiv(x, 64) * 64 else 64


def _blocks(dtype, interp: bool, M: int = 64, N: int = 64):
    if interp:
        return 32, 32, 16, 4
    if dtype == torch.float64:
        return 32, 32, 4, 4
    bm, bn = _tile(M), _tile(N)
    return bm, bn, 4, (8 if bm * bn >= 4096 else 4)


MAX_GRID_YZ = 65535  # CUDA limit of grid axes 1 and 2 (axis 0 takes 2³¹ − 1)


def launch_plan(M: int, N: int, K: int, BM: int, BN: int, BK: int, split: int):
    """(row chunks [(row0, rows)], grid of one chunk, reduction length per split, split).

    N tiles go on grid axis 0, M tiles on axis 1 and splits on axis 2; an M with more than 65,535
    tiles is launched in row chunks, and the split stays ≤ 65,535."""
    split = max(1, min(int(split), K, MAX_GRID_YZ))
    kps = triton.cdiv(triton.cdiv(K, split), BK) * BK  # reduction length per split, a BK multiple
    split = triton.cdiv(K, kps)
    rows = MAX_GRID_YZ * BM
    chunks = [(r0, min(rows, M - r0)) for r0 in range(0, M, rows)]
    grid = (triton.cdiv(N, BN), triton.cdiv(min(M, rows), BM), split)
    return chunks, grid, kps, split


def choose_blocks(M: int, N: int, K: int, dtype, device, *, split: int | None = None, blocks: tuple | None = None):
    """(BM, BN, BK, warps, split) semiring_mm uses: by default enough reduction splits for two
    programs per SM, each at least 8 slabs long."""
    interp = interpret()
    BM, BN, BK, warps = blocks or _blocks(dtype, interp, M, N)
    if split is None:
        tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
        target = 1 if interp else 2 * sm_count(device)
        split = max(1, min(triton.cdiv(target, tiles), triton.cdiv(K, 8 * BK)))
    return BM, BN, BK, warps, launch_plan(M, N, K, BM, BN, BK, split)[3]


def semiring_mm(A: torch.Tensor, B: torch.Tensor, op: str, *, split: int | None = None,
                blocks: tuple | None = None) -> torch.Tensor:
    """out (M, N) from A (M, K) and B (K, N) (any strides) in semiring ``op`` with its epilogue.

    ``split``: number of reduction splits (default: enough programs to fill the GPU).
    """
    code = _OPS[op]
    M, K = A.shape
    K2, N = B.shape
    assert K == K2, (A.shape, B.shape)
    dt = A.dtype
    assert B.dtype == dt and dt in (torch.float32, torch.float64), (A.dtype, B.dtype)
    out = torch.empty((M, N), dtype=dt, device=A.device)
    if M == 0 or N == 0:
        return out
    if K == 0:
        return out.fill_(1.0 if code == MINPLUS else 0.0)
    BM, BN, BK, warps, split = choose_blocks(M, N, K, dt, A.device, split=split, blocks=blocks)
    chunks, _, kps, split = launch_plan(M, N, K, BM, BN, BK, split)
    acc = tl.float64 if dt == torch.float64 else tl.float32
    dst = out if split == 1 else torch.empty((split, M, N), dtype=dt, device=A.device)
    for r0, rows in chunks:
        a = A[r0:r0 + rows]
        grid = (triton.cdiv(N, BN), triton.cdiv(rows, BM), split)
        if split == 1:
            o = dst[r0:r0 + rows]
            strides = (o.stride(0), o.stride(1), 0)
        else:
            o = dst[:, r0:r0 + rows]
            strides = (o.stride(1), o.stride(2), o.stride(0))
        launch(_semiring_kernel, grid, (a, B, o, rows, N, K, kps,
                                        a.stride(0), a.stride(1), B.stride(0), B.stride(1)) + strides,
               dict(OP=code, EPILOGUE=split == 1, ACC=acc, BM=BM, BN=BN, BK=BK, num_warps=warps))
    if split == 1:
        return out
    part = dst
    if code == MINPLUS:
        return torch.clamp_max(part.amin(dim=0) + 1.0, 1.0, out=out)
    if code == MAXPLUS:
        return torch.clamp_min(part.amax(dim=0) - 1.0, 0.0, out=out)
    return torch.sum(part, dim=0, out=out)


# ---- the four ops, in the shapes of contextrag.ops ------------------------------------------

def luk_up(A: torch.Tensor, I: torch.Tensor, **kw) -> torch.Tensor:
    """A (s, G), I (G, M) -> (s, M) = min(1, 1 + min_g (I[g, m] − A[s, g]))."""
    return semiring_mm(A, I, "minplus", **kw)


def luk_down(B: torch.Tensor, I: torch.Tensor, **kw) -> torch.Tensor:
    """B (s, M), I (G, M) -> (s, G) = min(1, 1 + min_m (I[g, m] − B[s, m])): the up-product over Iᵀ."""
    return semiring_mm(B, I.t(), "minplus", **kw)


def fuzzy_route(mu: torch.Tensor, I: torch.Tensor, **kw) -> torch.Tensor:
    """mu (Q, V), I (C, V) -> (Q, C) = max(0, max_v (mu[q, v] + I[c, v]) − 1)."""
    return semiring_mm(mu, I.t(), "maxplus", **kw)


def meet_cardinality(A: torch.Tensor, B: torch.Tensor, **kw) -> torch.Tensor:
    """A (p, G), B (q, G) -> (p, q) = Σ_g min(A[i, g], B[j, g])."""
    return semiring_mm(A, B.t(), "minsum", **kw)


def terms(M: int, N: int, K: int) -> int:
    """Semiring terms (one combine + one reduce each) of an (M, K) × (K, N) product."""
    return int(M) * int(N) * int(K)


__all__ = ["semiring_mm", "launch_plan", "luk_up", "luk_down", "fuzzy_route", "meet_cardinality", "terms",
           "MINPLUS", "MAXPLUS", "MINSUM"]


# ---- meet cardinality on int8 tensor cores for memberships quantised to L levels ------------

LEVELS_BLOCKS = (64, 64, 64)  # (BM, BN, BK) on a GPU

@triton.jit
def _meet_levels_kernel(a_ptr, b_ptr, ws_ptr, M, N, K, L, k_per_split,
                        s_am, s_ak, s_bk, s_bn, s_wm, s_wn, s_ws,
                        UPCAST: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_n = tl.program_id(0)  # as in _semiring_kernel: N on the unlimited axis, int64 offsets
    pid_m = tl.program_id(1)
    pid_s = tl.program_id(2)
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    mmask = offs_m < M
    nmask = offs_n < N
    om = offs_m.to(tl.int64)
    on = offs_n.to(tl.int64)
    k_lo = pid_s * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)
    if UPCAST:
        acc = tl.zeros((BM, BN), dtype=tl.float32)  # the interpreter's int8 dot is not trusted
    else:
        acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k0 in range(k_lo, k_hi, BK):
        offs_k = k0 + tl.arange(0, BK)
        kmask = offs_k < k_hi
        ok = offs_k.to(tl.int64)
        a = tl.load(a_ptr + om[:, None] * s_am + ok[None, :] * s_ak,
                    mask=mmask[:, None] & kmask[None, :], other=0.0).to(tl.float32)
        b = tl.load(b_ptr + ok[:, None] * s_bk + on[None, :] * s_bn,
                    mask=kmask[:, None] & nmask[None, :], other=0.0).to(tl.float32)
        qa = tl.floor(a * L + 0.5).to(tl.int32)  # level index 0..L
        qb = tl.floor(b * L + 0.5).to(tl.int32)
        for t in range(1, L + 1):
            if UPCAST:
                acc = tl.dot((qa >= t).to(tl.float32), (qb >= t).to(tl.float32), acc, input_precision="ieee")
            else:
                acc = tl.dot((qa >= t).to(tl.int8), (qb >= t).to(tl.int8), acc, out_dtype=tl.int32)
    tl.store(ws_ptr + pid_s.to(tl.int64) * s_ws + om[:, None] * s_wm + on[None, :] * s_wn, acc.to(tl.int32),
             mask=mmask[:, None] & nmask[None, :])


def meet_cardinality_levels(A: torch.Tensor, B: torch.Tensor, levels: int, *, split: int | None = None) -> torch.Tensor:
    """Σ_g min(qA[i,g], qB[j,g]) / L for memberships rounded to L levels (q = round(L·u)), with
    integer-exact accumulation, as L int8 tensor-core GEMMs per tile:
    min(a, b) = Σ_{t=1..L} [a ≥ t]·[b ≥ t] for integers 0 ≤ a, b ≤ L.

    Equals ``meet_cardinality`` (up to the final division) when A and B are multiples of 1/L;
    otherwise it is the meet cardinality of the rounded memberships (each |error| ≤ G/(2L)).
    A (p, G), B (q, G) -> float32 (p, q). The reduction is split like ``semiring_mm``'s; partial
    counts are integers, so the split changes nothing.
    """
    L = int(levels)
    if not 1 <= L <= 127:
        raise ValueError(f"levels must be in [1, 127], got {levels}")
    p, G = A.shape
    q = B.shape[0]
    if p == 0 or q == 0 or G == 0:
        return torch.zeros((p, q), dtype=torch.float32, device=A.device)
    interp = interpret()
    BM, BN, BK = (16, 16, 32) if interp else LEVELS_BLOCKS
    tiles = triton.cdiv(p, BM) * triton.cdiv(q, BN)
    if split is None:
        target = 1 if interp else 2 * sm_count(A.device)
        split = max(1, min(triton.cdiv(target, tiles), triton.cdiv(G, 8 * BK)))
    chunks, _, kps, split = launch_plan(p, q, G, BM, BN, BK, split)
    ws = torch.empty((split, p, q), dtype=torch.int32, device=A.device)
    Bt = B.t()
    for r0, rows in chunks:
        a, w = A[r0:r0 + rows], ws[:, r0:r0 + rows]
        grid = (triton.cdiv(q, BN), triton.cdiv(rows, BM), split)
        launch(_meet_levels_kernel, grid, (a, Bt, w, rows, q, G, L, kps,
                                           a.stride(0), a.stride(1), Bt.stride(0), Bt.stride(1),
                                           w.stride(1), w.stride(2), w.stride(0)),
               dict(UPCAST=interp, BM=BM, BN=BN, BK=BK, num_warps=4))
    return (ws.sum(dim=0, dtype=torch.int64).double() / L).float()
