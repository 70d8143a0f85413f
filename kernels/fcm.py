"""Fuzzy c-means memberships: the k-means distance tile with a single-pass membership epilogue.

Each program owns BN rows and *all* c centres (c padded to a power of two CP ≤ MAX_C, and only as
far as the device's shared memory holds the staged tiles: see ``plan``), so the whole
(BN × CP) squared-distance tile sits in registers after the feature loop (``tl.dot``, fp32
accumulation; fp32 inputs at the precision of ``kmeans.fp32_precision``). The epilogue, in the same program:

    D = ‖x‖² + ‖c‖² − 2x·c, set to 0 below 8 ulps of ‖x‖² + ‖c‖² (cancellation noise);  w = (D_min / D)^p with p = 1/(m−1);  u = w / Σw

which never overflows (every ratio ≤ 1). A row whose D_min is 0 (a point on a centre) becomes
one-hot on the first such centre, as the reference specifies. Memberships are clamped to [0, 1]
(a fast GPU division may round w/Σw to 1 + 1 ulp, which downstream unit-interval checks would
reject). Memberships are written once: the only n×c traffic is the output itself.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._utils import fp32_precision, interpret, launch_with_fallback

MAX_C = 1024
# Triton's default software pipelining depth for loops feeding tl.dot on NVIDIA GPUs
DEFAULT_STAGES = 3
# every launch that ran out of resources despite the plan: (c, mode, plan, error); the GPU check reads it
FALLBACKS: list = []
# relative threshold under which a GEMM-form squared distance is rounding noise (8 ulps)
SNAP = {torch.float32: 8 * torch.finfo(torch.float32).eps, torch.float64: 8 * torch.finfo(torch.float64).eps}


@triton.jit
def _fcm_kernel(x_ptr, c_ptr, cn_ptr, u_ptr, N, C, D, p, snap,
                s_xn, s_xd, s_cn, s_cd, s_un, s_uc,
                UPCAST: tl.constexpr, MODE: tl.constexpr, PREC: tl.constexpr, P_IS_ONE: tl.constexpr,
                BN: tl.constexpr, CP: tl.constexpr, BD: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BN + tl.arange(0, BN)
    rmask = rows < N
    rows64 = rows.to(tl.int64)
    cols = tl.arange(0, CP)
    cmask = cols < C
    if MODE == 2:
        acc = tl.zeros((BN, CP), dtype=tl.float64)
        xn = tl.zeros((BN,), dtype=tl.float64)
    else:
        acc = tl.zeros((BN, CP), dtype=tl.float32)
        xn = tl.zeros((BN,), dtype=tl.float32)
    for d0 in range(0, D, BD):
        dd = d0 + tl.arange(0, BD)
        dmask = dd < D
        x = tl.load(x_ptr + rows64[:, None] * s_xn + dd[None, :] * s_xd,
                    mask=rmask[:, None] & dmask[None, :], other=0.0)
        c = tl.load(c_ptr + cols[:, None] * s_cn + dd[None, :] * s_cd,
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
        xf = x.to(acc.dtype)
        xn += tl.sum(xf * xf, axis=1)
    cn = tl.load(cn_ptr + cols, mask=cmask, other=0.0)
    dist = xn[:, None] + cn[None, :] - 2.0 * acc
    # ‖x‖² + ‖c‖² − 2x·c carries an absolute error of a few ulps of ‖x‖² + ‖c‖²: anything below
    # that is a point on the centre, which the reference makes one-hot.
    dist = tl.where(dist <= snap * (xn[:, None] + cn[None, :]), 0.0, dist)
    dist = tl.where(cmask[None, :], dist, float("inf"))
    dmin = tl.min(dist, axis=1)
    amin = tl.argmin(dist, axis=1)
    on = dmin <= 0.0
    # ratio in (0, 1]; padded columns give 0. Rows on a centre: avoid 0/0 with a safe denominator.
    safe = tl.where(dist > 0.0, dist, 1.0)
    r = tl.where(dist > 0.0, dmin[:, None] / safe, 1.0)
    if P_IS_ONE:
        w = r
    else:
        w = tl.where(r > 0.0, tl.exp2(p * tl.log2(tl.where(r > 0.0, r, 1.0))), 0.0)
    w = tl.where(cmask[None, :], w, 0.0)
    u = tl.minimum(w / tl.sum(w, axis=1)[:, None], 1.0)
    onehot = tl.where(cols[None, :] == amin[:, None], 1.0, 0.0)
    u = tl.where(on[:, None], onehot, u)
    tl.store(u_ptr + rows64[:, None] * s_un + cols[None, :] * s_uc, u,
             mask=rmask[:, None] & cmask[None, :])


def _mode(dtype) -> int:
    if dtype in (torch.float16, torch.bfloat16):
        return 0
    return 1 if dtype == torch.float32 else 2


def smem_bytes(BN: int, CP: int, BD: int, stages: int, elem: int) -> int:
    """Shared memory of one program, an upper bound: ``stages − 1`` buffered copies of the X (BN×BD)
    and C (CP×BD) tiles plus the (BN×CP) fp32 epilogue scratch. It bounds what Triton 3.9 allocated
    in every plan compiled for sm_80 and sm_90 (c = 12…1024, bf16 and fp32; docs/GPU.md)."""
    return max(stages - 1, 1) * (BN + CP) * BD * elem + BN * CP * 4


def plans(c: int, mode: int, smem_limit: int, interp: bool = False):
    """Launch configurations (BN, CP, BD, warps, stages) for c centres that fit ``smem_limit`` bytes
    of shared memory, best first; empty when none does (c > MAX_C, or too little shared memory)."""
    if c > MAX_C:
        return []
    CP = max(16, triton.next_power_of_2(c))
    if interp:
        return [(16, CP, 32, 4, 1)]
    if mode == 2:
        BN, BD, warps, elem = 16, 8, 4, 8
    else:
        # 8 warps throughout: with 4, the 128-row tiles of c ≤ 64 spill (204–420 B per thread on sm_90)
        BN = max(16, min(128, 8192 // CP))
        BD, warps, elem = (64 if mode == 0 else 32), 8, (2 if mode == 0 else 4)
    out = []
    for stages, bd in ((DEFAULT_STAGES, BD), (2, BD), (DEFAULT_STAGES, BD // 2), (2, BD // 2), (1, BD), (1, BD // 2)):
        if bd >= 8 and smem_bytes(BN, CP, bd, stages, elem) <= smem_limit and (BN, CP, bd, warps, stages) not in out:
            out.append((BN, CP, bd, warps, stages))
    return out


def smem_limit(device) -> int:
    """Largest dynamic shared memory one program may opt in to on ``device`` (bytes)."""
    if interpret() or getattr(device, "type", "cpu") != "cuda":
        return 1 << 30
    idx = device.index if device.index is not None else torch.cuda.current_device()
    v = getattr(torch.cuda.get_device_properties(idx), "shared_memory_per_block_optin", None)
    if not v:
        from triton.runtime import driver
        v = driver.active.utils.get_device_properties(idx)["max_shared_mem"]
    return int(v)


def max_centres(device, dtype) -> int:
    """Largest c this kernel takes on ``device`` for X of ``dtype`` (beyond it: the torch path)."""
    mode, lim, interp = _mode(dtype), smem_limit(device), interpret()
    c = MAX_C
    while c >= 16 and not plans(c, mode, lim, interp):
        c //= 2
    return c if c >= 16 else 0


def memberships(X: torch.Tensor, C: torch.Tensor, m: float) -> torch.Tensor:
    """(n, c) FCM memberships (float32; float64 for float64 input). Requires c ≤ max_centres(...):
    ValueError beyond it; OutOfResources (recorded in FALLBACKS) if no plan compiles."""
    from triton.runtime.errors import OutOfResources

    n, d = X.shape
    c = C.shape[0]
    mode = _mode(X.dtype)
    interp = interpret()
    cands = plans(c, mode, smem_limit(X.device), interp)
    if not cands:
        raise ValueError(f"triton fcm_memberships handles at most {max_centres(X.device, X.dtype)} centres "
                         f"on this device for {X.dtype}, got {c}")
    acc_dt = torch.float64 if X.dtype == torch.float64 else torch.float32
    Cd = C.to(X.dtype).contiguous()
    cn = (Cd.to(acc_dt) ** 2).sum(dim=1)
    U = torch.empty((n, c), dtype=acc_dt, device=X.device)
    if n == 0:
        return U
    p = 1.0 / (float(m) - 1.0)
    err = None
    for BN, CP, BD, warps, stages in cands:
        kw = dict(UPCAST=interp and mode == 0, MODE=mode, PREC=fp32_precision(X.device), P_IS_ONE=(p == 1.0),
                  BN=BN, CP=CP, BD=BD, num_warps=warps)
        if not interp:
            kw["num_stages"] = stages
        try:
            launch_with_fallback(_fcm_kernel, (triton.cdiv(n, BN),), (
                X, Cd, cn, U, n, c, d, p, SNAP[acc_dt],
                X.stride(0), X.stride(1), Cd.stride(0), Cd.stride(1), U.stride(0), U.stride(1)),
                kw, fp32=mode == 1)
            return U
        except OutOfResources as e:  # the estimate was short: try the next smaller plan
            FALLBACKS.append({"c": c, "mode": mode, "plan": [BN, CP, BD, warps, stages], "error": str(e)[:300]})
            err = e
    raise err
