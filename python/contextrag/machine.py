"""What this CPU can do fast: its instruction-set flags and the GEMM rates torch reaches on it.

``profile()`` is what every per-machine choice reads (the embedder's ``auto``, the benchmarks' JSON,
``ops.backends()``). It holds

* ``cpu``: the CPU's model name;
* ``isa``: lower-case flag names as /proc/cpuinfo spells them ('avx2', 'fma', 'avx512f',
  'avx512_bf16', 'avx512_fp16', 'avx512_vnni', 'avx_vnni', 'amx_bf16', 'amx_int8', 'amx_tile', ...),
  the view that ``CONTEXTRAG_ISA`` forces (avx512: no AMX flag; avx2: no AVX-512 or AMX flag; generic:
  no AVX flag either), plus the native kernels' dispatch under ``dispatch`` ('avx512', 'avx2',
  'generic') and the engine their bf16 GEMMs run on under ``matrix_engine`` ('amx' or 'none');
* ``gemm_gflops``: {'fp32', 'bf16', 'int8'} -> GFLOP/s (GOP/s for int8) of one torch matrix product
  of an embedder's shape, best of a few calls (about a quarter of a second in all); None where
  torch is missing or the dtype has no CPU kernel.

Probing costs torch's import (seconds), so it happens once per machine: the result is cached as
JSON beside the embedder caches (``$CONTEXTRAG_CACHE_DIR/machine/``), keyed on the CPU model, its
flags and torch's version, and in the process. ``profile(probe=False)`` never imports torch: it
reads the cache, probes only when torch is already imported, and otherwise leaves the rates None.

``precision()`` reads ``CONTEXTRAG_PRECISION`` (fp32 | bf16 | auto, default auto): the precision
the bulk matrix work may use (fp32 forces full precision; bf16 forces the bf16 path for tests).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import platform
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

PRECISIONS = ("fp32", "bf16", "auto")
ISA_LEVELS = ("amx", "avx512", "avx2", "generic", "auto")
GEMM_DTYPES = ("fp32", "bf16", "int8")
# bf16 counts as a matrix engine (AVX512-BF16, AMX) when it runs at least this many times the fp32
# rate: emulated bf16 (AVX2) runs below fp32, a native path 2-10× above it
BF16_MIN_SPEEDUP = 2.0
_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# the flags that matter to the kernels (the JSON records these; ``isa`` keeps them all)
_SIMD_PREFIXES = ("avx", "amx", "fma", "f16c", "sse4")
_ARM_SIMD = frozenset({"asimd", "asimdhp", "sve", "sve2", "sme", "sme2", "bf16", "i8mm", "fphp"})
_PROBE_SHAPE = (1024, 384, 1536)   # tokens × hidden × FFN width of a MiniLM layer: the embedder's GEMM
_CACHE_VERSION = 1


@dataclass(frozen=True)
class MachineProfile:
    cpu: str
    isa: frozenset
    gemm_gflops: Mapping
    dispatch: str | None = None          # the native kernels' ISA, None without the extension
    matrix_engine: str | None = None     # what the native bf16 GEMMs run on: 'amx' or 'none'; None without them
    torch: str | None = None             # torch's version, None when it is not installed
    isa_forced: str | None = None        # CONTEXTRAG_ISA, when set
    cpu_flags: frozenset = field(default=frozenset(), repr=False)   # all the CPU's flags, unforced

    @property
    def bf16_matrix(self) -> bool:
        """True when bf16 GEMM runs on a matrix path here: measured at least BF16_MIN_SPEEDUP × fp32
        and, on x86, a bf16 flag in the (possibly forced) ISA view."""
        fp32, bf16 = self.gemm_gflops.get("fp32"), self.gemm_gflops.get("bf16")
        if not fp32 or not bf16 or bf16 < BF16_MIN_SPEEDUP * fp32:
            return False
        return not _is_x86() or bool(self.isa & _BF16_FLAGS)

    def to_dict(self) -> dict:
        """JSON-ready: what the bench results and ``ops.backends()`` record."""
        return {"cpu": self.cpu, "isa": sorted(f for f in self.isa if f.startswith(_SIMD_PREFIXES) or f in _ARM_SIMD),
                "dispatch": self.dispatch, "matrix_engine": self.matrix_engine, "isa_forced": self.isa_forced, "bf16_matrix": self.bf16_matrix,
                "gemm_gflops": {k: (None if v is None else round(v, 1)) for k, v in self.gemm_gflops.items()},
                "torch": self.torch}


def precision() -> str:
    """CONTEXTRAG_PRECISION (fp32 | bf16 | auto; unset or empty: auto)."""
    v = (os.environ.get("CONTEXTRAG_PRECISION") or "auto").strip().lower()
    if v not in PRECISIONS:
        raise ValueError(f"CONTEXTRAG_PRECISION must be one of {', '.join(PRECISIONS)}, "
                         f"got {os.environ.get('CONTEXTRAG_PRECISION')!r}")
    return v


def _is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def read_cpuinfo(text: str | None = None) -> tuple[str, frozenset]:
    """(model name, flags) from /proc/cpuinfo's text (x86 "flags", Arm "Features"); ("", {}) when
    there is none (macOS, Windows: the model from platform.processor())."""
    if text is None:
        try:
            text = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return platform.processor() or platform.machine(), frozenset()
    model, flags = "", frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if not model and key in ("model name", "cpu model", "hardware", "processor") and not value.strip().isdigit():
            model = value.strip()
        elif not flags and key in ("flags", "features"):
            flags = frozenset(value.lower().split())
    return model or platform.processor() or platform.machine(), flags


def _forced_isa() -> str | None:
    v = os.environ.get("CONTEXTRAG_ISA") or os.environ.get("CONTEXTRAG_CPU_ISA") or None
    if v is not None and v not in ISA_LEVELS:
        raise ValueError(f"CONTEXTRAG_ISA must be one of {', '.join(ISA_LEVELS)}, got {v!r}")
    return None if v in (None, "auto") else v


def isa_view(flags: frozenset, level: str | None) -> frozenset:
    """The flags a CPU limited to ``level`` ('amx', 'avx512': no AMX, 'avx2', 'generic', None: all)
    would show."""
    if level is None or level == "amx":
        return flags
    drop = ("amx",) if level == "avx512" else ("avx512", "amx") if level == "avx2" else ("avx", "amx", "fma", "f16c")
    return frozenset(f for f in flags if not f.startswith(drop))


def _dispatch() -> tuple[str | None, str | None]:
    """(the native kernels' ISA, the engine their bf16 GEMMs run on); (None, None) without them."""
    try:
        from contextrag.ops import native
        C = native()
    except ValueError:
        raise                                   # a bad CONTEXTRAG_ISA: the user must hear it
    except Exception:  # noqa: BLE001 - no extension: the profile still stands
        return None, None
    if C is None:
        return None, None
    engine = getattr(C, "matrix_engine", None)
    return C.cpu_isa(), engine() if engine is not None else None


def _torch_version() -> str | None:
    if importlib.util.find_spec("torch") is None:
        return None
    try:
        from importlib.metadata import version
        return version("torch")
    except Exception:  # noqa: BLE001 - a source build without metadata
        return "unknown"


def cache_file(cpu: str, flags: frozenset, torch_version: str | None) -> Path:
    from contextrag.embed.model_cache import cache_base
    key = hashlib.sha256(json.dumps([_CACHE_VERSION, cpu, sorted(flags), torch_version]).encode()).hexdigest()[:16]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", cpu)[:40].strip("_") or "cpu"
    return cache_base() / "machine" / f"{slug}-{key}.json"


def _read_cache(path: Path) -> dict | None:
    try:
        d = json.loads(path.read_text())
        rates = d["gemm_gflops"]
        if set(rates) == set(GEMM_DTYPES) and all(v is None or isinstance(v, (int, float)) for v in rates.values()):
            return rates
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _write_cache(path: Path, record: dict) -> None:
    """Whole or not at all (a temporary file renamed into place); a read-only cache is no error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass


def probe_gemm(budget_s: float = 0.08) -> dict:
    """{dtype: GFLOP/s} of one (m×k)·(k×n) product per dtype, best of the calls that fit in about
    ``budget_s`` each after a warm-up call. Imports torch."""
    import torch
    m, k, n = _PROBE_SHAPE
    g = torch.Generator().manual_seed(0)
    a32, b32 = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    a16, b16 = a32.to(torch.bfloat16), b32.to(torch.bfloat16)
    a8 = torch.randint(-64, 64, (m, k), dtype=torch.int8, generator=g)
    b8 = torch.randint(-64, 64, (k, n), dtype=torch.int8, generator=g)
    cases = {"fp32": lambda: a32 @ b32, "bf16": lambda: a16 @ b16}
    if hasattr(torch, "_int_mm"):                 # int8 × int8 -> int32, oneDNN's VNNI/AMX path
        cases["int8"] = lambda: torch._int_mm(a8, b8)
    out = {d: None for d in GEMM_DTYPES}
    for name, fn in cases.items():
        try:
            fn()
        except Exception:  # noqa: BLE001 - no CPU kernel for this dtype in this torch
            continue
        best, spent = float("inf"), 0.0
        for _ in range(50):
            t = time.perf_counter()
            fn()
            dt = time.perf_counter() - t
            best, spent = min(best, dt), spent + dt
            if spent > budget_s:
                break
        out[name] = 2.0 * m * k * n / best / 1e9
    return out


@functools.lru_cache(maxsize=None)
def _profile(probe: bool, forced: str | None, cache_dir: str) -> MachineProfile:
    cpu, flags = read_cpuinfo()
    torch_v = _torch_version()
    rates = {d: None for d in GEMM_DTYPES}
    if torch_v is not None:
        path = cache_file(cpu, flags, torch_v)
        cached = _read_cache(path)
        if cached is not None:
            rates = cached
        elif probe or "torch" in sys.modules:
            rates = probe_gemm()
            import torch
            _write_cache(path, {"cpu": cpu, "flags": sorted(flags), "torch": torch_v,
                                "threads": torch.get_num_threads(), "gemm_shape": list(_PROBE_SHAPE),
                                "gemm_gflops": rates})
    dispatch, engine = _dispatch()
    return MachineProfile(cpu=cpu, isa=isa_view(flags, forced), gemm_gflops=MappingProxyType(dict(rates)),
                          dispatch=dispatch, matrix_engine=engine, torch=torch_v, isa_forced=forced, cpu_flags=flags)


def profile(probe: bool = True) -> MachineProfile:
    """This machine's profile (cached on disk and in the process). ``probe=False``: never import
    torch for it (the rates stay None unless cached or torch is already loaded)."""
    from contextrag.embed.model_cache import cache_base
    return _profile(bool(probe), _forced_isa(), str(cache_base()))


def clear() -> None:
    """Forget the in-process profile (tests; the disk cache stays)."""
    _profile.cache_clear()
