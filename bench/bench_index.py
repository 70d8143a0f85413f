#!/usr/bin/env python
"""Index benchmarks, JSON under bench/results/:

    python bench/bench_index.py ultradomain   # index_ultradomain.json: UltraDomain Mix end to end
    python bench/bench_index.py synthetic     # index_synthetic_1m.json: stages 2-3 on 1M×384 synthetic
    python bench/bench_index.py throughput    # index_throughput.json: HotpotQA-500's corpus and a
                                              # 100k-chunk corpus, raw text to saved index, per stage

ultradomain: chunk (embedder tokenizer, 200/40) + embed (MiniLM) + RQ-KMeans 96/24/12 + FCM context +
concept graph + items + BM25 + save, with the paper's defaults and no LLM: seconds per stage,
graph-construction LLM tokens (must be 0), index size on disk, per-level occupancy (Table 4).
synthetic: stages 2-3 only (RQ-KMeans, FCM context, concept graph with co-occurrence windows) on
n clustered unit vectors in 10-chunk documents: seconds per stage and the process's peak RSS, and
the RQ stage timed on its own first (``rq_kmeans_alone``: the call build_context then repeats).
The machine is shared: load averages before and after are recorded.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("CONTEXTRAG_DATA", REPO.parent / "shared" / "data"))
RESULTS = REPO / "bench" / "results"


def machine() -> dict:
    import torch

    import contextrag
    import contextrag.machine
    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except Exception:
        pass
    mem = None
    try:
        mem = int(next(ln.split()[1] for ln in open("/proc/meminfo") if ln.startswith("MemTotal"))) * 1024
    except Exception:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except Exception:
        commit = None
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu,
            "cores": os.cpu_count(), "mem_bytes": mem, "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "contextrag": contextrag.__version__,
            "backends": {k: v["available"] for k, v in contextrag.ops.backends().items()},
            "git_commit": commit, "loadavg_start": os.getloadavg(),
            "contextrag_cpu_isa": contextrag.ops.native().cpu_isa() if contextrag.ops.native() else None,
            "contextrag_isa_env": os.environ.get("CONTEXTRAG_ISA"),
            "profile": contextrag.machine.profile().to_dict(), "precision_env": os.environ.get("CONTEXTRAG_PRECISION")}


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cpu_seconds() -> float:
    """User + system CPU time of this process, all threads: on a shared machine wall time measures
    the neighbours as much as the code, CPU time does not (wall ≈ cpu / cores when unloaded)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def write(name: str, out: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    out["machine"]["loadavg_end"] = os.getloadavg()
    p = RESULTS / name
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=2, default=str))
    os.replace(tmp, p)
    print(f"wrote {p}")
    return p


def ultradomain(args) -> Path:
    from contextrag import Config, ContextRAG
    docs = json.loads((DATA / "ultradomain_mix_contexts.json").read_text())
    out = {"benchmark": "index_ultradomain_mix", "machine": machine(), "corpus": {
        "file": "ultradomain_mix_contexts.json", "documents": len(docs), "characters": sum(map(len, docs))}}
    cfg = Config.paper()   # the paper's: 96/24/12, m = 2, 64 joins + 64 meets, 30 summaries (no LLM here)
    out["config"] = cfg.to_dict()
    tmp = Path(tempfile.mkdtemp(prefix="ctxrag-bench-"))
    try:
        t, c = time.perf_counter(), cpu_seconds()
        rag = ContextRAG.build([{"id": f"mix{i}", "text": d} for i, d in enumerate(docs)], path=tmp / "idx",
                               config=cfg, llm=None)
        total = time.perf_counter() - t
        out["cpu_seconds_total"] = cpu_seconds() - c
        st = rag.stats()
        ix = rag.index
        ledger_tokens = ix.ledger.to_dict()["total"]
        out.update({
            "seconds_total": total, "seconds_per_stage": st["timings"],
            "graph_construction_llm_tokens": ledger_tokens["prompt_tokens"] + ledger_tokens["completion_tokens"],
            "llm_calls": ledger_tokens["calls"], "summaries": st["summaries"],
            "chunks": st["chunks"], "items": st["items"], "items_by_kind": st["items_by_kind"],
            "attributes": st["attributes"], "nodes": st["nodes"], "edges": st["edges"],
            "index_bytes_on_disk": st["bytes_on_disk"],
            "index_files": {p.name: p.stat().st_size for p in (tmp / "idx").rglob("*") if p.is_file()},
            "occupancy_table4": st["occupancy"], "peak_rss_bytes": peak_rss(),
        })
        if args.keep_embeddings:
            np.save(args.keep_embeddings, ix.chunk_embeddings)
        t = time.perf_counter()
        ContextRAG.load(tmp / "idx")
        out["seconds_load"] = time.perf_counter() - t
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return write("index_ultradomain.json", out)


