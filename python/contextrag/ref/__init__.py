"""Float64 NumPy reference implementations: the spec every fast path is tested against.

Written for clarity, not speed. Inputs are converted to float64 NumPy arrays; outputs are float64
(labels int64).
"""
from .kmeans import kmeans_assign, kmeans_fit, kmeans_plus_plus, lloyd_step, rq_kmeans
from .fcm import fcm_memberships, fcm_fit, partition_coefficient
from .lattice import tnorm, residuum, neg, soft_join, soft_meet
from .semiring import luk_up, luk_down, luk_closure, fuzzy_route, meet_cardinality
from .spread import spread_hop

__all__ = [
    "kmeans_assign", "kmeans_fit", "kmeans_plus_plus", "lloyd_step", "rq_kmeans",
    "fcm_memberships", "fcm_fit", "partition_coefficient",
    "tnorm", "residuum", "neg", "luk_up", "luk_down", "luk_closure",
    "soft_join", "soft_meet", "meet_cardinality", "fuzzy_route",
    "spread_hop",
]
