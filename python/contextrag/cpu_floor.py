"""The oldest x86-64 CPU the installed stack runs on, checked before anything native is loaded.

contextrag's own kernels run on any x86-64 CPU (they pick AVX-512, AVX2 or a generic path at run
time), but the NumPy and PyTorch wheels from PyPI assume x86-64-v2 (SSSE3, SSE4.1, SSE4.2, POPCNT:
Intel Nehalem / AMD Bulldozer, 2008–2011, or later); on an older CPU NumPy's import dies with SIGILL.
This module is pure Python, so ``python -m contextrag.cpu_floor`` (run by ``make demo`` and ``make test``)
and ``contextrag demo`` can say so in one sentence instead.
"""
from __future__ import annotations

import platform
import sys

# /proc/cpuinfo flag -> name in the message
X86_64_V2 = {"ssse3": "SSSE3", "sse4_1": "SSE4.1", "sse4_2": "SSE4.2", "popcnt": "POPCNT"}


def cpu_flags(cpuinfo: str | None = None) -> set[str] | None:
    """The CPU's feature flags from /proc/cpuinfo text (read if None); None where there is none."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return None


def missing_features(flags: set[str] | None = None, machine: str | None = None) -> list[str]:
    """The x86-64-v2 features this CPU lacks ([] when it has them all, or is not x86-64, or we cannot tell)."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64"):
        return []
    flags = cpu_flags() if flags is None else flags
    if flags is None:
        return []
    return [name for flag, name in X86_64_V2.items() if flag not in flags]


def message(missing: list[str]) -> str:
    return (f"This CPU lacks {', '.join(missing)}: NumPy and PyTorch (and so contextrag) need an x86-64-v2 CPU "
            "(Intel Nehalem, AMD Bulldozer or later).")


def check() -> None:
    """Exit with the one-sentence message when the CPU is below the floor."""
    miss = missing_features()
    if miss:
        raise SystemExit(message(miss))


if __name__ == "__main__":
    check()
    sys.exit(0)
