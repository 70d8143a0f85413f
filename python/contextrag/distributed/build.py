"""Stages 1-3 of the index on shard actors, and ``ContextRAG.build(..., executor='ray')``.

Map-reduce, per stage (driver work is on k×d, M×M, V×V-sized matrices only):

* RQ-KMeans: ``kmeans.rq_kmeans`` (per-cluster sums and counts per shard).
* Memberships I (FCM of each chunk's residual per level): computed on the shard, per chunk.
* Crisp supports: per chunk on the shard; seed support = Σ over shards (integers, exact).
* Seed-pair core meet cardinalities Σ_g min(·,·): per-shard float64 partial sums, then a sum; crisp
  intersections: integer partials.
* Closures / intents extent↑ = luk_up, a min over chunks: per-shard partial mins, then a min (exact:
  min never rounds). Extents (luk_down, per chunk) stay on the shards.
* Co-occurrence counts: shards hold whole documents, windows never cross documents: integer partials.
* Attribute centroids: per-shard partial sums of member embeddings.

The node-selection rules are index.graph's (``select_from_reduced``), applied by the driver to the reduced
matrices; tests check the graph against the single-process ``build_graph`` on the same context.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid

import numpy as np
import scipy.sparse as sp

from .kmeans import rq_kmeans


def context_spec(books, config, weight: float = 1.0) -> dict:
    """What a shard needs to compute its rows of the context with the index's own family code."""
    return {"key": uuid.uuid4().hex, "books": [np.asarray(b, dtype=np.float32) for b in books],
            "config": config, "weight": float(weight)}


def _min_reduce(parts):
    out = parts[0].copy()
    for p in parts[1:]:
        np.minimum(out, p, out=out)
    return out


def distributed_graph(shards, spec_ref, attr_group: np.ndarray, config, n: int, *, gather: bool = True):
    """index.graph.build_graph's rules with every per-chunk reduction done on the shards."""
    from ..index.graph import COOC, ConceptGraph, lattice_edges, select_from_reduced
    from .layout import check_documents_whole
    if getattr(shards, "metas", None) is None:
        raise ValueError("the graph's co-occurrence edges need each shard's chunk doc_ids and positions "
                         "(ShardSet(..., metas=[{'doc_ids': ..., 'positions': ...}, ...]))")
    check_documents_whole(shards.metas)
    ray = shards._ray
    tm = {}
    t0 = time.perf_counter()
    min_support = config.min_support
    support = np.sum(shards.get(shards.map("support", spec_ref)), axis=0)
    seeds = np.flatnonzero(support >= min_support)
    S = len(seeds)
    parts = shards.get(shards.map("seed_pairs", spec_ref, seeds))
    nb = {"pairs_in": int(sum(p[0].nbytes + p[1].nbytes for p in parts))}
    K = np.sum([p[0] for p in parts], axis=0) if S else np.zeros((0, 0))
    inter = np.sum([p[1] for p in parts], axis=0) if S else np.zeros((0, 0), np.int64)
    tm["pairs"] = time.perf_counter() - t0
    # -- the selection rules of index.graph, on the reduced S×S matrices
    kind, parents, attr, score = select_from_reduced(K, inter, support, seeds, attr_group, config)
    V = len(kind)
    # -- members (per chunk) and intents (min over chunks)
    t0 = time.perf_counter()
    g_ref = ray.put((kind, parents, attr))
    up_refs = shards.map("node_up", spec_ref, kind, parents, attr, np.arange(V))
    if gather:
        mem_refs = shards.map("node_members", spec_ref, kind, parents, attr)
        members = sp.hstack(shards.get(mem_refs), format="csr").astype(bool) if V else \
            sp.csr_matrix((0, n), dtype=bool)
    else:   # members stay on the shards (a sharded index would store them there); count them only
        members = int(sum(shards.get(shards.map("node_members_nnz", spec_ref, kind, parents, attr))))
    ups = shards.get(up_refs)
    nb["intents_in"] = int(sum(u.nbytes for u in ups))
    intent = _min_reduce(ups) if V else np.zeros((0, len(attr_group)), np.float32)
    tm["members_intents"] = time.perf_counter() - t0
    del g_ref
    # -- edges: lattice (driver, from the selection) and co-occurrence (integer partials)
    t0 = time.perf_counter()
    ls, ld, lk, lw = lattice_edges(kind, parents, score)
    C = None
    nb["cooc_in"] = 0
    for part in shards.get(shards.map("cooc", spec_ref, kind, parents, attr, int(config.cooc_window))):
        nb["cooc_in"] += int(part.data.nbytes + part.indices.nbytes + part.indptr.nbytes)
        C = part if C is None else C + part
    C = sp.coo_matrix(C) if C is not None else sp.coo_matrix((V, V))
    keep = (C.row != C.col) & (C.data >= max(int(config.cooc_threshold), 1))
    cs, cd, cw = C.row[keep].astype(np.int32), C.col[keep].astype(np.int32), C.data[keep].astype(np.float32)
    tm["edges"] = time.perf_counter() - t0
    tm["bytes"] = nb
    g = ConceptGraph(kind, parents, attr, np.asarray(intent, np.float32), members, score,
                     np.concatenate([ls, cs]).astype(np.int32), np.concatenate([ld, cd]).astype(np.int32),
                     np.concatenate([lk, np.full(len(cs), COOC, np.int8)]).astype(np.int8),
                     np.concatenate([lw, cw]).astype(np.float32))
    return g, tm


