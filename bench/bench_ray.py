"""Distributed index build on Ray: 1 and 2 workers on N synthetic 384-d embeddings.

    python bench/bench_ray.py                    # 200,000 rows, 1 and 2 workers -> bench/results/ray_200k.json
    python bench/bench_ray.py --n 20000 --workers 2 --out ray.json

Each configuration runs in a fresh subprocess (so the driver's peak RSS is its own): it starts a local
Ray cluster of ``workers`` CPUs, generates the embeddings *inside* the shard-writer tasks (the driver
never holds them: it plays the role of the Ray Data embedding stage, measured separately by
``--embed``), then runs stages 2-3 (RQ-KMeans 96/24/12, FCM memberships, concept graph) with every
per-chunk array left on the shards (``build_index_arrays(gather=False)``). Recorded per stage:
seconds, bytes that crossed the driver, the driver's peak RSS, each worker's peak RSS, and the load
average (the machine is shared: timings move with it).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

D = 384
BLOCK = 10_000          # synthetic rows are generated in fixed blocks: the data does not depend on sharding
N_CENTRES = 300


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def synthetic_block(b: int, seed: int = 0) -> np.ndarray:
    """Rows [b·BLOCK, (b+1)·BLOCK): unit vectors around N_CENTRES topic centres (a corpus-like mix)."""
    centres = np.random.default_rng(seed).standard_normal((N_CENTRES, D)).astype(np.float32)
    rng = np.random.default_rng([seed, b])
    lab = rng.integers(0, N_CENTRES, BLOCK)
    X = centres[lab] + 0.9 * rng.standard_normal((BLOCK, D)).astype(np.float32)
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def write_synthetic_shard(path: str, start: int, stop: int, seed: int) -> str:
    X = np.lib.format.open_memmap(path + ".tmp.npy", mode="w+", dtype=np.float32, shape=(stop - start, D))
    for b in range(start // BLOCK, (stop - 1) // BLOCK + 1 if stop > start else 0):
        blk = synthetic_block(b, seed)
        a, z = max(start, b * BLOCK), min(stop, (b + 1) * BLOCK)
        X[a - start:z - start] = blk[a - b * BLOCK:z - b * BLOCK]
    X.flush()
    del X
    os.replace(path + ".tmp.npy", path)
    return path


def run_one(n: int, workers: int, seed: int) -> dict:
    import ray
    from contextrag.config import Config
    from contextrag.distributed.build import build_index_arrays
    from contextrag.distributed.cluster import RayCluster, ShardSet, ShardSpec
    from contextrag.distributed.layout import shard_bounds
    out = {"n": n, "dim": D, "workers": workers, "shards": workers}
    t_all = time.perf_counter()
    rss0 = _rss_mb()
    with RayCluster(num_cpus=workers, object_store_memory=512 * 1024 * 1024), \
            tempfile.TemporaryDirectory(prefix="bench-ray-") as wd:
        out["driver_rss_after_init_mb"] = _rss_mb()
        doc_ids = [f"d{i // 3}" for i in range(n)]          # 3 chunks per document (co-occurrence windows)
        pos = np.arange(n, dtype=np.int32) % 3
        bounds = shard_bounds(n, workers, doc_ids=doc_ids)
        t0 = time.perf_counter()
        task = ray.remote(write_synthetic_shard).options(num_cpus=1, max_retries=3)
        paths = ray.get([task.remote(os.path.join(wd, f"shard_{i:05d}.npy"), a, b, seed)
                         for i, (a, b) in enumerate(bounds)])
        out["seconds_write_shards"] = time.perf_counter() - t0
        specs = [ShardSpec(i, p, a, b) for i, (p, (a, b)) in enumerate(zip(paths, bounds))]
        metas = [{"doc_ids": doc_ids[a:b], "positions": pos[a:b]} for a, b in bounds]
        del doc_ids
        t0 = time.perf_counter()
        with ShardSet(specs, n, os.path.join(wd, "state"), num_cpus=1, metas=metas) as shards:
            info0 = shards.info()
            out["seconds_load_shards"] = time.perf_counter() - t0
            cfg = Config(n_summaries=0)                 # rq_sizes (96, 24, 12), 256 points per centroid
            t0 = time.perf_counter()
            arr = build_index_arrays(shards, cfg, gather=False)
            out["seconds_stages_2_3"] = time.perf_counter() - t0
            info = shards.info()
        out["stage_seconds"] = {k: round(v, 3) for k, v in arr["timings"].items()}
        out["rq_seconds"] = {k: round(v, 3) for k, v in arr["rq_timings"].items()}
        out["worker_cpu_seconds"] = arr["worker_cpu_seconds"]
        out["rq_iterations"] = arr["n_iter"]
        out["rq_inertia"] = arr["inertia"]
        out["message_bytes"] = arr["message_bytes"]
        out["context"] = arr["context"]
        g = arr["graph"]
        out["graph"] = {"nodes": int(g.n_nodes), "edges": int(len(g.edge_src)), "member_nnz": int(g.members)}
        out["worker_rows"] = [i["rows"] for i in info0]
        out["worker_shard_bytes"] = [i["bytes"] for i in info0]
        out["worker_peak_rss_mb"] = [round(i["maxrss_mb"], 1) for i in info]
    out["seconds_total"] = time.perf_counter() - t_all
    out["driver_rss_start_mb"] = rss0
    out["driver_peak_rss_mb"] = _peak_mb()
    out["loadavg_end"] = os.getloadavg()
    return out


def embed_one(n_texts: int, workers: int) -> dict:
    """Ray Data embedding of real paragraphs (MiniLM, CPU actors) into shard files."""
    from contextrag.distributed.cluster import RayCluster
    from contextrag.distributed.embed import embed_to_shards
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "distributed"))
    import conftest  # noqa: E402  (the tests' HotpotQA loader)
    docs = conftest.hotpot_docs(n_texts)
    texts = [f"{d['title']}\n{d['text']}" for d in docs]
    with RayCluster(num_cpus=workers), tempfile.TemporaryDirectory() as wd:
        t0 = time.perf_counter()
        specs = embed_to_shards(texts, wd, workers, batch_size=64, concurrency=workers)
        sec = time.perf_counter() - t0
    return {"texts": len(texts), "workers": workers, "seconds": sec, "texts_per_s": len(texts) / sec,
            "shards": [s.stop - s.start for s in specs], "driver_peak_rss_mb": _peak_mb(),
            "loadavg_end": os.getloadavg()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embed", type=int, default=0, help="also time Ray Data embedding of this many paragraphs")
    ap.add_argument("--out", default=None)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        res = run_one(a.n, a.workers[0], a.seed) if a.embed == 0 else embed_one(a.embed, a.workers[0])
        print("RESULT " + json.dumps(res))
        return
    import ray
    import torch
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version(), "ray": ray.__version__, "torch": torch.__version__,
                           "loadavg_start": os.getloadavg(), "shared": "2-core machine shared with other users"},
               "config": {"n": a.n, "dim": D, "rq_sizes": [96, 24, 12], "rq_max_points_per_centroid": 256,
                          "reduce": "ordered", "gather": False}, "runs": [], "embedding": []}
    for w in a.workers:
        cmd = [sys.executable, __file__, "--one", "--n", str(a.n), "--workers", str(w), "--seed", str(a.seed)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
            raise SystemExit(f"run with {w} workers failed")
        r = json.loads(line[-1][7:])
        results["runs"].append(r)
        print(f"workers={w}: stages 2-3 {r['seconds_stages_2_3']:.1f}s {r['stage_seconds']} "
              f"worker cpu {r['worker_cpu_seconds']} "
              f"driver peak {r['driver_peak_rss_mb']:.0f} MB, load {r['loadavg_end']}", flush=True)
        if a.embed:
            cmd = [sys.executable, __file__, "--one", "--embed", str(a.embed), "--workers", str(w)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
            if line:
                results["embedding"].append(json.loads(line[-1][7:]))
                print("embedding:", results["embedding"][-1], flush=True)
    if len(results["runs"]) >= 2:
        t1, t2 = results["runs"][0]["seconds_stages_2_3"], results["runs"][1]["seconds_stages_2_3"]
        results["speedup_2_over_1"] = t1 / t2
    results["machine"]["loadavg_end"] = os.getloadavg()
    out = a.out or os.path.join(os.path.dirname(__file__), "results", f"ray_{a.n // 1000}k.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=2)
    print("wrote", out)


if __name__ == "__main__":
    main()
