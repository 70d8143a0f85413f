"""Stage 1b on Ray Data: ``map_batches`` with one embedding model per actor, straight into shard files.

Each actor of the pool (a class-based UDF: the model loads once in ``__init__``; on a GPU when the
cluster has GPUs) embeds its batches and writes each batch's rows, split at shard boundaries, as
``part_<first row>.npy`` files under the shard's directory; it returns only (shard, start, count)
rows. One retried task per shard then concatenates its parts into ``shard_<i>.npy``. The driver sees
metadata only: no embedding crosses it. Writes are atomic (temp file + rename), so a retried batch or
task rewrites the same file with the same bytes.
"""
from __future__ import annotations

import glob
import os

import numpy as np

from .cluster import ShardSpec, require_ray
from .layout import shard_bounds


def _atomic_save(path: str, arr: np.ndarray) -> None:
    tmp = f"{path}.tmp{os.getpid()}.npy"
    np.save(tmp, arr)
    os.replace(tmp, path)


class EmbedShardWriter:
    """Ray Data UDF: {'row': int64, 'text': str} batches -> part files; returns metadata rows."""

    def __init__(self, model: str, work_dir: str, bounds: list, passage_prefix: str | None = None,
                 batch_size: int = 64, device: str | None = None, backend: str = "auto"):
        from ..embed.embedder import Embedder
        self.emb = Embedder(model, backend=backend, passage_prefix=passage_prefix, batch_size=batch_size,
                            device=device, show_progress=False)
        self.work_dir = work_dir
        self.starts = np.asarray([a for a, _ in bounds], dtype=np.int64)
        self.bounds = bounds

    def __call__(self, batch: dict) -> dict:
        rows = np.asarray(batch["row"], dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        rows = rows[order]
        texts = [str(batch["text"][i]) for i in order]
        E = self.emb.embed_passages(texts)
        out = {"shard": [], "start": [], "count": [], "dim": []}
        # split the (sorted) batch into runs of consecutive rows inside one shard
        cut = np.flatnonzero((np.diff(rows) != 1)
                             | (np.searchsorted(self.starts, rows[1:], side="right")
                                != np.searchsorted(self.starts, rows[:-1], side="right"))) + 1
        for a, b in zip(np.r_[0, cut], np.r_[cut, len(rows)]):
            s = int(np.searchsorted(self.starts, rows[a], side="right") - 1)
            while self.bounds[s][0] == self.bounds[s][1]:   # skip empty shards sharing a start
                s += 1
            d = os.path.join(self.work_dir, f"parts_{s:05d}")
            os.makedirs(d, exist_ok=True)
            _atomic_save(os.path.join(d, f"part_{int(rows[a]):012d}.npy"), np.ascontiguousarray(E[a:b]))
            out["shard"].append(s)
            out["start"].append(int(rows[a]))
            out["count"].append(int(b - a))
            out["dim"].append(int(E.shape[1]))
        return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


def assemble_shard(work_dir: str, shard: int, start: int, stop: int, dim: int) -> str:
    """Concatenate a shard's part files (checking they tile [start, stop) exactly) into its .npy."""
    d = os.path.join(work_dir, f"parts_{shard:05d}")
    path = os.path.join(work_dir, f"shard_{shard:05d}.npy")
    parts = sorted(glob.glob(os.path.join(d, "part_*.npy")))
    X = np.lib.format.open_memmap(path + ".tmp.npy", mode="w+", dtype=np.float32, shape=(stop - start, dim))
    pos = start
    seen = set()
    for p in parts:
        r0 = int(os.path.basename(p)[5:-4])
        if r0 in seen:
            continue
        seen.add(r0)
        E = np.load(p)
        if r0 != pos:
            raise RuntimeError(f"shard {shard}: rows [{pos}, {r0}) missing from the embedding output")
        X[pos - start:pos - start + len(E)] = E
        pos += len(E)
    if pos != stop:
        raise RuntimeError(f"shard {shard}: embedded rows end at {pos}, expected {stop}")
    X.flush()
    del X
    os.replace(path + ".tmp.npy", path)
    for p in parts:
        os.remove(p)
    if os.path.isdir(d):
        os.rmdir(d)
    return path


def _actor_pool(ray, size: int):
    """A fixed pool of ``size`` model actors (ActorPoolStrategy; older Ray: the concurrency int)."""
    strategy = getattr(ray.data, "ActorPoolStrategy", None)
    return strategy(size=size) if strategy is not None else size


def embed_to_shards(texts, work_dir: str, n_shards: int, *, model: str = "all-MiniLM-L6-v2",
                    passage_prefix: str | None = None, batch_size: int = 64, concurrency: int | None = None,
                    num_gpus: float | None = None, doc_ids=None, backend: str = "auto") -> list[ShardSpec]:
    """Embed ``texts`` (a list of str, in corpus order) with Ray Data into ``n_shards`` shard files.

    ``batch_size``: rows per ``map_batches`` call and per model forward batch. ``concurrency``: the
    number of model actors (default: the cluster's GPUs when it has any, else its CPUs, at most
    ``n_shards``). ``num_gpus``: GPUs per actor (default 1 when the cluster has GPUs, else 0).
    ``doc_ids``: per text, so shards hold whole documents. ``backend``: the embedder backend of the
    actors (``Config.embedder``: the one the single-process build would use). Returns the ShardSpec
    of each shard.
    """
    ray = require_ray()
    import ray.data
    texts = list(texts)
    n = len(texts)
    if n == 0:
        raise ValueError("texts is empty: nothing to embed")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    os.makedirs(work_dir, exist_ok=True)
    bounds = shard_bounds(n, n_shards, doc_ids=doc_ids)
    res = ray.cluster_resources()
    gpus = float(res.get("GPU", 0.0))
    if num_gpus is None:
        num_gpus = 1 if gpus >= 1 else 0
    if concurrency is None:
        concurrency = max(1, min(n_shards, int(gpus if num_gpus else max(1, res.get("CPU", 1) // 1))))
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    items = [{"row": i, "text": t} for i, t in enumerate(texts)]
    blocks = max(min(concurrency, n), min(-(-n // batch_size), 4 * concurrency))   # >= one per actor
    ds = ray.data.from_items(items, override_num_blocks=blocks)
    out = ds.map_batches(EmbedShardWriter, batch_size=batch_size, batch_format="numpy",
                         fn_constructor_kwargs={"model": model, "work_dir": work_dir, "bounds": bounds,
                                                "passage_prefix": passage_prefix, "batch_size": batch_size,
                                                "device": "cuda" if num_gpus else "cpu", "backend": backend},
                         compute=_actor_pool(ray, concurrency), num_gpus=num_gpus,
                         num_cpus=0.5 if num_gpus else 1)
    meta = out.take_all()
    dims = {int(m["dim"]) for m in meta}
    if len(dims) != 1:
        raise RuntimeError(f"embedding batches disagree on the dimension: {sorted(dims)}")
    dim = dims.pop()
    task = ray.remote(assemble_shard).options(max_retries=3, num_cpus=0.5)
    paths = ray.get([task.remote(work_dir, i, a, b, dim) for i, (a, b) in enumerate(bounds)])
    return [ShardSpec(i, p, a, b) for i, (p, (a, b)) in enumerate(zip(paths, bounds))]