def build_index_arrays(shards, config, *, init="k-means++", reduce: str = "ordered", graph: bool = True,
                       gather: bool = True) -> dict:
    """Stages 2-3 of the index on ``shards`` (a ShardSet over the chunk embeddings).

    Returns the arrays the single-machine path computes: 'codebooks', 'codes' (n, L), 'I' (n, M)
    memberships (before the family weight), 'residual_sq' (n,), 'sizes', 'inertia', 'n_iter', 'groups', and with ``graph``
    'graph' (index.graph.ConceptGraph) and 'attr_centroids' (M, d); 'timings' (seconds per stage)
    and 'message_bytes'; 'members', 'names', 'state' (the family's crisp supports, attribute names,
    codebook state). ``init``/``reduce``: see ``kmeans.rq_kmeans``. ``gather=False`` leaves every
    per-chunk array on the shards (the driver then holds only k×d, M×M and V×V matrices; 'context'
    and the graph's 'members' become sizes/counts): what a sharded index writer would use.
    """
    from ..index.build import unit_rows
    fw = config.family_weights
    other = sorted(k for k, w in fw.items() if k != "rq" and w)
    if other:
        raise ValueError(f"executor='ray' builds the 'rq' attribute family only; Config.family_weights "
                         f"also names {other} (set their weight to 0 or build on one machine)")
    ray = shards._ray
    timings = {}
    cpu = {}
    c0 = shards.get(shards.map("cpu_seconds"))

    def _cpu(stage):   # per-shard CPU seconds spent in a stage (independent of other load on the host)
        nonlocal c0
        c1 = shards.get(shards.map("cpu_seconds"))
        cpu[stage] = [round(b - a, 3) for a, b in zip(c0, c1)]
        c0 = c1
    t0 = time.perf_counter()
    rq = rq_kmeans(shards, tuple(config.rq_sizes), n_iter=config.rq_iters, seed=config.seed, init=init,
                   max_points_per_centroid=config.rq_max_points_per_centroid, reduce=reduce)
    timings["rq_kmeans"] = time.perf_counter() - t0
    _cpu("rq_kmeans")
    spec = context_spec(rq.codebooks, config, float(fw.get("rq", 1.0)))
    spec_ref = ray.put(spec)
    t0 = time.perf_counter()
    out = {"codebooks": rq.codebooks, "sizes": rq.sizes, "inertia": rq.inertia, "n_iter": rq.n_iter,
           "message_bytes": dict(rq.message_bytes), "rq_timings": rq.timings}
    if gather:
        rows = shards.get(shards.map("context_rows", spec_ref))
        groups = np.asarray(rows[0]["groups"], np.int32)
        out.update({"codes": np.concatenate([r["codes"] for r in rows]),
                    "I": np.concatenate([r["I"] for r in rows]),
                    "residual_sq": np.concatenate([r["residual_sq"] for r in rows]), "groups": groups,
                    "members": sp.vstack([r["members"] for r in rows], format="csr"), "names": rows[0]["names"],
                    "state": rows[0]["state"]})
    else:
        summ = shards.get(shards.map("context_summary", spec_ref))
        groups = np.concatenate([np.full(C.shape[0], lvl, np.int32) for lvl, C in enumerate(rq.codebooks)])
        out.update({"groups": groups, "context": {"rows": sum(x["rows"] for x in summ),
                                                  "bytes_on_shards": sum(x["bytes"] for x in summ),
                                                  "members_nnz": sum(x["members_nnz"] for x in summ)}})
    timings["memberships"] = time.perf_counter() - t0
    _cpu("memberships")
    if graph:
        g, tg = distributed_graph(shards, spec_ref, groups, config, shards.n_total, gather=gather)
        out["graph"] = g
        out["message_bytes"].update({f"graph_{k}": v for k, v in tg.pop("bytes").items()})
        timings.update({f"graph_{k}": v for k, v in tg.items()})
        _cpu("graph")
        t0 = time.perf_counter()
        out["attr_centroids"] = unit_rows(np.sum(shards.get(shards.map("attr_sums", spec_ref)), axis=0))
        timings["attr_centroids"] = time.perf_counter() - t0
        _cpu("attr_centroids")
    out["timings"] = timings
    out["worker_cpu_seconds"] = cpu
    return out


