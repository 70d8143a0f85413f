"""Fuzzy c-means memberships and fitting.

u_ij = 1 / Σ_k (d_ij/d_ik)^(2/(m−1)), computed from the same blocked distance GEMM as
kmeans_assign with a single-pass epilogue: w_ik = (D_min/D_ik)^p, u = w / Σw, p = 1/(m−1).
"""
from __future__ import annotations

import math
import warnings
from typing import Generic, NamedTuple

import numpy as np
import torch

from .. import ref
from ._backend import native, select
from ._elkan import cpu_row_block
from ._precision import choose as choose_precision
from ._registry import IMPLS, register
from ._tensor import accepts_cupy, as_tensor, check_half_on_gpu, check_positive_int, same_device
from ._types import Array, ArrayT

ROW_BLOCK = 8192


class FCMResult(NamedTuple, Generic[ArrayT]):
    """The result of :func:`fcm_fit`; arrays of the input's kind and device.

    Attributes:
        centers: ``(c, d)`` centres (float32, float64 for float64 input).
        memberships: ``(n, c)`` memberships, rows sum to 1.
        n_iter: Iterations run.
        objective: Σ u^m ‖x − c‖².
        partition_coefficient: Σ u² / n: 1 crisp, 1/c uniform.
    """

    centers: ArrayT
    memberships: ArrayT
    n_iter: int
    objective: float
    partition_coefficient: float


def _check_m(m) -> float:
    if isinstance(m, bool) or not isinstance(m, (int, float)) or not np.isfinite(m) or m <= 1.0:
        raise ValueError(f"m must be a finite number > 1, got {m!r}")
    return float(m)


def _check_top_k(top_k, c):
    if top_k is None:
        return None
    return min(check_positive_int(top_k, "top_k"), c)


@accepts_cupy
def fcm_memberships(X: ArrayT, C: Array, m: float = 2.0, *, top_k: int | None = None,
                    backend: str | None = None) -> ArrayT:
    """Fuzzy c-means memberships of each row of X to each centre of C; a point on a centre gets a
    one-hot row.

    Args:
        X: ``(n, d)`` points; float32 or float64 (float16/bfloat16 on CUDA).
        C: ``(c, d)`` centres, c >= 1, on ``X``'s device.
        m: Fuzzifier, a finite number > 1.
        top_k: Keep only the k largest memberships of each row (the rest set to 0) and
            renormalise, for a sparse fuzzy context; None keeps all.
        backend: "ref", "cpu", "triton" or "cuda"; None picks the best available.

    Returns:
        ``(n, c)`` memberships, rows sum to 1 (float32, float64 for float64 ``X``), of ``X``'s
        kind and device.
    """
    tX, kind = as_tensor(X, "X", ndim=(2,), allow_half=True)
    tC, _ = as_tensor(C, "C", ndim=(2,), allow_half=True)
    check_half_on_gpu(tX, "X")
    check_half_on_gpu(tC, "C")
    same_device("X", tX, "C", tC)
    if tX.shape[1] != tC.shape[1]:
        raise ValueError(f"X has {tX.shape[1]} columns but C has {tC.shape[1]}; both must be (·, d)")
    if tC.shape[0] == 0:
        raise ValueError("C must hold at least one centre")
    m = _check_m(m)
    k = _check_top_k(top_k, tC.shape[0])
    _, impl = select("fcm_memberships", tX.device, backend, IMPLS["fcm_memberships"])
    wd = torch.float64 if tX.dtype == torch.float64 else torch.float32
    return kind.out(impl(tX, tC.to(wd), m, k))


def _topk_renorm(U: torch.Tensor, k: int | None) -> torch.Tensor:
    if k is None or k >= U.shape[1]:
        return U
    vals, idx = U.topk(k, dim=1)
    out = torch.zeros_like(U)
    out.scatter_(1, idx, vals / vals.sum(dim=1, keepdim=True))
    return out


