"""The error bound of the CPU bf16 distance tiles (k-means assignment and the bounded loop's
screening): what lets a bf16 GEMM give the labels of exact arithmetic after a re-check.

For x̃, c̃ the bf16 roundings (to nearest even) of a row x and a centre c, δx = x̃ − x, δc = c̃ − c:
x̃·c̃ − x·c = δx·c̃ + x·δc, so |x̃·c̃ − x·c| ≤ ‖δx‖‖c̃‖ + ‖x‖‖δc‖ (Cauchy–Schwarz) with the actual
rounding errors, about 0.38·2^-8 of the norms on real data against the 2^-8 per element (bf16's unit
roundoff) that a bound from the unit roundoff alone must assume. The tile G̃ = ‖c‖² − 2x̃·c̃ then is
within E = (2‖δx‖ + κ‖x̃‖)‖c̃‖ + 2‖x‖‖δc‖ + τ of G (kmeans_assign_bf16 in csrc/cpu/gemm_bf16.cpp).
"""
from __future__ import annotations

import numpy as np

from ._backend import native


# bf16 distance tiles (see kmeans_assign_bf16 in csrc/cpu/gemm_bf16.cpp): the per-row, per-centre bound
# |G̃ − G| ≤ (2‖δx‖ + κ‖x̃‖)‖c̃‖ + 2‖x‖‖δc‖ + τ uses the actual bf16 rounding errors δx, δc (Cauchy–Schwarz);
# κ covers the fp32 sum of the d exact bf16 products (γ_d, times 2 for the −2) and the float rounding
# of the bias, of ‖c‖² and of the test itself (2^-18, generous).
def bf16_error_bound(d: int) -> float:
    """κ: the coefficient of ‖x̃‖‖c̃‖ in the bf16 tile's error bound beyond the operands' rounding."""
    u = 2.0 ** -24
    return 2.0 * (d * u / (1.0 - d * u)) + 2.0 ** -18


def bf16_round(A: np.ndarray) -> np.ndarray:
    """A (finite float32) rounded to bf16 to nearest even, as float32 (the packers' rounding; NumPy on
    the calling thread, not a torch op on its thread pool)."""
    u = np.ascontiguousarray(A, dtype=np.float32).view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)) << np.uint32(16)
    return r.astype(np.uint32).view(np.float32)


def bf16_centre_terms(C: np.ndarray) -> tuple[np.ndarray, ...]:
    """(‖c‖², ‖c̃‖, ‖c − c̃‖, τ) per centre, float32, each rounded the safe way (c̃: c rounded to bf16
    to nearest even, as bf16_pack_b); the native kernel's where it is built (the same terms, up to
    the order of the float64 sums)."""
    Cn = native()
    if Cn is not None and hasattr(Cn, "bf16_centre_terms"):
        return tuple(Cn.bf16_centre_terms(np.ascontiguousarray(C, dtype=np.float32)))
    return centre_terms_numpy(C)


def centre_terms_numpy(C: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`bf16_centre_terms` in NumPy."""
    c64 = C.astype(np.float64)
    cb = bf16_round(C).astype(np.float64)
    up = 1.0 + 2.0 ** -20
    cn = np.einsum("ij,ij->i", c64, c64)
    cnorm = np.sqrt(np.einsum("ij,ij->i", cb, cb)) * up
    dc = cb - c64
    dcnorm = np.sqrt(np.einsum("ij,ij->i", dc, dc)) * up
    ctau = cn * 2.0 ** -18 + 2.0 ** -90
    return tuple(v.astype(np.float32) for v in (cn, cnorm, dcnorm, ctau))
