"""Distributed index builds on Ray: the same result as one machine, beyond one machine.

Ray is optional (``pip install 'contextrag[ray]'``) and imported lazily: importing this package
never imports ray. See docs/SCALING.md for the cost model.

* ``cluster``: ``RayCluster`` (local or remote), ``ShardSet`` (one restartable actor per shard),
  ``write_shards``.
* ``embed``: Ray Data ``map_batches`` embedding straight into per-shard files.
* ``kmeans``: distributed Lloyd / RQ-KMeans (sums and counts per shard, centroids from the driver).
* ``context``: map-reduce for memberships, closures, meet cardinality and co-occurrence.
* ``build``: ``build_index_arrays`` / the ``executor='ray'`` path of ``ContextRAG.build``.
"""
from __future__ import annotations

import importlib

__all__ = ["RayCluster", "ShardSet", "write_shards", "rq_kmeans", "build_index_arrays", "shard_bounds"]

_WHERE = {"RayCluster": "cluster", "ShardSet": "cluster", "write_shards": "cluster", "ShardSpec": "cluster",
          "rq_kmeans": "kmeans", "build_index_arrays": "build", "shard_bounds": "layout",
          "embed_to_shards": "embed", "ShardedContext": "context"}


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
