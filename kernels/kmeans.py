"""K-means on the GPU: the distance GEMM fused with the argmin, and per-cluster partial sums.

``assign``: each program owns BN rows of X and walks *all* centroids (BK at a time) and the whole
feature axis (BD at a time), accumulating x·c on tensor cores (``tl.dot``; bf16/fp16 inputs with
fp32 accumulation; fp32 inputs as three-pass TF32 (tf32x3, about fp32 accuracy) or plain TF32 when
torch allows it, exact IEEE fp32 under the interpreter; fp64 as FMA reductions). Per centroid block it
forms ‖c‖² − 2x·c, takes the block's min/argmin and folds it into a running (min, index) pair per
row. Because one program sees every centroid of its rows there is no cross-program race and no n×k
matrix ever leaves registers; ties go to the lowest index (strict < across blocks, leftmost argmin
within one). ‖x‖² is accumulated from the same loaded tiles and added only to the returned distance.

``assign`` also runs many independent problems in one launch (batched RQ-KMeans): rows are
concatenated, a block table maps each program to (problem, first row, end row), and each problem
reads its own slice of the concatenated codebook through per-problem centroid offsets.

``update``: per-cluster sums as a one-hot GEMM. Each program takes a chunk of rows and a BD-wide
slice of features, builds the (KP × BN) one-hot matrix of its labels in registers and accumulates
onehot · X_tile with ``tl.dot`` into a (KP × BD) partial, then adds the partial to the global sums
with one atomic per element (n/CHUNK·k·d atomics in all, not n·d). Counts come from the same one-hot.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._utils import fp32_precision, interpret, launch_with_fallback


@triton.jit
def _assign_kernel(x_ptr, c_ptr, cn_ptr, lab_ptr, d2_ptr,
                   blk_prob_ptr, blk_row0_ptr, prob_row1_ptr, prob_coff_ptr, prob_k_ptr,
                   N, K, D, s_xn, s_xd, s_cn, s_cd,
                   SEGMENTED: tl.constexpr, UPCAST: tl.constexpr, MODE: tl.constexpr, PREC: tl.constexpr,
                   BN: tl.constexpr, BK: tl.constexpr, BD: tl.constexpr):
    # MODE 0: tl.dot (bf16/fp16 -> fp32 acc);  1: fp32 tl.dot with precision PREC;  2: fp64 FMA reduction
    pid = tl.program_id(0)
    if SEGMENTED:
        prob = tl.load(blk_prob_ptr + pid)
        row0 = tl.load(blk_row0_ptr + pid)
        row1 = tl.load(prob_row1_ptr + prob)
        c0 = tl.load(prob_coff_ptr + prob)
        kk = tl.load(prob_k_ptr + prob)
    else:
        row0 = pid * BN
        row1 = N
        c0 = 0
        kk = K
    rows = row0 + tl.arange(0, BN)
    rmask = rows < row1
    rows64 = rows.to(tl.int64)
    if MODE == 2:
        best = tl.full((BN,), float("inf"), dtype=tl.float64)
        xn = tl.zeros((BN,), dtype=tl.float64)
    else:
        best = tl.full((BN,), float("inf"), dtype=tl.float32)
        xn = tl.zeros((BN,), dtype=tl.float32)
    besti = tl.zeros((BN,), dtype=tl.int32)
    for k0 in range(0, kk, BK):
        cols = k0 + tl.arange(0, BK)
        cmask = cols < kk
        ccols = (c0 + cols).to(tl.int64)
        if MODE == 2:
            acc = tl.zeros((BN, BK), dtype=tl.float64)
        else:
            acc = tl.zeros((BN, BK), dtype=tl.float32)
        for d0 in range(0, D, BD):
            dd = d0 + tl.arange(0, BD)
            dmask = dd < D
            x = tl.load(x_ptr + rows64[:, None] * s_xn + dd[None, :] * s_xd,
                        mask=rmask[:, None] & dmask[None, :], other=0.0)
            c = tl.load(c_ptr + ccols[:, None] * s_cn + dd[None, :] * s_cd,
                        mask=cmask[:, None] & dmask[None, :], other=0.0)
            if UPCAST:
                x = x.to(tl.float32)
                c = c.to(tl.float32)
            if MODE == 0:
                acc = tl.dot(x, tl.trans(c), acc)
            elif MODE == 1:
                acc = tl.dot(x, tl.trans(c), acc, input_precision=PREC)
            else:
                acc += tl.sum(x[:, None, :] * c[None, :, :], axis=2)
            if k0 == 0:
                xf = x.to(acc.dtype)
                xn += tl.sum(xf * xf, axis=1)
        cn = tl.load(cn_ptr + ccols, mask=cmask, other=0.0)
        dist = cn[None, :] - 2.0 * acc
        dist = tl.where(cmask[None, :], dist, float("inf"))
        bmin = tl.min(dist, axis=1)
        barg = tl.argmin(dist, axis=1).to(tl.int32) + k0
        upd = bmin < best
        best = tl.where(upd, bmin, best)
        besti = tl.where(upd, barg, besti)
    d2 = tl.maximum(best + xn, 0.0)
    tl.store(lab_ptr + rows64, besti.to(tl.int64), mask=rmask)
    tl.store(d2_ptr + rows64, d2, mask=rmask)


def _mode(dtype) -> int:
    if dtype in (torch.float16, torch.bfloat16):
        return 0
    if dtype == torch.float32:
        return 1
    return 2


def _assign_blocks(mode: int, interp: bool, k: int = 128):
    """(rows, centroids, features) per tile and warps. The centroid tile shrinks to the smallest power
    of two ≥ k (at least 16, the MMA minimum), so k = 12 or 24 does not pay for 128 columns."""
    if interp:
        return 32, 32, 32, 4
    bk = max(16, min(128, triton.next_power_of_2(max(int(k), 1))))
    if mode == 0:
        return 128, bk, 64, (8 if bk >= 64 else 4)
    if mode == 1:
        return 64, min(bk, 64), 32, 4
    return 16, 16, 16, 4


def _prep_centroids(X: torch.Tensor, C: torch.Tensor):
    """Centroids in the dot's input dtype and their squared norms from those same (rounded) values."""
    acc_dt = torch.float64 if X.dtype == torch.float64 else torch.float32
    Cd = C.to(X.dtype).contiguous()
    cn = (Cd.to(acc_dt) ** 2).sum(dim=1)
    return Cd, cn, acc_dt


