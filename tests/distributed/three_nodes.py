"""Run as a script by test_three_nodes.py: a local Ray cluster of three nodes (three raylets, three
object stores, one CPU each) builds an index with ``ContextRAG.build(executor='ray')``; the script
compares it with the single-process build of the same chunks and embeddings and prints one JSON line.

A separate process, so that the cluster's raylets never meet the in-process Ray runtime of the other
distributed tests, and everything it started is shut down when it exits.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # tests/: shared_data
sys.path.insert(0, str(Path(__file__).resolve().parent))         # tests/distributed/: its conftest

NODES = 3
STORE = 80 * 1024 * 1024      # bytes of object store per node (Ray's minimum is 75 MiB)


def main(n_docs: int) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from conftest import hotpot_docs
    from contextrag import ContextRAG
    from contextrag.config import Config
    from contextrag.embed.embedder import Embedder
    from contextrag.index.build import build_index, make_chunker
    from contextrag.index.chunking import normalize_docs
    from contextrag.index.graph import COOC
    docs = hotpot_docs(n_docs)
    cfg = Config(rq_sizes=(12, 6, 3), seed=5, n_summaries=0)
    embedder = Embedder("all-MiniLM-L6-v2", backend="onnx", show_progress=False)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "object_store_memory": STORE,
                                                            "include_dashboard": False})
    try:
        for _ in range(NODES - 1):
            cluster.add_node(num_cpus=1, object_store_memory=STORE)
        cluster.wait_for_nodes()
        with tempfile.TemporaryDirectory() as tmp:
            rag = ContextRAG.build(docs, path=str(Path(tmp) / "idx"), config=cfg, embedder=embedder,
                                   executor="ray", ray_address=cluster.address)
            ix = ContextRAG.load(str(Path(tmp) / "idx"), embedder=embedder).index
        nodes = [n for n in ray.nodes() if n["Alive"]] if ray.is_initialized() else None
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    norm = normalize_docs(docs)
    chunks = make_chunker(cfg, embedder).split_all(norm)
    ref = build_index(norm, cfg, embedder, None, precomputed=(chunks, np.asarray(ix.chunk_embeddings)))
    E_one = embedder.embed_passages([f"{c.title}\n{c.text}" if c.title else c.text for c in chunks])
    g, h = ix.graph, ref.graph
    m, k = g.edge_kind == COOC, h.edge_kind == COOC
    lex = all(ix.lexical.families[n].vocab == f.vocab and np.array_equal(ix.lexical.families[n].df, f.df)
              and (ix.lexical.families[n].incidence != f.incidence).nnz == 0
              for n, f in ref.lexical.families.items())
    q = docs[3]["title"]
    return {
        "nodes": NODES if nodes is None else len(nodes),
        "shards": ix.info["executor"]["shards"],
        "chunk_ids": ix.chunk_ids == [c.chunk_id for c in chunks],
        "embeddings_max_abs_diff": float(np.abs(np.asarray(ix.chunk_embeddings) - E_one).max()),
        "codes": bool(np.array_equal(ix.codes, ref.codes)),
        "context_max_abs_diff": float(np.abs(ix.context.dense() - ref.context.dense()).max()),
        "graph_nodes": bool(np.array_equal(g.kind, h.kind) and np.array_equal(g.parents, h.parents)),
        "intent_max_abs_diff": float(np.abs(g.intent - h.intent).max()) if g.n_nodes else 0.0,
        "members": int((g.members != h.members).nnz) == 0,
        "cooc_edges": sorted(zip(g.edge_src[m].tolist(), g.edge_dst[m].tolist()))
        == sorted(zip(h.edge_src[k].tolist(), h.edge_dst[k].tolist())),
        "items": ix.item_ids == ref.item_ids,
        "lexical": bool(lex) and list(ix.lexical.families) == list(ref.lexical.families),
        "retrieve": [x.id for x in rag.retrieve(q, k=3)] == [x.id for x in ContextRAG(ref).retrieve(q, k=3)],
    }


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 48)), flush=True)
