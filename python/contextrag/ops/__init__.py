"""contextrag.ops: the public kernel API.

Inputs are NumPy arrays, torch tensors (CPU or CUDA) or CuPy arrays (zero-copy, run on CuPy's
current stream), float32 or float64 (fp16/bf16 storage for the k-means family on GPUs); outputs
match the input's kind and device. Every op validates its inputs, picks a backend (see
:func:`backends`) and calls it. Nothing here imports the orchestrator. The op families, and for each
op and backend its file and test: docs/KERNELS.md.
"""
from ._backend import backends
from .fcm import FCMResult, fcm_fit, fcm_memberships
from ._lloyd import LloydOptions
from .kmeans import KMeansResult, RQResult, kmeans_assign, kmeans_fit, rq_kmeans, rq_kmeans_batched
from .lattice import neg, residuum, soft_join, soft_meet, tnorm
from .semiring import fuzzy_route, luk_closure, luk_down, luk_up, meet_cardinality
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
from . import _fcm_gpu, _kmeans_gpu  # noqa: E402,F401  (the Triton/CUDA entries of kmeans and fcm)