def memberships_from_sqdist(D: torch.Tensor, m: float) -> torch.Tensor:
    """The FCM epilogue on a tile of squared distances (shared by every torch path)."""
    p = 1.0 / (m - 1.0)
    D = D.clamp_min(0.0)
    dmin, amin = D.min(dim=1, keepdim=True)
    W = (dmin / D).pow(p) if p != 1.0 else dmin / D
    on = dmin.squeeze(1) <= 0.0
    if bool(on.any()):
        W[on] = 0.0
        W[on, amin[on, 0]] = 1.0
    return W / W.sum(dim=1, keepdim=True)


@register("fcm_memberships", "ref")
def _ref_memberships(X, C, m, k):
    U = ref.fcm_memberships(X.detach().cpu().double().numpy(), C.detach().cpu().double().numpy(), m, k)
    return torch.from_numpy(U).to(device=X.device, dtype=C.dtype)


def _torch_memberships(X, C, m, k):
    """Pure torch (any device): blocked distance GEMM and the torch epilogue."""
    n = X.shape[0]
    U = torch.empty((n, C.shape[0]), dtype=C.dtype, device=X.device)
    cn = (C * C).sum(dim=1)
    Ct = C.t()
    for i in range(0, n, ROW_BLOCK):
        xb = X[i:i + ROW_BLOCK].to(C.dtype)
        D = torch.addmm(cn, xb, Ct, alpha=-2.0).add_((xb * xb).sum(dim=1, keepdim=True))
        U[i:i + ROW_BLOCK] = _topk_renorm(memberships_from_sqdist(D, m), k)
    return U


@register("fcm_memberships", "cpu")
def _cpu_memberships(X, C, m, k):
    """Blocked distance GEMM (torch CPU BLAS) + the C++ row epilogue (exact distance to the nearest
    centre, so a point on a centre gets an exact one-hot row)."""
    Cn = native()
    epi = getattr(Cn, "fcm_epilogue", None) if Cn is not None else None
    if epi is None or X.device.type != "cpu":
        return _torch_memberships(X, C, m, k)
    n = X.shape[0]
    C = C.contiguous()
    U = torch.empty((n, C.shape[0]), dtype=C.dtype, device=X.device)
    cn = (C * C).sum(dim=1)
    Ct = C.t()
    B = cpu_row_block(n, C.shape[0])
    buf = torch.empty((min(B, n), C.shape[0]), dtype=C.dtype)
    for i in range(0, n, B):
        xb = X[i:i + B].to(C.dtype).contiguous()
        D = torch.addmm(cn, xb, Ct, alpha=-2.0, out=buf[:xb.shape[0]])
        xn = torch.einsum("ij,ij->i", xb, xb).contiguous()
        ub = U[i:i + B]
        epi(D.numpy(), xb.numpy(), C.numpy(), xn.numpy(), m, ub.numpy())   # memberships only
        if k is not None:
            ub.copy_(_topk_renorm(ub, k))
    return U


PRECISIONS = ("full", "bf16", "mixed")
# bf16: the distance GEMM pairs the bf16 dot product with the norms of the bf16-rounded vectors, so it
# gives ‖x̃ − c̃‖² between the rounded points: error ≤ 2‖x − c‖·‖δx − δc‖ + ‖δx − δc‖², small where
# the distance is (with exact norms it is ~2^-8‖x‖‖c‖ everywhere). Distances below
# BF16_SLACK·(‖x‖² + max‖c‖²) are recomputed exactly from X. bench_cpu_fcm.py sweeps it
# ("bf16_slack_sweep": partition coefficient vs float32 / time): 2^-6: 7e-6 / 0.67 s (those
# recomputes stream all of X each iteration), 2^-7: 1.4e-4 / 0.55 s, 2^-8: 1.4e-4 / 0.58 s.
BF16_SLACK = 2.0 ** -7
# mixed: bf16 iterations, then full precision for the last MIXED_POLISH_SHARE of the iterations (at
# least MIXED_POLISH_MIN) and whenever the bf16 loop meets tol. FCM contracts towards its fixed point,
# so the last float32 iterations wash out most of the bf16 rounding: on the benchmark (50 iterations,
# 45 + 5) the partition coefficient lands as close to float64's as the float32 fit's does, at about
# the bf16 fit's speed (bench/results/cpu_fcm.json, "ours_float32_mixed").
MIXED_POLISH_MIN = 5
MIXED_POLISH_SHARE = 0.1


