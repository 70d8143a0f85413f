#!/usr/bin/env python
"""Stages 2-3 of the index on a local Ray cluster of three nodes: the driver's memory against N.

    python bench/bench_scale_ray.py --n 20000 100000 300000 1000000   # -> bench/results/scale_ray.json

Three raylets on this machine (``ray.cluster_utils.Cluster``: a head and two nodes, one CPU and an
object store of their own each), one shard actor per node. As in bench_ray.py the embeddings are
generated inside the shard-writer tasks (the role of the Ray Data embedding stage: the driver never
holds them), then RQ-KMeans 96/24/12, the FCM memberships and the concept graph run with every
per-chunk array left on the shards (``build_index_arrays(gather=False)``): only k×d, S×S, V×M and V×V
matrices reach the driver. Each N runs in a fresh process, so the driver's peak RSS is its own;
recorded with the bytes that crossed the driver, each worker's peak RSS and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ray import D, _peak_mb, _rss_mb, write_synthetic_shard   # noqa: E402

NODES = 3
STORE = 128 * 1024 * 1024


def run_one(n: int, seed: int) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from contextrag.config import Config
    from contextrag.distributed.build import build_index_arrays
    from contextrag.distributed.cluster import ShardSet, ShardSpec
    from contextrag.distributed.layout import shard_bounds
    out = {"n": n, "dim": D, "nodes": NODES, "shards": NODES}
    rss0 = _rss_mb()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE,
                                                            "include_dashboard": False})
    t_all = time.perf_counter()
    try:
        for _ in range(NODES - 1):
            cluster.add_node(num_cpus=1, object_store_memory=STORE)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
        out["seconds_cluster_start"] = time.perf_counter() - t_all
        out["ray_nodes"] = len([x for x in ray.nodes() if x["Alive"]])
        out["driver_rss_after_init_mb"] = _rss_mb()
        with tempfile.TemporaryDirectory(prefix="bench-ray3-") as wd:
            # 3 chunks per document; the driver keeps the per-chunk (doc id, position) lists that the
            # co-occurrence windows need (ShardSet metas): the one O(n) thing it holds
            doc_ids = [f"d{i // 3}" for i in range(n)]
            pos = np.arange(n, dtype=np.int32) % 3
            bounds = shard_bounds(n, NODES, doc_ids=doc_ids)
            t0 = time.perf_counter()
            task = ray.remote(write_synthetic_shard).options(num_cpus=1, max_retries=3)
            paths = ray.get([task.remote(os.path.join(wd, f"shard_{i:05d}.npy"), a, b, seed)
                             for i, (a, b) in enumerate(bounds)])
            out["seconds_write_shards"] = time.perf_counter() - t0
            specs = [ShardSpec(i, p, a, b) for i, (p, (a, b)) in enumerate(zip(paths, bounds))]
            metas = [{"doc_ids": doc_ids[a:b], "positions": pos[a:b]} for a, b in bounds]
            del doc_ids
            out["driver_rss_before_stages_mb"] = _rss_mb()
            with ShardSet(specs, n, os.path.join(wd, "state"), num_cpus=1, metas=metas) as shards:
                try:     # which raylet each shard actor runs on
                    out["shard_nodes"] = shards.get([a.__ray_call__.remote(
                        lambda self: ray.get_runtime_context().get_node_id()[:8]) for a in shards.actors])
                except Exception as e:                # noqa: BLE001 (older Ray: no __ray_call__)
                    out["shard_nodes"] = repr(e)[:200]
                cfg = Config(n_summaries=0)
                t0 = time.perf_counter()
                arr = build_index_arrays(shards, cfg, gather=False)
                out["seconds_stages_2_3"] = time.perf_counter() - t0
                info = shards.info()
            out["stage_seconds"] = {k: round(v, 3) for k, v in arr["timings"].items()}
            out["worker_cpu_seconds"] = arr["worker_cpu_seconds"]
            out["rq_iterations"] = arr["n_iter"]
            out["message_bytes"] = arr["message_bytes"]
            out["context"] = arr["context"]
            g = arr["graph"]
            out["graph"] = {"nodes": int(g.n_nodes), "edges": int(len(g.edge_src)), "member_nnz": int(g.members)}
            out["worker_rows"] = [i["rows"] for i in info]
            out["worker_peak_rss_mb"] = [round(i["maxrss_mb"], 1) for i in info]
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    out["seconds_total"] = time.perf_counter() - t_all
    out["driver_rss_start_mb"] = rss0
    out["driver_peak_rss_mb"] = _peak_mb()
    out["loadavg_end"] = os.getloadavg()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[20_000, 100_000, 300_000, 1_000_000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "scale_ray.json"))
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print("RESULT " + json.dumps(run_one(a.n[0], a.seed)), flush=True)
        return
    import ray
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    results = {"benchmark": "ray_three_nodes_driver_memory",
               "machine": {"cpu_model": cpu, "cpus": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version(), "ray": ray.__version__,
                           "loadavg_start": os.getloadavg(),
                           "shared_machine": "2 cores shared with five other jobs (one of them a million-chunk "
                                             "index build) during these runs: wall times include their load"},
               "config": {"dim": D, "rq_sizes": [96, 24, 12], "rq_max_points_per_centroid": 256,
                          "reduce": "ordered", "gather": False, "nodes": NODES, "cpus_per_node": 1,
                          "object_store_bytes_per_node": STORE}, "runs": []}
    for n in a.n:
        p = subprocess.run([sys.executable, __file__, "--one", "--n", str(n), "--seed", str(a.seed)],
                           capture_output=True, text=True)
        line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
            raise SystemExit(f"run with n={n} failed")
        r = json.loads(line[-1][7:])
        results["runs"].append(r)
        print(f"n={n}: stages 2-3 {r['seconds_stages_2_3']:.1f}s driver peak {r['driver_peak_rss_mb']:.0f} MB "
              f"workers {r['worker_peak_rss_mb']} load {r['loadavg_end']}", flush=True)
        results["machine"]["loadavg_end"] = os.getloadavg()
        if len(results["runs"]) >= 2:
            xs = np.asarray([x["n"] for x in results["runs"]], float)
            ys = np.asarray([x["driver_peak_rss_mb"] for x in results["runs"]], float)
            slope, icpt = np.polyfit(xs, ys, 1)
            results["driver_peak_fit"] = {"mb_fixed": round(float(icpt), 1),
                                          "bytes_per_row": round(float(slope) * 2**20, 1)}
        os.makedirs(os.path.dirname(a.out), exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(results, f, indent=2)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
