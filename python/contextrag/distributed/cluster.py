"""Ray plumbing: lazy import, a local-or-remote cluster context, and the set of shard actors.

``ray`` is imported only here and only when called, so ``import contextrag.distributed`` works
without it (the optional extra is ``pip install 'contextrag[ray]'``).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np

from .layout import shard_bounds


def require_ray():
    try:
        import ray
    except ImportError as e:  # pragma: no cover - exercised only without the extra
        raise ImportError("the Ray executor needs Ray: pip install 'contextrag[ray]' "
                          "(or pip install 'ray[data]>=2.9')") from e
    return ray


class RayCluster:
    """``with RayCluster(address=None, num_cpus=2): ...``: connect to ``address`` (e.g. "auto" or
    "ray://head:10001"), or start a local cluster when None; shut down on exit only what we started.
    A process that already called ``ray.init`` is reused as is."""

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None,
                 num_gpus: int | None = None, object_store_memory: int | None = None, **init_kw):
        self.address = address
        self.kw = dict(init_kw)
        if address is None:
            if num_cpus is not None:
                self.kw["num_cpus"] = num_cpus
            if num_gpus is not None:
                self.kw["num_gpus"] = num_gpus
            if object_store_memory is not None:
                self.kw["object_store_memory"] = object_store_memory
        self.started = False

    def __enter__(self):
        ray = require_ray()
        if not ray.is_initialized():
            kw = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
            kw.update(self.kw)
            # "local": a new local cluster even when one started by `ray start` runs on this machine
            # (ray.init() without an address would join that one, and refuse num_cpus for it)
            ray.init(address=self.address if self.address is not None else "local", **kw)
            self.started = True
        return self

    def __exit__(self, *exc):
        if self.started:
            require_ray().shutdown()
            self.started = False
        return False

    @staticmethod
    def gpus() -> float:
        ray = require_ray()
        return float(ray.cluster_resources().get("GPU", 0.0))


@dataclass
class ShardSpec:
    shard_id: int
    path: str          # .npy file with rows [start, stop)
    start: int
    stop: int


def write_shards(X: np.ndarray, work_dir: str, n_shards: int, *, doc_ids=None) -> list[ShardSpec]:
    """Split an in-memory matrix into per-shard .npy files (tests, or a driver that already holds the
    embeddings). The embedding stage (``embed.embed_to_shards``) writes shard files without the driver
    ever holding the matrix."""
    X = np.ascontiguousarray(X)
    os.makedirs(work_dir, exist_ok=True)
    specs = []
    for i, (a, b) in enumerate(shard_bounds(X.shape[0], n_shards, doc_ids=doc_ids)):
        p = os.path.join(work_dir, f"shard_{i:05d}.npy")
        tmp = p + ".tmp.npy"
        np.save(tmp, X[a:b])
        os.replace(tmp, p)
        specs.append(ShardSpec(i, p, a, b))
    return specs


class ShardSet:
    """One Ray actor per shard (``worker.ShardWorker``), restartable, with retried calls.

    ``max_restarts``: times Ray restarts a dead actor (it reloads its shard file in ``__init__``);
    ``max_task_retries``: times a call interrupted by the death is re-sent to the restarted actor.
    ``metas``: per shard {'doc_ids': [...], 'positions': [...]} of its chunks (co-occurrence needs them).
    GPU actors (``num_gpus=1`` each) when the cluster has GPUs, unless ``num_gpus`` says otherwise.
    """

    def __init__(self, specs: list[ShardSpec], n_total: int, work_dir: str, *, num_cpus: float = 1,
                 num_gpus: float | None = None, max_restarts: int = 4, max_task_retries: int = 4,
                 backend: str | None = None, fault: dict | None = None, metas: list | None = None):
        ray = require_ray()
        from .worker import ShardWorker
        if num_gpus is None:
            num_gpus = 1 if RayCluster.gpus() >= len(specs) else 0
        self.specs = list(specs)
        self.metas = metas
        self.n_total = int(n_total)
        self.work_dir = work_dir
        Actor = ray.remote(ShardWorker).options(num_cpus=num_cpus, num_gpus=num_gpus,
                                                max_restarts=max_restarts, max_task_retries=max_task_retries)
        self.actors = [Actor.remote(s.shard_id, s.path, s.start, s.stop, self.n_total,
                                    os.path.join(work_dir, f"state_{s.shard_id:05d}"),
                                    device="cuda" if num_gpus else "cpu", backend=backend, fault=fault,
                                    meta=None if metas is None else metas[i])
                       for i, s in enumerate(self.specs)]
        self._ray = ray

    def __len__(self):
        return len(self.actors)

    @property
    def dim(self) -> int:
        return int(self.info()[0]["dim"])

    def map(self, method: str, *args, **kw) -> list:
        """Call ``method`` on every shard with the same arguments; returns object refs."""
        return [getattr(a, method).remote(*args, **kw) for a in self.actors]

    def get(self, refs):
        return self._ray.get(refs)

    def info(self) -> list[dict]:
        return self.get(self.map("info"))

    def shutdown(self) -> None:
        for a in self.actors:
            try:
                self._ray.kill(a, no_restart=True)
            except Exception:
                pass
        self.actors = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        return False


def wait_alive(shards: ShardSet, timeout: float = 60.0) -> None:
    """Block until every actor answers (used after a kill in tests)."""
    t0 = time.time()
    while True:
        try:
            shards.info()
            return
        except Exception:
            if time.time() - t0 > timeout:
                raise
            time.sleep(0.5)
