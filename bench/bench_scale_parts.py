#!/usr/bin/env python
"""The pieces of a million-chunk update and candidate query, each against the form it replaced, on
an index built by bench_scale.py -> bench/results/scale_1m.json ("parts" or --key).

    python bench/bench_scale_parts.py --index DIR [--repeats 5] [--key parts_amx]

One process, the old and new form of each piece interleaved, median (and min) wall seconds of
``--repeats`` runs; every pair is checked to give the same result. The memory-mapped arrays are read
once first, so page-cache misses are not timed.

* transposes: the context (n × V) made node-major and the node extents made item-major — NumPy's
  strided ``ascontiguousarray(a.T)`` against ``index.layout.transposed`` (the extension's blocked
  transpose; the NumPy blocks where it is absent or for a subset of the columns);
* a delete's kept extent columns: a fancy index over a million columns against ``np.take``, and
  ``np.take`` against the native transpose of the kept context (an all-seed graph's extents);
* the spreading union of the title and term families (``LexicalContext.incidence``): each family
  multiplied by its weight of 1 before ``hstack`` against stacking the families as they are;
* the document codes: one dict lookup per chunk against runs of equal neighbours (``doc_codes``);
* a delete's chunk texts: a byte mask over every text against slices of kept runs (``kept_rows``);
* the query view of a loaded index (``view_of``), built anew each time;
* the routing of 21,000 candidate rows: NumPy's gather, add and reduce against ``_C.route_rows``;
* the cosine of the same rows from the memory-mapped embeddings, and from a copy in anonymous memory
  (transparent huge pages where the kernel gives them);
* the routing of those rows by the generic (scalar) build of ``_C.route_rows`` against the one the
  CPU dispatches to (``CONTEXTRAG_ISA``'s choices, forced in one process);
* their cosine: NumPy's gather and BLAS against ``_C.dot_rows`` (equal within 1e-5: the summation
  orders differ);
* a question's BM25 scores from the stored counts: NumPy's passes against ``_C.bm25_accumulate``,
  for the first 20 HotpotQA-500 questions;
* the inverted file's probe for 10,010 chunks: the stable sort of every cell against the partition.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import machine, update_json  # noqa: E402


def _time(fn, repeats: int) -> tuple[float, float, object]:
    out, ts = None, []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), float(min(ts)), out


def _pair(res: dict, name: str, old, new, repeats: int, same) -> None:
    """Old and new interleaved (one of each per round), then checked equal with ``same``."""
    to, tn = [], []
    a = b = None
    for _ in range(repeats):
        t = time.perf_counter()
        a = old()
        to.append(time.perf_counter() - t)
        t = time.perf_counter()
        b = new()
        tn.append(time.perf_counter() - t)
    if not same(a, b):
        raise AssertionError(f"{name}: the two forms disagree")
    res[name] = {"old_median_s": round(float(np.median(to)), 4), "old_min_s": round(min(to), 4),
                 "new_median_s": round(float(np.median(tn)), 4), "new_min_s": round(min(tn), 4)}
    print(name, res[name], flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", required=True)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--key", default="parts")
    args = p.parse_args(argv)

    from contextrag import ContextRAG
    from contextrag.index.columns import LazyStrings
    import scipy.sparse as sp
    from contextrag.index.layout import kept_rows, transposed
    from contextrag.index.lexical.families import LexicalContext
    from contextrag.index.prepared import config_key, context_items_major
    from contextrag.index.lexical.nodes import doc_codes
    from contextrag.ops import native
    from contextrag.query import _view, view_of
    from contextrag.query.fuzzy import Router

    la0 = os.getloadavg()
    rag = ContextRAG.load(args.index, prepare=False)
    ix = rag.index
    n, R = ix.n_chunks, args.repeats
    res: dict = {}
    eq = np.array_equal

    D = np.asarray(ix.context.dense())
    D.sum()
    attrs = ix.graph.attr[ix.graph.kind == 0]
    _pair(res, "context_node_major", lambda: np.ascontiguousarray(D[:, attrs].T),
          lambda: transposed(D, attrs), R, eq)
    E = ix.node_extents()
    _pair(res, "extents_item_major", lambda: np.ascontiguousarray(E.T), lambda: transposed(E), R, eq)
    rng = np.random.default_rng(0)
    keep = np.setdiff1d(np.arange(n), rng.choice(n, 100, replace=False))
    _pair(res, "delete_kept_extent_columns", lambda: np.ascontiguousarray(E[:, keep]),
          lambda: np.take(E, keep, axis=1), R, eq)
    if context_items_major(ix) is not None:     # an all-seed graph: the extents are the context transposed
        Dk = np.ascontiguousarray(D[keep])
        _pair(res, "delete_extents_from_context", lambda: np.take(E, keep, axis=1), lambda: transposed(Dk), R, eq)
    key = config_key(ix.config)
    lex = LexicalContext({name: ix.lexical.families[name] for name, _ in key})
    for name, _ in key:
        M = lex.families[name].incidence
        M.indices.sum(), M.data.sum()

    def union_times_one():
        return sp.hstack([lex.families[f].incidence * float(min(1.0, w)) for f, w in key], format="csr",
                         dtype=np.float32)
    _pair(res, "spread_union", union_times_one, lambda: lex.incidence(dict(key)), R,
          lambda a, b: (a != b).nnz == 0 and a.shape == b.shape)

    ids = list(ix.chunk_doc_ids)

    def codes_dict():
        codes: dict = {}
        return np.fromiter((codes.setdefault(d, len(codes)) for d in ids), np.int64, len(ids))
    _pair(res, "doc_codes", codes_dict, lambda: doc_codes(ids), R, eq)

    texts = ix.chunk_texts
    if isinstance(texts, LazyStrings):
        buf, off = np.asarray(texts._buf, np.uint8), np.asarray(texts._off, np.int64)
        buf.sum()

        def take_mask():
            mask = np.zeros(n, bool)
            mask[keep] = True
            return np.ascontiguousarray(buf[np.repeat(mask, np.diff(off))])
        _pair(res, "delete_kept_texts", take_mask, lambda: kept_rows(off, buf, keep)[1], R, eq)

    def fresh_view():
        with _view._LOCK:
            _view._CACHE.clear()
        return view_of(ix)
    med, mn, v = _time(fresh_view, R)
    res["query_view_build"] = {"median_s": round(med, 4), "min_s": round(mn, 4)}
    print("query_view_build", res["query_view_build"], flush=True)

    C = native()
    router = v.router
    Ii = router.items_major()
    np.asarray(Ii).sum()
    Ev = v.E
    np.asarray(Ev).sum()
    mu = rng.random((1, router.n_nodes)).astype(np.float32)
    q = rng.random(Ev.shape[1]).astype(np.float32)
    idx = np.sort(rng.choice(Ii.shape[0], 21000, replace=False)).astype(np.int64)
    if C is not None and hasattr(C, "route_rows"):
        def gathered():
            out = np.empty((1, idx.size), np.float32)
            Router._route_gathered(mu, Ii, idx, out)
            return out
        _pair(res, "route_21000_rows", gathered, lambda: C.route_rows(mu, Ii, idx), max(R, 20), eq)

    def cos(A):
        out = np.zeros(idx.size, np.float32)
        for b0 in range(0, idx.size, 2048):
            out[b0:b0 + 2048] = A[idx[b0:b0 + 2048]] @ q
        return out
    anon = np.array(Ev)
    _pair(res, "cosine_21000_rows_mapped_vs_anonymous", lambda: cos(Ev), lambda: cos(anon), max(R, 20), eq)
    res["anon_huge_pages_kb"] = next((int(ln.split()[1]) for ln in open("/proc/self/smaps_rollup")
                                      if ln.startswith("AnonHugePages")), None)

    _query_rows(res, v, C, mu, Ii, Ev, q, idx, max(R, 20))

    update_json(n, args.key, {"machine": machine(), "chunks": n, "repeats": R, "parts": res,
                              "loadavg_start": la0, "loadavg_end": os.getloadavg()})
    return 0


def _query_rows(res: dict, v, C, mu, Ii, Ev, q, idx, R: int) -> None:
    """The candidate query's row kernels against the forms they replaced (module docstring)."""
    from contextrag.ops import _backend
    from contextrag.query.candidates import inverted_file
    if C is None or not hasattr(C, "dot_rows"):
        return
    isa = C.cpu_isa()

    def routed(name):
        C.set_cpu_isa(name)
        try:
            return C.route_rows(mu, Ii, idx)
        finally:
            C.set_cpu_isa("auto")
    _pair(res, f"route_21000_rows_generic_vs_{isa}", lambda: routed("generic"), lambda: routed("auto"), R,
          np.array_equal)

    def blas():
        out = np.empty(idx.size, np.float32)
        for b0 in range(0, idx.size, 2048):
            out[b0:b0 + 2048] = Ev[idx[b0:b0 + 2048]] @ q
        return out
    _pair(res, "cosine_21000_rows_blas_vs_dot_rows", blas, lambda: C.dot_rows(Ev, q[None], idx)[0], R,
          lambda a, b: np.allclose(a, b, rtol=1e-5, atol=1e-6))

    from bench_scale import _questions
    from contextrag.index.core import bm25_tokenize, index_stemmer
    ix = v.source()
    toks = bm25_tokenize([x.text for x in _questions(None)[:20]], index_stemmer(ix.config))
    real = _backend.cpu_native

    def scores(native_on: bool):
        _backend.cpu_native = real if native_on else (lambda name: None)
        try:
            return [ix.bm25.get_scores(t) for t in toks]
        finally:
            _backend.cpu_native = real
    _pair(res, "bm25_20_questions_numpy_vs_native", lambda: scores(False), lambda: scores(True), max(R // 4, 3),
          lambda a, b: all(np.array_equal(x, y) for x, y in zip(a, b)))

    ivf = inverted_file(v)

    def probe(partition: bool):
        if not partition:
            ivf._best_cells = lambda s, w: None
        try:
            return ivf.probe(q / np.linalg.norm(q), 10_010)
        finally:
            ivf.__dict__.pop("_best_cells", None)
    _pair(res, "ivf_probe_10010_sort_vs_partition", lambda: probe(False), lambda: probe(True), R, np.array_equal)


if __name__ == "__main__":
    sys.exit(main())
