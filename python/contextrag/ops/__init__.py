"""contextrag.ops: the public kernel API.

Inputs are NumPy arrays, torch tensors (CPU or CUDA) or CuPy arrays (zero-copy, run on CuPy's
current stream), float32 or float64 (fp16/bf16 storage for the k-means family on GPUs); outputs
match the input's kind and device. Every op validates its inputs, picks a backend (see
:func:`backends`; :func:`availability` is its bare table, :func:`op_tables` every registered
implementation, :func:`native` the compiled extension) and calls it. Nothing here imports the
orchestrator. The op families, and for each op and backend its file and test: docs/KERNELS.md.

The op modules load on first use of one of their names: ``spread_hop`` on NumPy input and the
backend table run without torch, so a query on the CPU never imports it; the other families work on
torch tensors internally and import it with their module.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable

from ._backend import availability, backends, native

_HOME = {
    "LloydOptions": "lloyd",
    "kmeans_assign": "kmeans", "kmeans_fit": "kmeans", "rq_kmeans": "kmeans", "rq_kmeans_batched": "kmeans",
    "KMeansResult": "kmeans", "RQResult": "kmeans",
    "fcm_memberships": "fcm", "fcm_fit": "fcm", "FCMResult": "fcm",
    "tnorm": "lattice", "residuum": "lattice", "neg": "lattice", "soft_join": "lattice", "soft_meet": "lattice",
    "luk_up": "semiring", "luk_down": "semiring", "luk_closure": "semiring", "meet_cardinality": "semiring",
    "fuzzy_route": "semiring",
    "SpreadIncidence": "spread", "spread_hop": "spread",
}

__all__ = [
    "backends", "availability", "native", "op_tables",
    "LloydOptions", "kmeans_assign", "kmeans_fit", "rq_kmeans", "rq_kmeans_batched", "KMeansResult", "RQResult",
    "fcm_memberships", "fcm_fit", "FCMResult",
    "tnorm", "residuum", "neg", "luk_up", "luk_down", "luk_closure",
    "soft_join", "soft_meet", "meet_cardinality",
    "fuzzy_route",
    "SpreadIncidence", "spread_hop",
]


def op_tables() -> dict[str, dict[str, Callable[..., Any]]]:
    """{op: {backend: fn}}: every registered implementation of every op. Looking up an op other than
    the torch-free ``spread_hop`` loads the op modules (and their Triton/CUDA entries) first."""
    from ._registry import IMPLS
    return IMPLS


# the submodules, reachable as attributes of the package (``ops.kmeans``, ``ops.semiring``, ...)
_SUBMODULES = frozenset({"kmeans", "fcm", "lattice", "semiring", "spread", "lloyd", "_elkan", "_cuda",
                         "_fcm_gpu", "_kmeans_gpu", "_registry", "_tensor"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        full = f"{__name__}.{name}"
        if name in ("kmeans", "fcm") and full not in sys.modules:
            from ._registry import _load_all      # with their Triton/CUDA entries, as for their names
            _load_all()
        # (``from . import lloyd`` inside an op module asks here too: nothing more than the import)
        return importlib.import_module(full)      # (waits for a module another thread is importing)
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'contextrag.ops' has no attribute {name!r}")
    if home in ("kmeans", "fcm", "lloyd"):
        # their Triton/CUDA entries live in modules of their own, registered with them
        from ._registry import _load_all
        _load_all()
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
