"""contextrag.ops: the public kernel API.

Inputs are NumPy arrays or torch tensors (CPU or CUDA), float32 or float64 (fp16/bf16 storage for
the k-means family on GPUs); outputs match the input's kind and device. Every op validates its
inputs, picks a backend (see :func:`backends`) and calls it. Nothing here imports the orchestrator.
"""
from ._backend import backends
from .fcm import FCMResult, fcm_fit, fcm_memberships
from ._lloyd import LloydOptions
from .kmeans import KMeansResult, RQResult, kmeans_assign, kmeans_fit, rq_kmeans, rq_kmeans_batched
from .lattice import meet_cardinality, soft_join, soft_meet
from .semiring import luk_closure, luk_down, luk_up, neg, residuum, tnorm
from .routing import fuzzy_route
from .spread import SpreadIncidence, spread_hop

__all__ = [
    "backends",
    "LloydOptions", "kmeans_assign", "kmeans_fit", "rq_kmeans", "rq_kmeans_batched", "KMeansResult", "RQResult",
    "fcm_memberships", "fcm_fit", "FCMResult",
    "tnorm", "residuum", "neg", "luk_up", "luk_down", "luk_closure",
    "soft_join", "soft_meet", "meet_cardinality",
    "fuzzy_route",
    "SpreadIncidence", "spread_hop",
]
from . import _gpu  # noqa: E402,F401  (registers triton/cuda implementations when present)