def synthetic_embeddings(n: int, d: int, seed: int, topics: int = 1000) -> np.ndarray:
    """Clustered unit vectors: topic centres + subtopic offsets + noise (blocks, to bound memory)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((topics, d)).astype(np.float32)
    sub = rng.standard_normal((topics * 8, d)).astype(np.float32) * 0.5
    X = np.empty((n, d), np.float32)
    step = 100_000
    for s in range(0, n, step):
        m = min(step, n - s)
        t = rng.integers(topics, size=m)
        u = t * 8 + rng.integers(8, size=m)
        X[s:s + m] = centres[t] + sub[u] + 0.6 * rng.standard_normal((m, d)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X


def synthetic(args) -> Path:
    from contextrag import Config
    from contextrag.index.context import ChunkView, build_context
    from contextrag.index.graph import build_graph
    n, d = args.n, args.dim
    out = {"benchmark": "index_stages_2_3_synthetic", "machine": machine(), "n": n, "dim": d}
    cfg = Config.paper()   # 64 joins + 64 meets: the graph stage the figures describe
    out["config"] = cfg.to_dict()
    t = time.perf_counter()
    X = synthetic_embeddings(n, d, 0)
    doc_ids = [f"d{i // 10}" for i in range(n)]      # 10 consecutive chunks per document
    positions = (np.arange(n) % 10).astype(np.int32)
    view = ChunkView([""] * n, [""] * n, doc_ids, positions)
    out["seconds_generate"] = time.perf_counter() - t
    out["rss_after_generate_bytes"] = peak_rss()
    stages, cpu = {}, {}
    # the RQ stage on its own (the same call build_context makes first), for the RQ figure alone
    from contextrag import ops
    t, c = time.perf_counter(), cpu_seconds()
    rq = ops.rq_kmeans(X, tuple(cfg.rq_sizes), n_iter=cfg.rq_iters, seed=cfg.seed,
                       max_points_per_centroid=cfg.rq_max_points_per_centroid)
    out["rq_kmeans_alone"] = {"seconds": time.perf_counter() - t, "cpu_seconds": cpu_seconds() - c,
                              "residual_inertia_per_level": rq.inertia}
    print(f"rq_kmeans alone: {out['rq_kmeans_alone']}", flush=True)
    del rq
    t, c = time.perf_counter(), cpu_seconds()
    ctx = build_context(view, X, cfg)
    stages["stage2_rq_kmeans_and_fcm_context"] = time.perf_counter() - t
    cpu["stage2_rq_kmeans_and_fcm_context"] = cpu_seconds() - c
    out["rss_after_stage2_bytes"] = peak_rss()
    print(f"stage 2: {stages} cpu {cpu} rss {peak_rss() / 2**30:.2f} GiB", flush=True)
    t, c = time.perf_counter(), cpu_seconds()
    I = ctx.dense()
    g = build_graph(I, ctx.members(), ctx.attr_group, doc_ids, positions, cfg)
    stages["stage3_concept_graph"] = time.perf_counter() - t
    cpu["stage3_concept_graph"] = cpu_seconds() - c
    out.update({"seconds_per_stage": stages, "seconds_stages_2_3": sum(stages.values()),
                "cpu_seconds_per_stage": cpu, "cpu_seconds_stages_2_3": sum(cpu.values()),
                "estimated_unloaded_seconds_stages_2_3": sum(cpu.values()) / max(os.cpu_count() or 1, 1),
                "peak_rss_bytes": peak_rss(), "attributes": int(I.shape[1]),
                "context_storage": [("csr" if hasattr(b.matrix, "nnz") else "dense") for b in ctx.blocks],
                "nodes_by_kind": {k: int((g.kind == i).sum()) for i, k in enumerate(("seed", "join", "meet"))},
                "edges_by_kind": {k: int((g.edge_kind == i).sum()) for i, k in enumerate(("up", "down", "cooc"))},
                "goal": {"seconds": 300, "peak_bytes": 8 * 2 ** 30}})
    out["meets_goal_wall"] = out["seconds_stages_2_3"] < 300 and out["peak_rss_bytes"] < 8 * 2 ** 30
    out["meets_goal_cpu_estimate"] = (out["estimated_unloaded_seconds_stages_2_3"] < 300
                                      and out["peak_rss_bytes"] < 8 * 2 ** 30)
    return write(f"index_synthetic_{n // 1000}k.json" if n < 1_000_000 else "index_synthetic_1m.json", out)


def _build_rate(docs: list[dict], config, keep: str | None = None) -> dict:
    """One end-to-end build (raw text -> saved index) with its seconds and chunks/s per stage."""
    from contextrag import ContextRAG
    tmp = Path(tempfile.mkdtemp(prefix="ctxrag-bench-"))
    try:
        la, t, c = os.getloadavg(), time.perf_counter(), cpu_seconds()
        rag = ContextRAG.build(docs, path=tmp / "idx", config=config, llm=None, progress=False)
        total, cpu = time.perf_counter() - t, cpu_seconds() - c
        ix = rag.index
        n = ix.n_chunks
        stages = {k: round(v, 3) for k, v in ix.timings.items()}
        row = {"documents": len(docs), "chunks": n, "embedder": ix.info.get("embedder"),
               "seconds_total": round(total, 3), "cpu_seconds_total": round(cpu, 3),
               "chunks_per_s_total": round(n / total, 2), "seconds_per_stage": stages,
               "chunks_per_s_per_stage": {k: round(n / v, 1) for k, v in stages.items() if v > 0},
               "loadavg_before": la, "loadavg_after": os.getloadavg(), "peak_rss_bytes": peak_rss()}
        if keep:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(tmp / "idx", keep)
        return row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def throughput(args) -> Path:
    """HotpotQA-500's corpus with each CPU embedder (the default first), and a 100k-chunk corpus
    recombined from the shared data's sentences (bench/spread_corpus.py) with the static embedder
    (and the default one with --big-default: hours on 2 cores)."""
    from contextrag import Config
    from contextrag.eval import datasets as ds
    out = {"benchmark": "index_throughput", "machine": machine(), "runs": {}}
    qa = ds.load(DATA / "hotpotqa_500.json", "hotpotqa")
    docs = qa.docs_for_index()
    for emb in args.embedders.split(","):
        key = f"hotpotqa500/{emb}"
        out["runs"][key] = _build_rate(docs, Config(embedder=emb), keep=args.keep if emb == "auto" else None)
        print(key, json.dumps(out["runs"][key]["seconds_per_stage"]), out["runs"][key]["seconds_total"], flush=True)
        write("index_throughput.json", out)
    if args.big:
        sys.path.insert(0, str(REPO / "bench"))
        from spread_corpus import make_corpus
        titles, texts = make_corpus(args.big, seed=0)
        big = [{"id": f"s{i}", "title": t, "text": x} for i, (t, x) in enumerate(zip(titles, texts))]
        for emb in (["static"] + (["auto"] if args.big_default else [])):
            key = f"recombined{args.big // 1000}k/{emb}"
            out["runs"][key] = _build_rate(big, Config(embedder=emb))
            print(key, json.dumps(out["runs"][key]["seconds_per_stage"]), out["runs"][key]["seconds_total"], flush=True)
            write("index_throughput.json", out)
    return write("index_throughput.json", out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=("ultradomain", "synthetic", "throughput"))
    p.add_argument("--embedders", default="auto,onnx-int8,static,torch",
                   help="throughput: Config.embedder values to build HotpotQA-500's corpus with")
    p.add_argument("--big", type=int, default=100_000, help="throughput: chunks of the recombined corpus (0: skip)")
    p.add_argument("--big-default", action="store_true", help="throughput: also build the big corpus with the default")
    p.add_argument("--keep", help="throughput: keep the default build's HotpotQA-500 index here")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--keep-embeddings", help="ultradomain: also save the chunk embeddings (.npy) here")
    args = p.parse_args(argv)
    {"ultradomain": ultradomain, "synthetic": synthetic, "throughput": throughput}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
