"""Which precision the CPU distance tiles of k-means and FCM run in: the one place that decides.

``CONTEXTRAG_PRECISION`` = ``fp32`` | ``bf16`` | ``auto`` (default) forces or frees the choice;
``CONTEXTRAG_ISA`` (read by the native extension) narrows what the CPU is allowed to use, so
``CONTEXTRAG_ISA=avx2`` on an AVX-512 machine also rules out its bf16 path.

``auto`` picks bf16 only where
* the op's bf16 path gives the fp32 result (``exact=True``: k-means, whose labels are re-checked in
  fp32 wherever the bf16 error bound leaves them open; FCM's bf16 memberships are approximate, so
  FCM runs bf16 only when asked for), and
* this CPU runs the native bf16 kernels (AVX512-BF16 under the current dispatch) on a matrix engine
  (``_C.matrix_engine()`` is "amx": AMX tiles; measured on a Xeon with AMX with the tiles turned off by
  ``CONTEXTRAG_ISA=avx512``, the fp32 tiles ran same-work k-means 2.67× FAISS against the
  ``vdpbf16ps`` tiles' 2.08×, as on Zen 4; bench/results/matrix_goals_amx_machine_forced_avx512*.json),
  and
* the machine profile shows bf16 GEMMs at least ``MIN_GEMM_RATIO`` times as fast as fp32 ones
  (``contextrag.machine`` where that module exists; without a probe, the instruction set alone
  decides: AMX-BF16 yes, AVX512-BF16 alone no). Why 4 and not "faster": after each bf16 tile the
  assignment settles its rows (the error bound, the exact distance of the chosen centre, the rows
  the bound leaves open), which costs about as much as the bf16 GEMM itself; on AVX512-BF16 (Zen 4:
  bf16 GEMM 2.5–3× fp32) the fp32 fits on our own tiles measured faster than the bf16 ones
  (docs/KERNELS.md), while a matrix engine (AMX: ~6.7×) leaves the bf16 path well ahead.
"""
from __future__ import annotations

import functools
import os
import warnings

from ._backend import native

CHOICES = ("fp32", "bf16", "auto")
MIN_GEMM_RATIO = 4.0   # bf16 / fp32 GEMM rate from which ``auto`` picks bf16 (see the module docstring)
_warned: set[str] = set()


def requested() -> str:
    """CONTEXTRAG_PRECISION, checked (default 'auto')."""
    v = os.environ.get("CONTEXTRAG_PRECISION", "auto").strip().lower() or "auto"
    if v not in CHOICES:
        raise ValueError(f"CONTEXTRAG_PRECISION must be one of {', '.join(CHOICES)}, got {v!r}")
    return v


def bf16_kernels() -> bool:
    """Whether the native bf16 kernels run under the current dispatch (AVX512-BF16 and
    CONTEXTRAG_ISA not below avx512)."""
    C = native()
    return bool(C is not None and hasattr(C, "bf16_supported") and C.bf16_supported())


@functools.lru_cache(maxsize=1)
def bf16_faster() -> bool:
    """Whether this machine's bf16 GEMM runs at least MIN_GEMM_RATIO × its fp32 GEMM: the machine
    profile's probed rates where ``contextrag.machine`` provides them, else its ISA flags (AMX-BF16)."""
    try:
        from contextrag.machine import profile
    except ImportError:
        profile = None
    if profile is not None:
        try:
            p = profile()
            rates = getattr(p, "gemm_gflops", None) or {}
            fp32, bf16 = rates.get("fp32"), rates.get("bf16")
            if fp32 and bf16:
                return float(bf16) >= MIN_GEMM_RATIO * float(fp32)
            isa = {str(f).lower() for f in (getattr(p, "isa", None) or ())}
            if isa:
                return "amx_bf16" in isa
        except Exception as e:   # a broken probe must not stop a fit: fall back to the flags
            if "profile" not in _warned:
                _warned.add("profile")
                warnings.warn(f"machine profile unavailable ({e}); choosing precision by CPU flags",
                              RuntimeWarning, stacklevel=3)
    return _cpu_flags_bf16()


def _cpu_flags_bf16() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return "amx_bf16" in set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return False


def bf16_on_matrix_engine() -> bool:
    """Whether the native bf16 GEMMs run on a matrix engine (AMX tiles) under the current dispatch;
    True for an extension that does not say (it predates the engine report)."""
    C = native()
    fn = getattr(C, "matrix_engine", None) if C is not None else None
    return True if fn is None else fn() != "none"


def choose(op: str, *, exact: bool) -> str:
    """'bf16' or 'fp32' for ``op``'s CPU distance tiles (float32 data). ``exact``: the op's bf16
    path reproduces its fp32 result (see the module docstring). A forced 'bf16' on a CPU without
    the kernels runs fp32 with one warning per op."""
    want = requested()
    if want == "fp32":
        return "fp32"
    if not bf16_kernels():
        if want == "bf16" and op not in _warned:
            _warned.add(op)
            warnings.warn(f"{op}: CONTEXTRAG_PRECISION=bf16 needs a CPU with AVX512-BF16 under the current "
                          "CONTEXTRAG_ISA; running fp32", RuntimeWarning, stacklevel=3)
        return "fp32"
    if want == "bf16":
        return "bf16"
    return "bf16" if exact and bf16_on_matrix_engine() and bf16_faster() else "fp32"