def bf16_available() -> bool:
    """Whether fcm_fit(precision='bf16') runs here (a CPU with AVX512-BF16 and the native extension)."""
    Cn = native()
    return bool(Cn is not None and hasattr(Cn, "bf16_supported") and Cn.bf16_supported())


@accepts_cupy
def fcm_fit(X: ArrayT, c: int, m: float = 2.0, *, n_iter: int = 100, tol: float = 1e-5, seed: int = 0,
            init: Array | None = None, precision: str | None = None,
            backend: str | None = None) -> FCMResult[ArrayT]:
    """Full fuzzy c-means: alternate centres = Σ u^m x / Σ u^m and memberships until max |ΔU| < tol.

    Args:
        X: ``(n, d)`` points; float32 or float64 (float16/bfloat16 on CUDA).
        c: Number of centres, 1 <= c <= n.
        m: Fuzzifier, a finite number > 1.
        n_iter: Most iterations.
        tol: Stop when the largest membership change is below it.
        seed: Seed of the default initialisation.
        init: ``(c, d)`` initial centres; None: c distinct random rows of X (seeded).
        precision: "full" (GEMMs in X's dtype), "bf16": the two GEMMs of each iteration
            (distances and centre sums) take bfloat16-rounded inputs with float32 accumulation and
            output, everything else stays float32 (about 2× faster on CPUs with AVX512-BF16: Zen 4,
            Sapphire Rapids; on the benchmark the partition coefficient moved by 1.4e-4 relative
            and memberships by up to 2e-3), or "mixed": bf16 iterations, then full precision for
            the last tenth of n_iter (at least 5) and, with tol > 0, from the first bf16 iteration
            that meets tol until a full one does (measured deviations in
            bench/results/cpu_fcm.json). "bf16" and "mixed" need float32 X and such a CPU;
            elsewhere they warn and run "full". None: "full", or "bf16" where
            CONTEXTRAG_PRECISION=bf16 for float32 X on the CPU (``auto`` never picks FCM's bf16,
            whose memberships are approximate).
        backend: "ref", "cpu", "triton" or "cuda"; None picks the best available.

    Returns:
        ``FCMResult(centers (c, d), memberships (n, c), n_iter, objective, partition_coefficient)``,
        arrays of ``X``'s kind and device.
    """
    tX, kind = as_tensor(X, "X", ndim=(2,), allow_half=True)
    check_half_on_gpu(tX, "X")
    c = check_positive_int(c, "c")
    n_iter = check_positive_int(n_iter, "n_iter")
    m = _check_m(m)
    if precision is None:
        precision = "full"
        if tX.dtype == torch.float32 and tX.device.type == "cpu" and choose_precision("fcm_fit", exact=False) == "bf16":
            precision = "bf16"
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    n = tX.shape[0]
    if c > n:
        raise ValueError(f"c={c} exceeds the number of points n={n}")
    wd = torch.float64 if tX.dtype == torch.float64 else torch.float32
    if precision != "full" and wd != torch.float32:
        raise ValueError(f"precision={precision!r} needs float32 X, got {tX.dtype}")
    if init is None:
        rng = np.random.default_rng(seed)
        idx = torch.from_numpy(rng.choice(n, size=c, replace=False)).to(tX.device)
        C = tX[idx].to(wd).clone()
    else:
        tC, _ = as_tensor(init, "init", ndim=(2,))
        if tuple(tC.shape) != (c, tX.shape[1]):
            raise ValueError(f"init must have shape ({c}, {tX.shape[1]}), got {tuple(tC.shape)}")
        C = tC.to(device=tX.device, dtype=wd).clone()
    _, impl = select("fcm_memberships", tX.device, backend, IMPLS["fcm_memberships"])
    Cn = native()
    native_loop = impl is _cpu_memberships and tX.device.type == "cpu" and Cn is not None \
        and hasattr(Cn, "fcm_epilogue")
    if precision != "full" and not (native_loop and bf16_available()):
        warnings.warn(f"fcm_fit: precision={precision!r} needs the native CPU path on a CPU with AVX512-BF16; "
                      "running precision='full'", RuntimeWarning, stacklevel=2)
        precision = "full"
    if native_loop:
        C, U, it, J = _fcm_loop_cpu(tX.to(wd).contiguous(), C, m, n_iter, tol, precision)
        return FCMResult(kind.out(C), kind.out(U), it, J, float((U * U).sum(dtype=torch.float64) / max(n, 1)))
    # [X | 1]: one GEMM Wᵀ[X | 1] gives the weighted sums and, in its last column, Σ_i w_ij
    # (a column sum over n rows is a slow strided reduction in torch on the CPU).
    X1 = torch.cat([tX.to(wd), torch.ones((n, 1), dtype=wd, device=tX.device)], dim=1)
    Xw = X1[:, :-1]
    floor = 1e-300 if wd == torch.float64 else 1e-30
    U = impl(tX, C, m, None)
    it = 0
    for it in range(1, n_iter + 1):
        W = U.pow(m) if m != 2.0 else U * U
        S = W.t() @ X1
        C = (S[:, :-1] / S[:, -1:].clamp_min(floor)).contiguous()
        U_new = impl(tX, C, m, None)
        delta = float((U_new - U).abs_().max()) if U.numel() else 0.0
        U = U_new
        if delta < tol:
            break
    # objective Σ u^m ‖x − c‖², distances from one more blocked pass (direct form: no cancellation)
    J = 0.0
    for i in range(0, n, ROW_BLOCK):
        xb = Xw[i:i + ROW_BLOCK]
        d2 = ((xb[:, None, :] - C[None, :, :]) ** 2).sum(dim=2) if xb.shape[0] * C.numel() <= (1 << 24) \
            else torch.cdist(xb, C).pow(2)
        J += float((U[i:i + ROW_BLOCK].pow(m) * d2).sum())
    fpc = float((U * U).sum() / max(n, 1))
    return FCMResult(kind.out(C), kind.out(U), it, J, fpc)