def assign(X: torch.Tensor, C: torch.Tensor, *, blocks: tuple | None = None):
    """(labels int64 (n,), squared distances (n,)) of each row of X to its nearest centroid."""
    n, d = X.shape
    k = C.shape[0]
    Cd, cn, acc_dt = _prep_centroids(X, C)
    labels = torch.empty(n, dtype=torch.int64, device=X.device)
    d2 = torch.empty(n, dtype=acc_dt, device=X.device)
    if n == 0:
        return labels, d2
    mode = _mode(X.dtype)
    interp = interpret()
    BN, BK, BD, warps = blocks or _assign_blocks(mode, interp, k)
    dummy = labels  # unused table pointers in the single-problem case
    launch_with_fallback(_assign_kernel, (triton.cdiv(n, BN),), (
        X, Cd, cn, labels, d2, dummy, dummy, dummy, dummy, dummy,
        n, k, d, X.stride(0), X.stride(1), Cd.stride(0), Cd.stride(1)),
        dict(SEGMENTED=False, UPCAST=interp and mode == 0, MODE=mode, PREC=fp32_precision(X.device),
             BN=BN, BK=BK, BD=BD, num_warps=warps), fp32=mode == 1)
    return labels, d2


def assign_segmented(X: torch.Tensor, row_off: torch.Tensor, C: torch.Tensor, c_off: torch.Tensor,
                     *, blocks: tuple | None = None, tables=None):
    """Batched assignment: problem p owns rows row_off[p]:row_off[p+1] of X and centroids
    c_off[p]:c_off[p+1] of C. Returns problem-local labels and squared distances, in one launch.

    ``tables``: the block table from :func:`block_table` (reuse it across Lloyd iterations).
    """
    n, d = X.shape
    Cd, cn, acc_dt = _prep_centroids(X, C)
    labels = torch.empty(n, dtype=torch.int64, device=X.device)
    d2 = torch.empty(n, dtype=acc_dt, device=X.device)
    mode = _mode(X.dtype)
    interp = interpret()
    kmax = max([int(c_off[i + 1]) - int(c_off[i]) for i in range(len(c_off) - 1)] or [1])
    BN, BK, BD, warps = blocks or _assign_blocks(mode, interp, kmax)
    if tables is None:
        tables = block_table(row_off, c_off, BN, X.device)
    blk_prob, blk_row0, row1, coff, kp = tables
    if n == 0 or blk_prob.numel() == 0:
        return labels, d2
    launch_with_fallback(_assign_kernel, (blk_prob.numel(),), (
        X, Cd, cn, labels, d2, blk_prob, blk_row0, row1, coff, kp,
        n, int(C.shape[0]), d, X.stride(0), X.stride(1), Cd.stride(0), Cd.stride(1)),
        dict(SEGMENTED=True, UPCAST=interp and mode == 0, MODE=mode, PREC=fp32_precision(X.device),
             BN=BN, BK=BK, BD=BD, num_warps=warps), fp32=mode == 1)
    return labels, d2