def lexical_on_ray(titles, texts, names, n_tasks: int, stemmer: str | None = None):
    """The lexical families with the map on Ray tasks and the reduce in the driver: each task takes a
    run of consecutive blocks (a shard of the chunks), builds the title matcher once, tokenises and
    matches its blocks (``index.lexical.tokens.map_block``); the driver merges the term vocabularies in block
    order, counts the document frequencies and assembles the CSR incidence
    (``lexical.map_reduce_families``); with ``stemmer`` the term vocabulary is stemmed after the
    reduce. The same families as the single-process build (tested)."""
    import ray

    from ..index.lexical import families as lexical
    from ..index.lexical import tokens as lm

    @ray.remote
    def _map(jobs, names, max_n):
        matcher = lm.Matcher(names, max_n) if names is not None else None
        return [lm.map_block(*j, matcher=matcher) for j in jobs]

    def map_fn(jobs, names, max_n):
        ref = ray.put(names)
        cut = np.linspace(0, len(jobs), max(1, min(n_tasks, len(jobs))) + 1).astype(int)
        parts = [_map.remote(jobs[a:b], ref, max_n) for a, b in zip(cut[:-1], cut[1:]) if b > a]
        return [r for part in ray.get(parts) for r in part]

    block = max(1, min(lexical.BLOCK, -(-len(texts) // max(n_tasks, 1))))   # at least one block per task
    return lexical.lexical_families(titles, texts, names, block=block, map_fn=map_fn, stemmer=stemmer)


def build_index_ray(docs, config, embedder, llm=None, *, address: str | None = None, n_shards: int | None = None,
                    work_dir: str | None = None, num_cpus: int | None = None, reduce: str = "ordered"):
    """``ContextRAG.build(..., executor='ray')``: the index of ``index.build.build_index`` with chunk
    embedding on Ray Data and stages 2-3 on shard actors. Same Index, same on-disk format."""
    from ..index.build import Timer, embed_inputs, finish_items, lexical_family_names, make_chunker
    from ..index.context import FamilyResult, FuzzyContext, block_from
    from ..index.chunking import doc_entry
    from ..index.core import Index, index_stemmer
    from ..llm.ledger import CostLedger
    from .cluster import RayCluster, ShardSet
    from .embed import embed_to_shards
    timings: dict = {}
    with Timer(timings, "chunk"):
        chunks = make_chunker(config, embedder).split_all(docs)
    if not chunks:
        raise ValueError("docs produced no chunks")
    n = len(chunks)
    doc_ids = [c.doc_id for c in chunks]
    positions = np.asarray([c.position for c in chunks], np.int32)
    texts = embed_inputs([c.title for c in chunks], [c.text for c in chunks], config)
    own_dir = work_dir is None
    wd = tempfile.mkdtemp(prefix="contextrag-ray-") if own_dir else work_dir
    try:
        with RayCluster(address, num_cpus=num_cpus):
            import ray
            ns = n_shards or max(1, int(ray.cluster_resources().get("GPU", 0)) or
                                 int(ray.cluster_resources().get("CPU", 1)))
            with Timer(timings, "embed"):
                specs = embed_to_shards(texts, os.path.join(wd, "emb"), ns,
                                        model=getattr(embedder, "name", config.embedding_model),
                                        passage_prefix=getattr(embedder, "passage_prefix", None),
                                        batch_size=config.embed_batch_size, doc_ids=doc_ids,
                                        backend=getattr(embedder, "backend_requested", config.embedder))
            metas = [{"doc_ids": doc_ids[s.start:s.stop], "positions": positions[s.start:s.stop]} for s in specs]
            with ShardSet(specs, n, os.path.join(wd, "state"), metas=metas) as shards:
                arrays = build_index_arrays(shards, config, reduce=reduce)
                # the index format keeps every chunk embedding: the final write is the one place
                # that reads the shards' rows back (a sharded index format would not, see SCALING.md)
                E = np.concatenate(shards.get(shards.map("embeddings")))
            with Timer(timings, "ray_lexical"):
                lex = lexical_on_ray([c.title for c in chunks], [c.text for c in chunks],
                                     lexical_family_names(config), ns, stemmer=index_stemmer(config))
    finally:
        if own_dir:
            shutil.rmtree(wd, ignore_errors=True)
    for k, v in arrays["timings"].items():
        timings[f"ray_{k}"] = v
    ix = Index(config=config, docs={d.doc_id: doc_entry(d) for d in docs},
               chunk_ids=[c.chunk_id for c in chunks], chunk_doc_ids=doc_ids,
               chunk_titles=[c.title for c in chunks], chunk_texts=[c.text for c in chunks],
               chunk_positions=positions,
               chunk_spans=np.asarray([[c.start_char, c.end_char] for c in chunks], np.int64).reshape(-1, 2),
               chunk_fitted=np.ones(n, bool), context=None, graph=None,
               attr_centroids=None, item_ids=[], item_kinds=None, item_texts=[], item_node=None,
               item_members=None, item_sources=None, embeddings=None, embedder=embedder,
               ledger=CostLedger(), timings=timings)
    books = arrays["codebooks"]
    res = FamilyResult(arrays["I"], arrays["names"], arrays["groups"], arrays["members"], arrays["state"],
                       {"codes": arrays["codes"], "residual_sq": arrays["residual_sq"]},
                       {"sizes": list(arrays["sizes"]), "inertia": [float(v) for v in arrays["inertia"]]})
    w = float(config.family_weights.get("rq", 1.0))
    ix.context = FuzzyContext([block_from("rq", w, res, config)])
    ix.info["fit"] = {"chunks": n, "residual_sq_mean": float(arrays["residual_sq"].mean()),
                      "rq_sizes": [int(C.shape[0]) for C in books], **res.info}
    ix.info["executor"] = {"kind": "ray", "address": address, "shards": len(specs), "reduce": reduce,
                           "message_bytes": arrays["message_bytes"]}
    ix.graph = arrays["graph"]
    ix.attr_centroids = arrays["attr_centroids"]
    ix.invalidate()
    finish_items(ix, llm, E, lexical=lex)
    return ix