def _fcm_loop_cpu(X: torch.Tensor, C: torch.Tensor, m: float, n_iter: int, tol: float, precision: str = "full"):
    """The CPU loop: per iteration one centre GEMM Wᵀ[X | 1] and one blocked distance GEMM whose
    C++ epilogue writes the memberships, the next weights W = U^m and the stopping test's
    max |ΔU| in the same pass (U ping-pongs between two buffers); ‖x‖² once per fit. The last
    epilogue also returns the objective Σ u^m d² from the distances it used. In bf16 iterations
    both GEMMs run on operands rounded to bfloat16 (X and [X | 1] packed once per fit), and the
    epilogue writes Wᵀ in bf16 instead of W; precision='mixed' switches to full iterations (see
    fcm_fit)."""
    Cn = native()
    n, d = X.shape
    c = C.shape[0]
    wd = X.dtype
    lowp = precision in ("bf16", "mixed")
    polish = min(n_iter, max(MIXED_POLISH_MIN, math.ceil(MIXED_POLISH_SHARE * n_iter))) if precision == "mixed" else 0
    X1 = torch.cat([X, torch.ones((n, 1), dtype=wd)], dim=1)
    floor = 1e-300 if wd == torch.float64 else 1e-30
    B = cpu_row_block(n, c)
    U, U_next = torch.empty((n, c), dtype=wd), torch.empty((n, c), dtype=wd)
    W = None if precision == "bf16" else torch.empty((n, c), dtype=wd)
    J = torch.empty(n, dtype=wd)
    buf = torch.empty((min(B, n), c), dtype=wd)
    Xn, Jn = X.numpy(), J.numpy()
    xn_full = torch.einsum("ij,ij->i", X, X).contiguous().numpy() if precision != "bf16" else None
    xn_low = Wt = None
    Cp = None                                   # the packed bf16 centres of the current iteration
    if lowp:
        Xr = X.bfloat16().to(wd)                # the norms go with the GEMM's (rounded) operands
        xn_low = torch.einsum("ij,ij->i", Xr, Xr).contiguous().numpy()
        del Xr
        Xp = Cn.bf16_pack_a(Xn)                 # (n, d/2) k-pairs: the distance GEMM's left operand
        X1p = Cn.bf16_pack_b(X1.numpy())        # (n/2, d+1 → 16·): the centre GEMM's right operand
        # Wᵀ in bf16, written by the epilogue itself: the centre GEMM's left operand as k-pairs
        Wt = np.zeros((c, n + n % 2), dtype=np.uint16)
        Wt_pairs = Wt.view(np.uint32)
    low = lowp                                  # this iteration runs in bf16

    def distances(C, cn, i, j):
        if low:
            G = buf[:j - i]
            Cn.gemm_bf16(Xp[i:j], Cp, c, G.numpy(), -2.0, cn.numpy())
            return G
        return torch.addmm(cn, X[i:j], C.t(), alpha=-2.0, out=buf[:j - i])

    def memberships(C, out, prev, want_j):
        nonlocal Cp
        C = C.contiguous()
        Cr = C.bfloat16().to(C.dtype) if low else C
        cn = (Cr * Cr).sum(dim=1)
        if low:
            Cp = Cn.bf16_pack_b(C.numpy(), True)
        # bf16: distances below BF16_SLACK·(‖x‖² + max‖c‖²) recomputed exactly; full: the epilogue's default
        slack, xnn = (BF16_SLACK, xn_low) if low else (0.0, xn_full)
        w_rows = None if low else W                # full iterations also write W = U^m
        assert xnn is not None and (low or w_rows is not None)   # made above for the precision that runs
        delta = 0.0
        for i in range(0, n, B):
            j = min(i + B, n)
            G = distances(C, cn, i, j)
            delta = max(delta, Cn.fcm_epilogue(G.numpy(), Xn[i:j], C.numpy(), xnn[i:j], m, out[i:j].numpy(),
                                               None if w_rows is None else w_rows[i:j].numpy(),
                                               None if prev is None else prev[i:j].numpy(),
                                               Jn[i:j] if want_j else None, slack, Wt if low else None, i))
        return delta

    def centre_sums():
        if not low:
            assert W is not None                   # made for every precision with full iterations
            return W.t() @ X1
        S = torch.empty((c, d + 1), dtype=wd)
        Cn.gemm_bf16(Wt_pairs, X1p, d + 1, S.numpy(), 1.0, None)
        return S

    def to_full():
        """Leave bf16: the next centre update needs W = U^m in full precision (the bf16 epilogue
        wrote only its bf16 transpose)."""
        nonlocal low
        low = False
        torch.mul(U, U, out=W) if m == 2.0 else torch.pow(U, m, out=W)

    memberships(C, U, None, False)
    it = 0
    for it in range(1, n_iter + 1):
        if low and n_iter - it < polish:
            to_full()   # the last `polish` iterations in full precision
        S = centre_sums()
        C = (S[:, :-1] / S[:, -1:].clamp_min(floor)).contiguous()
        if tol <= 0:   # max |ΔU| < 0 never holds: skip reading the previous U; J only at the end
            memberships(C, U, None, it == n_iter)
            continue
        delta = memberships(C, U_next, U, True)   # J of the last pass is the fit's objective
        U, U_next = U_next, U
        if delta < tol:
            if low and precision == "mixed":
                to_full()   # converged at bf16 precision: go on in full precision until that converges
                continue
            break
    return C, U, it, float(J.sum(dtype=torch.float64))
