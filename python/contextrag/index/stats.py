"""``ContextRAG.stats()``: counts, per-level occupancy (paper Table 4), node types, sizes, timings,
LLM cost, and drift since the last clustering."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .core import Index
from .lexical.families import lexical_stats


def _dir_bytes(path) -> int | None:
    """Bytes of the index's files. Snapshots a save replaced (``.old-*``) are left out: a background
    thread is deleting them (index/store.py), so they are no part of the index and may vanish while
    they are walked; so may any file a concurrent save removes."""
    if path is None or not Path(path).exists():
        return None
    total = 0
    for root, dirs, files in os.walk(path):      # errors (a folder removed meanwhile) are skipped
        if Path(root) == Path(path):
            dirs[:] = [d for d in dirs if not d.startswith(".old-")]
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_size
            except FileNotFoundError:
                continue
    return total


def drift(ix: Index) -> dict:
    """How far the index has moved from its clustering.

    ``residual_ratio``: mean squared final RQ residual of chunks added since the fit, divided by the
    same mean at fit time (1 = new chunks are quantised as well as the fitted ones; growing values
    mean the codebooks no longer describe the corpus: time to ``rebuild``).
    """
    rq = ix.context.block("rq")
    r = rq.rows["residual_sq"]
    fitted = ix.chunk_fitted
    base = ix.info.get("fit", {}).get("residual_sq_mean")
    new = r[~fitted]
    out = {"chunks_since_fit": int((~fitted).sum()), "fraction_since_fit": float((~fitted).mean()) if len(r) else 0.0,
           "fit_residual_sq_mean": base,
           "new_residual_sq_mean": float(new.mean()) if len(new) else None,
           "residual_ratio": float(new.mean() / base) if len(new) and base else None}
    return out


def lexical_node_stats(ix: Index) -> dict:
    """Lexical concept nodes (index/lexical/nodes.py) per kind: the join/meet items of no RQ graph node."""
    from .core import JOIN_ITEM, MEET_ITEM
    sizes = np.diff(ix.item_members.indptr)
    out = {}
    for name, k in (("join", JOIN_ITEM), ("meet", MEET_ITEM)):
        sel = (ix.item_kinds == k) & (ix.item_node < 0)
        out[name] = {"count": int(sel.sum()), "mean_members": float(sizes[sel].mean()) if sel.any() else 0.0,
                     "max_members": int(sizes[sel].max()) if sel.any() else 0}
    return out


def index_stats(ix: Index, path=None) -> dict:
    from .core import ITEM_KINDS
    from .graph import EDGE_KINDS, NODE_KINDS
    g = ix.graph
    mem_sizes = np.diff(g.members.indptr)
    nodes = {}
    for i, k in enumerate(NODE_KINDS):
        sel = g.kind == i
        nodes[k] = {"count": int(sel.sum()),
                    "mean_members": float(mem_sizes[sel].mean()) if sel.any() else 0.0,
                    "max_members": int(mem_sizes[sel].max()) if sel.any() else 0}
    ctx = ix.context
    fam = []
    for b in ctx.blocks:
        nnz = b.matrix.nnz if hasattr(b.matrix, "nnz") else int(np.count_nonzero(b.matrix))
        fam.append({"name": b.name, "weight": b.weight, "attributes": len(b.names),
                    "density": nnz / max(b.matrix.shape[0] * b.matrix.shape[1], 1),
                    "storage": "csr" if hasattr(b.matrix, "nnz") else "dense"})
    return {
        "docs": len(ix.docs), "chunks": ix.n_chunks, "items": ix.n_items,
        "items_by_kind": {k: int((ix.item_kinds == i).sum()) for i, k in enumerate(ITEM_KINDS)},
        "dim": ix.dim, "embedding_model": ix.config.embedding_model,
        "attributes": ctx.n_attributes, "families": fam,
        "lexical_families": lexical_stats(getattr(ix, "lexical", None)),
        "lexical_nodes": lexical_node_stats(ix),
        "occupancy": ix.occupancy(),
        "nodes": nodes,
        "edges": {k: int((g.edge_kind == i).sum()) for i, k in enumerate(EDGE_KINDS)},
        "bytes_on_disk": _dir_bytes(path),
        "bytes_in_memory": {"embeddings": int(ix.embeddings.nbytes),
                            "context": int(sum(b.matrix.data.nbytes if hasattr(b.matrix, "nnz") else b.matrix.nbytes
                                               for b in ctx.blocks)),
                            "lexical": int(sum(f["bytes"] for f in lexical_stats(getattr(ix, "lexical", None)))),
                            "intents": int(g.intent.nbytes)},
        "timings": dict(ix.timings),
        "llm_cost": ix.ledger.to_dict(),
        "graph_llm_tokens": 0,  # stages 1-3 make no LLM call: nothing in the graph code can reach one
        "summaries": ix.info.get("summaries"),
        "drift": drift(ix),
        "updates": ix.info.get("updates", []),
    }