def block_table(row_off, c_off, BN: int | None = None, device=None, dtype=None):
    """(block→problem, block→first row, problem→end row, problem→centroid offset, problem→k)."""
    if BN is None:
        BN = _assign_blocks(_mode(dtype or torch.float32), interpret())[0]  # rows per tile: independent of k
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


# ---- update: per-cluster sums and counts -----------------------------------------------------

@triton.jit
def _update_kernel(x_ptr, lab_ptr, sums_ptr, counts_ptr, N, K, D, rows_per_prog, s_xn, s_xd,
                   UPCAST: tl.constexpr, FP32: tl.constexpr, PREC: tl.constexpr,
                   KP: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_d = tl.program_id(1)
    dd = pid_d * BD + tl.arange(0, BD)
    dmask = dd < D
    ks = tl.arange(0, KP)
    acc = tl.zeros((KP, BD), dtype=tl.float32)
    cnt = tl.zeros((KP,), dtype=tl.int32)
    r_lo = pid_r * rows_per_prog
    r_hi = tl.minimum(N, r_lo + rows_per_prog)
    for r0 in range(r_lo, r_hi, BN):
        rows = r0 + tl.arange(0, BN)
        rmask = rows < r_hi
        rows64 = rows.to(tl.int64)
        lab = tl.load(lab_ptr + rows64, mask=rmask, other=-1).to(tl.int32)
        x = tl.load(x_ptr + rows64[:, None] * s_xn + dd[None, :] * s_xd,
                    mask=rmask[:, None] & dmask[None, :], other=0.0)
        hit = ks[:, None] == lab[None, :]
        if UPCAST:
            x = x.to(tl.float32)
        onehot = hit.to(x.dtype)
        if FP32:
            acc = tl.dot(onehot, x, acc, input_precision=PREC)
        else:
            acc = tl.dot(onehot, x, acc)
        if pid_d == 0:
            cnt += tl.sum(hit.to(tl.int32), axis=1)
    kmask = ks < K
    tl.atomic_add(sums_ptr + ks[:, None].to(tl.int64) * D + dd[None, :], acc,
                  mask=kmask[:, None] & dmask[None, :])
    if pid_d == 0:
        tl.atomic_add(counts_ptr + ks, cnt, mask=kmask)


MAX_UPDATE_K = 256


def update_blocks(KP: int, interp: bool):
    """(rows per step, features per program, warps) for KP (k padded to a power of two ≥ 16): the
    (KP × BD) fp32 partial stays at 8,192 elements."""
    if interp:
        return 32, 32, 4
    return 64, max(16, min(128, 8192 // KP)), (4 if KP <= 64 else 8)


def update(X: torch.Tensor, labels: torch.Tensor, k: int, *, rows_per_prog: int | None = None):
    """Per-cluster sums (k, d) (float32; float64 input falls back to torch on the device) and counts (k,)."""
    n, d = X.shape
    # d = 0 too: the kernel counts in its first feature block, and there is none to launch
    if X.dtype == torch.float64 or k > MAX_UPDATE_K or n == 0 or d == 0:
        wd = torch.float64 if X.dtype == torch.float64 else torch.float32
        sums = torch.zeros((k, d), dtype=wd, device=X.device)
        if n:
            sums.index_add_(0, labels, X.to(wd))
        return sums, torch.bincount(labels, minlength=k)
    interp = interpret()
    KP = max(16, triton.next_power_of_2(k))
    BN, BD, warps = update_blocks(KP, interp)
    if rows_per_prog is None:
        if interp:
            rows_per_prog = 64
        else:
            sm = torch.cuda.get_device_properties(X.device).multi_processor_count
            progs_r = max(1, (4 * sm) // triton.cdiv(d, BD))
            rows_per_prog = triton.cdiv(triton.cdiv(n, progs_r), BN) * BN
    sums = torch.zeros((k, d), dtype=torch.float32, device=X.device)
    counts = torch.zeros(k, dtype=torch.int32, device=X.device)
    grid = (triton.cdiv(n, rows_per_prog), triton.cdiv(d, BD))
    # fp32 sums: the one-hot side is exact in any precision; X needs tf32x3 (or ieee) to stay fp32-accurate
    prec = fp32_precision(X.device)
    launch_with_fallback(_update_kernel, grid, (X, labels, sums, counts, n, k, d, rows_per_prog,
                                                X.stride(0), X.stride(1)),
                         dict(UPCAST=interp and X.dtype != torch.float32, FP32=X.dtype == torch.float32,
                              PREC="tf32x3" if prec == "tf32" else prec,
                              KP=KP, BN=BN, BD=BD, num_warps=warps),
                         fp32=X.dtype == torch.float32)
    return sums, counts.to(torch.int64)
