#!/usr/bin/env python
"""A real-text index of 100k to 1M chunks end to end: build, load, query, update. JSON in bench/results/.

    python bench/bench_scale.py build --chunks 1000000 --index DIR      # corpus + build (static embedder)
                                    [--no-hotpotqa-pool] [--titles pool|own|none]   # the corpus's ablations
    python bench/bench_scale.py query --index DIR --chunks 1000000      # fresh process: load, 500 queries, recall
                                    [--set w_spread=0 ...]              # a query field changed for every question
    python bench/bench_scale.py query-compare --index DIR --chunks 1000000   # exhaustive vs candidates, same run
    python bench/bench_scale.py update --index DIR --chunks 1000000     # fresh process: add / delete 100 documents
                                                   [--step add|delete]   # one of them per process
                                                   [--via served]        # as the HTTP server applies them
    python bench/bench_scale.py load --index DIR --chunks 1000000       # load + prepare, then the first queries
                                    [--lazy-first-query]                # model and inverted file left to them
    python bench/bench_scale.py migrate --index DIR --chunks 1000000    # an index of an earlier format: load, save
    python bench/bench_scale.py baseline                                # HotpotQA-500 alone (the 5k index): recall
                                    [--weights-n 1000000]               # its lexical weights as at a million chunks
                                    [--weights-which linking|added]     # of its linking attributes, or the others
    python bench/bench_scale.py build|query ... --weights-n 5522 --weights-exact   # a big index weighted as 5,522
    python bench/bench_scale.py compare --a 0:KEY --b 1000000:KEY --key NAME   # two query records, per question
    python bench/bench_scale.py facts --index DIR --chunks N --attr term:bovin   # df, weights, the clusters' mix
    python bench/bench_scale.py baseline --weights-from DIR [--weights-part both|df|n]   # weighted as DIR's
                                    [--weights-unit U]                  # w = log(U/df)/log(U): a fixed unit
                                    [--weights-side question|links]     # on one side of the hops only
    python bench/bench_scale.py query --index DIR --chunks N --weights-local K   # links weighted by rarity in the top K

Each part appends its figures to bench/results/scale_<n>.json (scale_1m.json at a million chunks).

The corpus is bench/scale_corpus.py: HotpotQA-500's paragraphs unchanged plus recombined real
sentences. The build is ``ContextRAG.build`` with ``Config(embedder="static")``: the default pipeline
with the static embedder, the floor; the machine profile's own pick (``auto``) is recorded beside it.
Per stage (the build's own stages, ``Index.timings``): wall seconds, the process's CPU seconds (all
threads: the lexical families are built in a thread while the embedder runs), the peak resident set
during the stage (sampled every 50 ms from /proc/self/statm) and the bytes of every index file.
The load average is sampled every 5 s during each part: the machine is shared, so wall time measures
the neighbours as much as the code, and CPU seconds are the figure to compare.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
sys.path.insert(0, str(REPO / "bench"))

from scale_corpus import recombined, scale_corpus, data_dir   # noqa: E402

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def kernel_side() -> tuple:
    """(system CPU seconds, minor page faults) of this process: the kernel's share of the CPU time
    (zeroing fresh pages, copying written files into the page cache, reclaiming memory)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_stime, r.ru_minflt


def vmstat(keys=("compact_stall", "pgsteal_direct", "thp_fault_alloc")) -> dict:
    """Machine-wide memory-pressure counters (/proc/vmstat; empty where there is none)."""
    try:
        with open("/proc/vmstat") as f:
            got = dict(line.split() for line in f)
    except OSError:
        return {}
    return {k: int(got[k]) for k in keys if k in got}


class Sampler:
    """A thread that tracks the peak RSS of every open interval and samples the load average."""

    def __init__(self, every: float = 0.05):
        self.every, self.open, self.load = every, [], []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        last = 0.0
        while not self._stop.is_set():
            r = rss()
            for rec in list(self.open):
                rec["peak_rss_bytes"] = max(rec["peak_rss_bytes"], r)
            now = time.monotonic()
            if now - last >= 5.0:
                self.load.append(os.getloadavg()[0])
                last = now
            time.sleep(self.every)

    def interval(self, name: str, out: dict):
        sampler = self

        class _Iv:
            def __enter__(self):
                self.rec = {"peak_rss_bytes": rss(), "rss_start_bytes": rss()}
                self.t, self.c, self.k, self.vm = time.perf_counter(), cpu_seconds(), kernel_side(), vmstat()
                sampler.open.append(self.rec)
                return self.rec

            def __exit__(self, *exc):
                sampler.open.remove(self.rec)
                self.rec["peak_rss_bytes"] = max(self.rec["peak_rss_bytes"], rss())
                self.rec.update(seconds=round(time.perf_counter() - self.t, 3),
                                cpu_seconds=round(cpu_seconds() - self.c, 3), rss_end_bytes=rss())
                k, vm = kernel_side(), vmstat()
                self.rec.update(system_cpu_seconds=round(k[0] - self.k[0], 3), minor_faults=k[1] - self.k[1],
                                vmstat_delta={key: vm[key] - self.vm[key] for key in vm if key in self.vm})
                prev = out.get(name)
                if prev:      # a stage entered twice (the build's "lexical"): add up
                    self.rec["seconds"] = round(self.rec["seconds"] + prev["seconds"], 3)
                    self.rec["cpu_seconds"] = round(self.rec["cpu_seconds"] + prev["cpu_seconds"], 3)
                    self.rec["system_cpu_seconds"] = round(self.rec["system_cpu_seconds"]
                                                           + prev.get("system_cpu_seconds", 0.0), 3)
                    self.rec["minor_faults"] += prev.get("minor_faults", 0)
                    self.rec["peak_rss_bytes"] = max(self.rec["peak_rss_bytes"], prev["peak_rss_bytes"])
                    self.rec["rss_start_bytes"] = prev["rss_start_bytes"]
                out[name] = self.rec
        return _Iv()

    def load_summary(self) -> dict:
        a = self.load or [os.getloadavg()[0]]
        return {"samples": len(a), "min": round(min(a), 2), "mean": round(float(np.mean(a)), 2), "max": round(max(a), 2)}

    def stop(self):
        self._stop.set()


def machine() -> dict:
    import contextrag
    from contextrag import machine as mp
    from contextrag.embed.embedder import cpu_bulk_backend
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    mem = int(next(ln.split()[1] for ln in open("/proc/meminfo") if ln.startswith("MemTotal"))) * 1024
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    vers = {}
    for m in ("numpy", "scipy", "bm25s", "model2vec", "safetensors", "tokenizers", "torch"):
        try:
            vers[m] = __import__(m).__version__
        except Exception:
            vers[m] = None
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu_model": cpu,
            "cores": os.cpu_count(), "mem_bytes": mem, "contextrag": contextrag.__version__, "git_commit": commit,
            "profile": mp.profile().to_dict(), "auto_build_embedder": cpu_bulk_backend(), "versions": vers,
            "direct_io": os.environ.get("CONTEXTRAG_DIRECT_IO") or "auto",     # how snapshots are written
            "transparent_hugepage": huge_pages(),
            "shared_machine": "2 cores shared with five other jobs (builds, test runs) during these runs: "
                              "wall times include their load; CPU seconds do not"}


def huge_pages() -> dict:
    """The kernel's transparent huge page modes, NumPy's advice setting from the environment, and
    whether an index write turns the advice off here (contextrag.index.hugepages)."""
    from contextrag.index.hugepages import kernel_modes, wanted
    return {**kernel_modes(), "NUMPY_MADVISE_HUGEPAGE": os.environ.get("NUMPY_MADVISE_HUGEPAGE"),
            "index_writes_without_advice": wanted()}


def result_path(n: int) -> Path:
    if n == 0:
        return RESULTS / "scale_5k.json"        # HotpotQA-500's corpus alone (5,522 chunks)
    return RESULTS / ("scale_1m.json" if n >= 1_000_000 else f"scale_{n // 1000}k.json")


def update_json(n: int, key: str, value) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    p = result_path(n)
    out = json.loads(p.read_text()) if p.exists() else {"benchmark": "scale_end_to_end", "target_chunks": n}
    out[key] = value
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=2, default=str))
    os.replace(tmp, p)
    print(f"wrote {p} [{key}]", flush=True)
    return p


def _hook_stages(sampler: Sampler, stages: dict) -> None:
    """Route the build's stage timer (index.progress.Stages) through the sampler as well."""
    from contextlib import contextmanager

    from contextrag.index import progress
    orig = progress.Stages.__call__

    @contextmanager
    def call(self, name, total=None, unit="step"):
        with sampler.interval(name, stages), orig(self, name, total, unit) as tick:
            yield tick
    progress.Stages.__call__ = call


def disk_bytes(path: Path) -> dict:
    files = {p.relative_to(path).as_posix(): p.stat().st_size for p in path.rglob("*") if p.is_file()}
    snap = {}
    for k, v in files.items():
        parts = k.split("/")
        snap["/".join(parts[1:]) if parts[0].startswith("snap-") else k] = v
    return {"total": sum(files.values()), "files": snap}


# ---- parts ---------------------------------------------------------------------------------------

def build(args) -> None:
    from contextrag import Config, ContextRAG
    sampler = Sampler()
    stages: dict = {}
    la0 = os.getloadavg()
    with sampler.interval("corpus", stages):
        docs, info = scale_corpus(args.chunks, seed=args.seed, chunks_per_doc=args.chunks_per_doc,
                                  hotpotqa_distractors=not args.no_hotpotqa_pool, titles=args.titles)
        info.pop("qa")
    cfg = Config(embedder=args.embedder)
    _hook_stages(sampler, stages)
    t, c = time.perf_counter(), cpu_seconds()
    rag = ContextRAG.build(docs, path=args.index, config=cfg, progress=False)
    wall, cpu = time.perf_counter() - t, cpu_seconds() - c
    ix = rag.index
    out = {"machine": machine(), "corpus": {**info, "documents": len(docs), "chunks": ix.n_chunks,
                                            "characters": sum(len(d["text"]) for d in docs)},
           "config": cfg.to_dict(), "embedder": ix.info.get("embedder"), "seconds": round(wall, 2),
           "cpu_seconds": round(cpu, 2), "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
           "stages": stages, "disk_bytes": disk_bytes(Path(args.index)), "weights_n": args.weights_n,
           "weights_which": args.weights_which, "weights_exact": args.weights_exact, "loadavg_start": la0,
           "loadavg_1min_during": sampler.load_summary(), "items": ix.n_items,
           "attributes": ix.context.n_attributes, "nodes": int(ix.graph.n_nodes),
           "goal": {"seconds": 1800, "peak_rss_bytes": 16 * 10**9}}
    sampler.stop()
    update_json(args.chunks, args.build_key, out)


def _questions(n: int | None = None):
    from scale_corpus import hotpotqa
    qa = hotpotqa(data_dir())
    qs = [q for q in qa.questions if q.gold_ids]
    return qs[:n] if n else qs


def onnx_spinning() -> None:
    """Let ONNX Runtime's idle intra-op threads spin between runs again, as its default does (an
    ablation: the library turns the spinning off, embed/onnx.py)."""
    import onnxruntime as ort
    base = ort.SessionOptions

    class Spinning(base):
        def add_session_config_entry(self, key, value):
            if key != "session.intra_op.allow_spinning":
                super().add_session_config_entry(key, value)
    ort.SessionOptions = Spinning


def _opened(args):
    """(sampler, stages, load average at start, the loaded and prepared index, the questions): what a
    query run starts with, the load and the preparation timed."""
    from contextrag import ContextRAG
    sampler = Sampler()
    st: dict = {}
    la0 = os.getloadavg()
    with sampler.interval("load", st):
        rag = ContextRAG.load(args.index, prepare=False)
    if getattr(args, "weights_from", None) or getattr(args, "weights_unit", None):
        args.weights_from_chunks = weights_from(rag.index, args.weights_from, args.weights_part,
                                                args.weights_unit, args.weights_side)
    if getattr(args, "weights_distinct", False):
        n_new, df_new, args.weights_distinct_facts = distinct_statistics(rag.index)
        reweight(rag.index, max(n_new, 2), df_new, "both", None, args.weights_side)
    with sampler.interval("prepare", st):
        rag.prepare()
    if getattr(args, "bm25_distinct", False):
        args.bm25_distinct_facts = bm25_distinct(rag.index)
    return sampler, st, la0, rag, _questions(args.questions)


def bm25_distinct(ix) -> dict:
    """BM25's idf counted over the chunks of new text, as the lexical weights are (index/distinct.py):
    N = those chunks and the virtual items, df(t) = those of them holding t (an ablation, in this
    process; the item lengths and their mean stay). Needs an index with sentence hashes."""
    from contextrag.index.distinct import distinct_rows
    rows = distinct_rows(ix)
    if rows is None:
        raise ValueError("the index holds no sentence hashes: build it with the current library")
    bm = ix.bm25
    idf, lengths = bm._stats()
    T = len(bm.names)
    term = np.repeat(np.arange(T, dtype=np.int64), np.diff(bm.c_indptr))
    d = np.bincount(term[rows[np.asarray(bm.c_rows)]], minlength=T) + np.diff(bm.v_indptr)
    N = int(rows.sum()) + (bm.n_items - bm.n_chunks)
    d = d.astype(np.float64)
    bm._stats_got = (np.log(1.0 + (N - d + 0.5) / (d + 0.5)).astype(np.float32), lengths)
    return {"n": N, "terms": T}


WEIGHTS_WHICH = ("all", "linking", "added")


def weights_local(k: int | None) -> None:
    """Query-local lexical weights in this process (an ablation, docs/SCALING.md "The weights' N"): for
    each question, every attribute held by some of its K best chunks by eq. 13 (the top K) weighs
    log(K/df_K)/log(K) in the links, df_K its chunks among them; an attribute none of them holds keeps
    w(a) = log(N/df)/log(N), and so does the question's own activation μ. Own pages keep degree 1.
    A weight that text unrelated to the question does not move, asked for in docs/SCALING.md; one
    question at a time, the incidence's entries rewritten for each (seconds at a million chunks)."""
    if not k:
        return
    import copy as copy_module

    from contextrag.query import spread
    real = spread._spread_batch
    cache: dict = {}

    def parts(st):
        got = cache.get(id(st))
        if got is None or got[0] is not st:
            G = st.G
            ind, tptr = np.asarray(G.indices), np.asarray(G.t_indptr)
            tcol = np.repeat(np.arange(G.shape[1], dtype=np.int32), np.diff(tptr))
            td = np.asarray(G.t_data)
            gw = np.zeros(G.shape[1], np.float32)    # each column's global weight: its largest entry below 1
            below = td < 1.0
            np.maximum.at(gw, tcol[below], td[below])
            gw[(np.diff(tptr) > 0) & (gw == 0)] = 1.0   # only entries of degree 1 (own pages, a term of one chunk)
            got = (st, np.asarray(G.data) >= 1.0, td >= 1.0, ind, tcol, st.column_max >= 1.0, gw)
            cache[id(st)] = got
        return got

    def local(st, base):
        _, one, t_one, ind, tcol, col_one, gw = parts(st)
        G, nc = st.G, st.n_chunks
        kk = min(int(k), nc)
        top = np.argpartition(-np.nan_to_num(base[:nc], nan=-np.inf, neginf=-1e30), kk - 1)[:kk]
        ptr = np.asarray(G.indptr)
        cols = np.concatenate([ind[ptr[r]:ptr[r + 1]] for r in top.tolist()]) if kk else np.zeros(0, np.int64)
        df = np.bincount(cols, minlength=G.shape[1])
        w = gw.copy()
        held = df > 0
        w[held] = (np.log(kk / df[held]) / np.log(kk)).astype(np.float32)
        G2 = copy_module.copy(G)
        G2.data = np.where(one, np.float32(1), w[ind]).astype(G.dtype)
        G2.t_data = np.where(t_one, np.float32(1), w[tcol]).astype(G.dtype)
        G2._dev = {}
        st2 = copy_module.copy(st)
        st2.G = G2
        st2._colmax = np.where(col_one, np.float32(1), w).astype(np.float32)
        return st2

    def batch(st, questions, bases, cfg, mask):
        out = []
        for q, b in zip(questions, bases):
            out += real(local(st, b), [q], [b], cfg, mask)
        return out
    spread._spread_batch = batch


def weights_as_if(n: int | None, which: str = "all", exact: bool = False) -> None:
    """The lexical attributes' weights w(a) = log(N/df)/log(N) computed with N = max(n, the chunks)
    in this process, at build and load alike (an ablation: the weights an index of n chunks gives
    the same df, without the chunks; docs/SCALING.md). ``which``: "all" of them; "linking" only the
    attributes that link at the index's own N (w > 1/2: their links grow stronger, no link is added);
    "added" only the others (the links N adds, at their strength there). ``exact``: N = n also for a
    bigger index (a fixed unit in place of log N; w clipped at 0 for df > n)."""
    if not n:
        return
    if which not in WEIGHTS_WHICH:
        raise ValueError(f"which must be one of {WEIGHTS_WHICH}, got {which!r}")
    from contextrag.index.lexical import families, incremental
    real = families.idf_weight

    def idf_weight(df, n_docs):
        big = real(df, int(n) if exact else max(int(n_docs), int(n)))
        if which == "all":
            return big
        own = real(df, n_docs)
        return np.where((own > 0.5) == (which == "linking"), big, own)
    families.idf_weight = incremental.idf_weight = idf_weight


WEIGHTS_PARTS = ("both", "df", "n")
WEIGHTS_SIDES = ("all", "question", "links")


def distinct_statistics(ix) -> tuple[int, dict, dict]:
    """(chunks, {family: {attribute: df}}, facts) of ``ix`` counted over its chunks of new text only: a
    chunk every sentence of which an earlier chunk already holds adds nothing to N or to any df, as the
    library's builds count them (index/distinct.py, its own sentence hashes). What ``reweight`` takes
    for ``--weights-distinct``: those statistics for an index built before they were counted so."""
    from contextrag.index.distinct import ChunkSentences
    cs = ChunkSentences.of_texts(ix.chunk_texts)
    rows = np.flatnonzero(cs.new_text())
    out = {}
    for name, f in ix.lexical.families.items():
        I = f.incidence.tocsr()[:ix.n_chunks]
        df = np.bincount(I[rows].indices, minlength=I.shape[1])
        out[name] = dict(zip(f.attributes, df.tolist()))
    return int(rows.size), out, {"chunks_with_new_text": int(rows.size),
                                 "distinct_sentences": int(np.unique(cs.hashes).size)}


def other_statistics(path) -> tuple[int, dict]:
    """(chunks, {family: {attribute: df}}) of the index at ``path``: what ``reweight`` takes from it."""
    from contextrag import ContextRAG
    ix = ContextRAG.load(path, prepare=False).index
    fams = ix.lexical.families
    return ix.n_chunks, {name: dict(zip(f.attributes, np.asarray(f.df).tolist())) for name, f in fams.items()}


def reweight(ix, n_other: int, df_other: dict, part: str = "both", unit: int | None = None,
             side: str = "all") -> None:
    """Give the loaded index ``ix`` the lexical weights w(a) = log(N/df)/log(N) of another index, before
    its first query (an ablation, docs/SCALING.md): ``part`` "both" takes that index's df (of every
    attribute it holds; the others keep their own) and its N; "df" the df with ``ix``'s own N; "n" its
    N with ``ix``'s own df. ``unit``: w(a) = log(unit/df)/log(unit) (clipped at 0) in place of either
    N, a fixed unit. The incidence follows: every degree is the new w(a), but a title's own page keeps
    degree 1. ``side``: "all" of it, "question" only the weights the question reads (its activation μ
    and the residual coverage's), or "links" only the incidence (the chunks' degrees the hops pass
    through). Nothing else of the index changes."""
    if part not in WEIGHTS_PARTS:
        raise ValueError(f"part must be one of {WEIGHTS_PARTS}, got {part!r}")
    if side not in WEIGHTS_SIDES:
        raise ValueError(f"side must be one of {WEIGHTS_SIDES}, got {side!r}")
    if unit is not None and unit < 2:
        raise ValueError(f"unit must be at least 2 chunks, got {unit!r}")
    if getattr(ix, "lexical", None) is None:
        raise ValueError("the index holds no lexical families to reweight")
    from contextrag.index.lexical.families import idf_weight
    n = unit or (n_other if part in ("both", "n") else ix.n_chunks)
    for name, f in ix.lexical.families.items():
        theirs = df_other.get(name, {})
        df = np.asarray(f.df, np.float64)
        if part in ("both", "df"):
            df = np.array([theirs.get(a, d) for a, d in zip(f.attributes, df)], np.float64)
        w = idf_weight(df, n).astype(np.float32)
        if side in ("all", "links"):
            inc = f.incidence.tocsr().astype(np.float32, copy=True)
            if name == "title":      # degree 1: the chunks of the titled document itself
                inc.data = np.where(inc.data == 1.0, np.float32(1.0), w[inc.indices])
            else:
                inc.data = w[inc.indices]
            f.incidence = inc
        if side in ("all", "question"):
            f.weight = w
    ix._spread_prepared = None       # the stored spreading incidence was prepared from the old weights


def weights_from(ix, path, part: str, unit: int | None = None, side: str = "all") -> int:
    """``reweight`` ``ix`` as the index at ``path`` (None: its own statistics, for a ``unit`` alone);
    returns that index's chunk count (for the record)."""
    n_other, df_other = other_statistics(path) if path else (ix.n_chunks, {})
    reweight(ix, n_other, df_other, part, unit, side)
    return n_other


def _others_top5(ranked: list, gold) -> dict:
    """Where the top 5's non-gold documents come from: the questions' own corpus or recombined text."""
    gold = set(gold)
    others = [d for d in ranked[:5] if d not in gold]
    rc = sum(1 for d in others if str(d).startswith("rc:"))
    return {"hotpotqa": len(others) - rc, "recombined": rc}


def query(args) -> None:
    from contextrag.eval.metrics import recall_at_k
    sampler, st, la0, rag, qs = _opened(args)
    with sampler.interval("first_query", st):
        rag.retrieve(qs[0].text, k=10, **args.set)   # the embedder's first use (model load) is counted here
    lat, rec, others = [], {2: [], 5: [], 10: []}, {"hotpotqa": 0, "recombined": 0}
    found: list = []
    golds: list = []
    with sampler.interval("queries", st):
        for q in qs:
            t = time.perf_counter()
            hits = rag.retrieve(q.text, k=10, **args.set)
            lat.append(time.perf_counter() - t)
            ranked = list(dict.fromkeys(h.doc_id for h in hits if h.kind == "chunk"))
            gold = set(map(str, q.gold_ids))
            got = {k: recall_at_k(ranked, gold, k) for k in rec}
            for k in rec:
                rec[k].append(got[k])
            for src, m in _others_top5(ranked, gold).items():
                others[src] += m
            found.append({k: round(got[k] * len(gold)) for k in rec})
            golds.append(len(gold))
    lat_ms = np.asarray(lat) * 1e3
    out = {"machine": machine(), "stages": st, "chunks": rag.index.n_chunks, "questions": len(qs),
           "w_spread": rag.index.config.w_spread, "spread_families": rag.index.config.spread_families,
           "overrides": args.set, "latency_ms": {"p50": round(float(np.percentile(lat_ms, 50)), 2),
                          "p90": round(float(np.percentile(lat_ms, 90)), 2),
                          "p99": round(float(np.percentile(lat_ms, 99)), 2),
                          "max": round(float(lat_ms.max()), 2), "mean": round(float(lat_ms.mean()), 2)},
           "recall_at": {str(k): round(float(np.mean(v)), 4) for k, v in rec.items()},
           "top5_non_gold_documents": others,
           "per_question": per_question(found, golds),
           "onnx_spinning": bool(getattr(args, "onnx_spinning", False)),
           "weights_n": args.weights_n, "weights_which": args.weights_which, "weights_local": args.weights_local,
           "weights_distinct": getattr(args, "weights_distinct_facts", None),
           "bm25_distinct": getattr(args, "bm25_distinct_facts", None),
           "weights_exact": args.weights_exact,
           "weights_from": ({"chunks": args.weights_from_chunks, "part": args.weights_part,
                             "unit": args.weights_unit, "side": args.weights_side}
                            if getattr(args, "weights_from", None) or getattr(args, "weights_unit", None)
                            else None),
           "loadavg_start": la0, "loadavg_1min_during": sampler.load_summary(),
           "goal": {"load_seconds": 10, "p50_ms": 50, "p99_ms": 200}}
    sampler.stop()
    update_json(args.chunks, args.key or "query", out)


def per_question(found: list, golds: list) -> dict:
    """Each question's gold documents and those found in the first k, one digit per question in
    question order (HotpotQA-500: 2 gold each), so two runs can be compared question by question."""
    if any(g > 9 for g in golds) or any(v > 9 for f in found for v in f.values()):
        raise ValueError("per_question holds one digit per question: at most 9 gold documents")
    ks = sorted({k for f in found for k in f})
    return {"gold": "".join(map(str, golds)),
            "found_at": {str(k): "".join(str(f[k]) for f in found) for k in ks}}


def paired_gap(a: dict, b: dict, resamples: int = 10_000, seed: int = 0) -> dict:
    """Recall@k of run ``a`` minus run ``b`` over the same questions (``per_question`` records), in
    points, with a 95 % bootstrap interval over the questions (resampled in pairs) and the questions
    each run does better on."""
    if a["gold"] != b["gold"]:
        raise ValueError("the two runs did not ask the same questions (their gold counts differ)")
    gold = np.array([int(c) for c in a["gold"]], np.float64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, gold.size, size=(resamples, gold.size))
    out = {}
    for k in sorted(set(a["found_at"]) & set(b["found_at"]), key=int):
        ra = np.array([int(c) for c in a["found_at"][k]]) / gold
        rb = np.array([int(c) for c in b["found_at"][k]]) / gold
        d = ra - rb
        boot = d[picks].mean(axis=1)
        lo, hi = np.quantile(boot, [0.025, 0.975])
        out[k] = {"gap_points": round(100 * float(d.mean()), 2),
                  "ci95_points": [round(100 * float(lo), 2), round(100 * float(hi), 2)],
                  "questions_a_better": int((d > 0).sum()), "questions_b_better": int((d < 0).sum())}
    return out


def compare(args) -> None:
    """``--a N:KEY`` minus ``--b N:KEY`` (N: the chunks whose scale JSON holds the record, 0 for the
    5k index), question by question; written to the second one's JSON under ``--key``."""
    recs = []
    for spec in (args.a, args.b):
        n, _, key = (spec or "").partition(":")
        if not key or not n.isdigit():
            raise ValueError(f"--a and --b take CHUNKS:KEY (e.g. 0:query_amx), got {spec!r}")
        data = json.loads(result_path(int(n)).read_text())
        if key not in data or "per_question" not in data[key]:
            raise ValueError(f"{result_path(int(n)).name} holds no record {key!r} with per_question figures")
        recs.append((int(n), key, data[key]))
    out = {"a": f"{recs[0][0]}:{recs[0][1]}", "b": f"{recs[1][0]}:{recs[1][1]}",
           "recall_gap": paired_gap(recs[0][2]["per_question"], recs[1][2]["per_question"])}
    update_json(recs[1][0], args.key or "compare", out)


def attribute_facts(ix, names) -> dict:
    """{"family:attribute": {"df", "weight"} or None where the index lacks it} for the lexical
    attributes ``names`` (a term as its stem, a title normalised: "term:bovin", "title:nicolas cage")."""
    fams = ix.lexical.families
    out = {}
    for spec in names:
        fam, sep, attr = spec.partition(":")
        if not sep or fam not in fams:
            raise ValueError(f"--attr takes FAMILY:ATTRIBUTE with a family of {sorted(fams)}, got {spec!r}")
        j = fams[fam].vocab.get(attr)
        out[spec] = None if j is None else {"df": int(fams[fam].df[j]), "weight": round(float(fams[fam].weight[j]), 4)}
    return out


def cluster_facts(first_codes, doc_ids) -> dict:
    """How the first RQ level's clusters hold HotpotQA-500's chunks (the documents not recombined,
    whose ids do not start with "rc:"): the clusters, those holding any, and the questions' chunks'
    share of such a cluster's chunks (median, 10th and 90th percentile)."""
    codes = np.asarray(first_codes, np.int64)
    own = np.fromiter((not str(d).startswith("rc:") for d in doc_ids), bool, count=codes.size)
    size = np.bincount(codes)
    held = np.bincount(codes[own], minlength=size.size)
    k = held > 0
    share = held[k] / size[k]
    return {"clusters": int(np.count_nonzero(size)), "holding_hotpotqa": int(k.sum()),
            "hotpotqa_share": {q: round(float(np.quantile(share, v)), 4) if share.size else None
                               for q, v in (("p10", 0.1), ("median", 0.5), ("p90", 0.9))}}


def facts(args) -> None:
    """What an index holds that the recall analysis reads: the df and weight of ``--attr`` attributes
    and the first-level clusters' share of HotpotQA-500's chunks (docs/SCALING.md)."""
    from contextrag import ContextRAG
    ix = ContextRAG.load(args.index, prepare=False).index
    out = {"machine": machine(), "chunks": ix.n_chunks, "embedder": ix.info.get("embedder"),
           "attributes": attribute_facts(ix, args.attr),
           "first_level": cluster_facts(np.asarray(ix.codes)[:ix.n_chunks, 0], ix.chunk_doc_ids[:ix.n_chunks])}
    update_json(args.chunks, args.key or "facts", out)


def _latency(lat: list, cpu: list) -> dict:
    lat_ms = np.asarray(lat) * 1e3
    return {"p50": round(float(np.percentile(lat_ms, 50)), 2), "p90": round(float(np.percentile(lat_ms, 90)), 2),
            "p99": round(float(np.percentile(lat_ms, 99)), 2), "max": round(float(lat_ms.max()), 2),
            "mean": round(float(lat_ms.mean()), 2), "cpu_ms_mean": round(float(np.mean(cpu)) * 1e3, 2)}


def query_compare(args) -> None:
    """Exhaustive scoring against candidates (query/candidates.py) in one process: each question is
    retrieved both ways, one after the other (the order alternating), so both see the same load."""
    from contextrag.eval.metrics import recall_at_k
    from contextrag.query import candidates as cand
    sampler, st, la0, rag, qs = _opened(args)
    modes = ("exhaustive", "candidates")
    with sampler.interval("first_query", st):
        for m in modes:                          # the embedder's first use, the inverted file's build
            rag.retrieve(qs[0].text, k=10, scoring=m)
    from contextrag.query import view_of
    view = view_of(rag.index)
    res = {m: {"lat": [], "cpu": [], "rec": {2: [], 5: [], 10: []}} for m in modes}
    same, overlap, n_cand = 0, [], []
    with sampler.interval("queries", st):
        for i, q in enumerate(qs):
            got = {}
            for m in (modes if i % 2 == 0 else modes[::-1]):
                c0, t = time.process_time(), time.perf_counter()
                hits = rag.retrieve(q.text, k=10, scoring=m)
                res[m]["lat"].append(time.perf_counter() - t)
                res[m]["cpu"].append(time.process_time() - c0)
                got[m] = [h.id for h in hits]
                ranked = list(dict.fromkeys(h.doc_id for h in hits if h.kind == "chunk"))
                for k in res[m]["rec"]:
                    res[m]["rec"][k].append(recall_at_k(ranked, q.gold_ids, k))
            same += got["exhaustive"] == got["candidates"]
            overlap.append(len(set(got["exhaustive"]) & set(got["candidates"])) / max(len(got["exhaustive"]), 1))
            if i < 50:   # how many items a query scored (the candidates plus those spreading raised)
                qv = rag.index.embed_queries([q.text])
                qv = qv / np.linalg.norm(qv, axis=1, keepdims=True)
                cfg = dataclasses.replace(rag.index.config, scoring="candidates")
                n_cand.append(int(cand.score_candidates(view, q.text, qv, cfg, 10)["candidates"].size))
    out = {"machine": machine(), "stages": st, "chunks": rag.index.n_chunks, "questions": len(qs),
           "w_spread": rag.index.config.w_spread, "spread_families": rag.index.config.spread_families,
           "candidate_budget": cand.budget(view.n, 10),
           "stored_item_major_extents": getattr(rag.index, "_extents_items", None) is not None,
           "items_scored_mean": round(float(np.mean(n_cand)), 1) if n_cand else None,
           "identical_top10": same, "top10_overlap_mean": round(float(np.mean(overlap)), 4),
           "loadavg_start": la0, "loadavg_1min_during": sampler.load_summary(),
           "goal": {"p50_ms": 50, "p99_ms": 200}}
    for m in modes:
        out[m] = {"latency_ms": _latency(res[m]["lat"], res[m]["cpu"]),
                  "recall_at": {str(k): round(float(np.mean(v)), 4) for k, v in res[m]["rec"].items()}}
    sampler.stop()
    update_json(args.chunks, args.key or "query_candidates", out)


def migrate(args) -> None:
    """Load an index written in an earlier format and save it in the current one (what a user does
    once: ``ContextRAG.load(path).save()``); the timings of both, then the load of the result."""
    from contextrag import ContextRAG
    from contextrag.index import store
    sampler = Sampler()
    st: dict = {}
    la0 = os.getloadavg()
    before = store.read_manifest(store.snapshot_dir(args.index))["format_version"]
    with sampler.interval("load_previous_format", st):
        rag = ContextRAG.load(args.index, prepare=False)
    with sampler.interval("save_current_format", st):
        rag.save()
    out = {"machine": machine(), "stages": st, "format_version_before": before,
           "format_version_after": store.FORMAT_VERSION, "chunks": rag.index.n_chunks,
           "disk_bytes": disk_bytes(Path(args.index)), "loadavg_start": la0,
           "loadavg_1min_during": sampler.load_summary()}
    sampler.stop()
    update_json(args.chunks, "migrate", out)


def lazy_first_query() -> None:
    """prepare() as it was before it readied the embedder's model and the candidates' inverted file:
    the view and the spreading state only, the rest left to the first query (an ablation, in this
    process only)."""
    import contextrag.rag as rag_module
    from contextrag.embed.embedder import Embedder
    rag_module._prepare_queries = rag_module._prepare_view
    Embedder.load_if_cached = lambda self: self._model is not None


def load(args) -> None:
    """Load the index and prepare its query stage ``--repeats`` times in this process (the first run
    pays the imports): wall and CPU seconds of each, the first two queries' wall seconds after it,
    the RSS after, the file checksum the snapshot carries (the load verifies every byte of it).
    ``--lazy-first-query``: prepare() leaves the embedder's model and the candidates' inverted file
    to the first query (an ablation)."""
    import gc
    if args.lazy_first_query:
        lazy_first_query()

    from contextrag import ContextRAG
    from contextrag.index import store
    m = store.read_manifest(store.snapshot_dir(args.index))
    runs = []
    for _ in range(args.repeats):
        la = os.getloadavg()[0]
        t, c = time.perf_counter(), cpu_seconds()
        rag = ContextRAG.load(args.index, prepare=False)
        t1, c1 = time.perf_counter(), cpu_seconds()
        rag.prepare()
        t2, c2 = time.perf_counter(), cpu_seconds()
        first = []
        for q in ("Which magazine was started first?", "Who directed the film?"):
            tq = time.perf_counter()
            rag.retrieve(q, k=10)
            first.append(round(time.perf_counter() - tq, 3))
        runs.append({"load_wall_s": round(t1 - t, 2), "load_cpu_s": round(c1 - c, 2),
                     "prepare_wall_s": round(t2 - t1, 2), "prepare_cpu_s": round(c2 - c1, 2),
                     "first_query_s": first[0], "second_query_s": first[1],
                     "rss_gb": round(rss() / 1e9, 2), "loadavg_1min": la})
        del rag
        gc.collect()
    sums = sorted({k for v in m["files"].values() for k in v if k != "bytes"})
    out = {"machine": machine(), "format_version": m["format_version"], "file_checksums": sums,
           "snapshot_bytes": sum(int(v["bytes"]) for v in m["files"].values()), "chunks": m["counts"]["chunks"],
           "runs": runs, "best_load_wall_s": min(r["load_wall_s"] for r in runs),
           "lazy_first_query": bool(args.lazy_first_query),
           "goal": {"load_seconds": 10}}
    update_json(args.chunks, args.key or "load", out)


def whole_copy_holder():
    """The server's writer with a whole deep copy of the served index before each batch, the
    served object rebuilt around it (an ablation: what the writer once did, in this process only)."""
    import copy

    from contextrag.server.state import IndexHolder

    class WholeCopyHolder(IndexHolder):
        def _copy(self):
            old = self._rag
            ix = old.index
            memo = {id(x): x for x in (getattr(ix, "embedder", None), getattr(ix, "ledger", None)) if x is not None}
            return type(old)(copy.deepcopy(ix, memo), old.path, old.llm)
    return WholeCopyHolder


def update(args) -> None:
    """Add 100 documents (new recombined text, another seed) to the index on disk, then delete them
    (``--step both``, one process), or only add them or only delete them (``--step add`` /
    ``delete``: one fresh process each, as two ``contextrag`` commands would run). ``--via served``:
    through the server's writer (``server.state.IndexHolder``: what POST /documents and DELETE
    /documents do, without the HTTP), after one query, as a served index has answered some."""
    from contextrag import ContextRAG
    if args.release_inline:                 # the ablation: the replaced index freed by the writing thread
        from contextrag import rag as rag_module
        rag_module.release_later = lambda retired: retired.clear()
        from contextrag.server import state as state_module
        state_module.release_later = rag_module.release_later
    if args.weights_every_chunk:            # the ablation: the weights not recounted over the distinct text
        from contextrag.index import distinct as distinct_module
        distinct_module.distinct_rows = lambda ix: None
    sampler = Sampler()
    st: dict = {}
    with sampler.interval("load", st):      # as `contextrag add` and `delete` load: nothing prepared
        rag = ContextRAG.load(args.index, prepare=args.prepared_load or args.via == "served")
    writer, served = rag, args.via == "served"
    if served:
        from contextrag.server.state import IndexHolder
        WholeCopyHolder = whole_copy_holder()
        rag.retrieve("Which magazine was started first?", k=5)
        writer = WholeCopyHolder(rag) if args.served_copy == "whole" else IndexHolder(rag)
    existing = set(rag.index.docs)
    new, _ = recombined(args.docs, seed=10_000 + args.seed, d=data_dir())   # texts drawn anew: not in the index
    new = [{**d, "id": f"upd:{i}"} for i, d in enumerate(new)]
    there = sum(d["id"] in existing for d in new)
    if args.step != "delete" and there:
        raise SystemExit("the index already holds the update's document ids (upd:*): use a fresh index")
    if args.step == "delete" and there != len(new):
        raise SystemExit("the index lacks the update's documents: run --step add first")
    from contextrag.index import store
    la0 = os.getloadavg()
    r = rd = None
    add_save = add_steps = first_query = None
    if args.step != "delete":
        with sampler.interval("add", st):
            r = writer.add(new)
        rag = writer.rag if served else rag
        if served:                      # what the first query after a served write waits for
            t = time.perf_counter()
            rag.retrieve("Which magazine was started first?", k=5)
            first_query = round(time.perf_counter() - t, 3)
        add_save, add_steps = rag.index.timings.get("save"), dict(store.LAST_SAVE)
    if args.step != "add":
        with sampler.interval("delete", st):
            rd = writer.delete([d["id"] for d in new])
        rag = writer.rag if served else rag
    out = {"machine": machine(), "step": args.step, "via": args.via, "documents": len(new),
           "prepared_load": bool(args.prepared_load or served), "release_inline": bool(args.release_inline),
           "weights_every_chunk": bool(args.weights_every_chunk),
           "served_copy": args.served_copy if served else None,
           "first_query_after_add_s": first_query,
           "chunks_added": (r or {}).get("chunks"),
           "add_timings": {k: round(v, 3) for k, v in (r or {}).get("timings", {}).items()},
           "delete_timings": {k: round(v, 3) for k, v in (rd or {}).get("timings", {}).items()},
           "save_seconds": {"add": add_save, "delete": rag.index.timings.get("save") if rd else None},
           "save_steps": {"add": add_steps, "delete": dict(store.LAST_SAVE) if rd else None}, "stages": st,
           "chunks_after": rag.index.n_chunks, "loadavg_start": la0,
           "loadavg_1min_during": sampler.load_summary(), "goal": {"add_seconds": 10, "delete_seconds": 10}}
    sampler.stop()
    update_json(args.chunks, args.key or "update", out)


def _number_or_text(v: str):
    """A --set value as the Config field wants it: true/false, an int, a float, or the text."""
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    for kind in (int, float):
        try:
            return kind(v)
        except ValueError:
            pass
    return v


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=("build", "query", "query-compare", "load", "update", "migrate", "baseline",
                                    "compare", "facts"))
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--chunks-per-doc", type=float, default=1.0,
                   help="the recombined documents' chunks per document (measured; sizes the corpus)")
    p.add_argument("--index", help="the index directory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--embedder", default="static")
    p.add_argument("--questions", type=int, default=None)
    p.add_argument("--docs", type=int, default=100, help="update: documents to add and delete")
    p.add_argument("--step", choices=("both", "add", "delete"), default="both",
                   help="update: add then delete in one process (default), or one of them")
    p.add_argument("--via", choices=("library", "served"), default="library",
                   help="update: ContextRAG.add/delete (default), or the HTTP server's writer")
    p.add_argument("--prepared-load", action="store_true",
                   help="update: load the index with its query stage prepared, as the command line once "
                        "did before a write (an ablation; --via served always does, a server answers queries)")
    p.add_argument("--served-copy", choices=("write", "whole"), default="write",
                   help="update --via served: the writer's copy as the library makes it (default), or a "
                        "whole deep copy of the served index before each batch (an ablation)")
    p.add_argument("--release-inline", action="store_true",
                   help="update: free the index a write replaces on the writing thread, as the library did "
                        "(an ablation; the library frees it on a thread of its own)")
    p.add_argument("--key", help="query, load, update: the JSON key to write (default: the part's name)")
    p.add_argument("--repeats", type=int, default=3, help="load: loads in one process")
    p.add_argument("--lazy-first-query", action="store_true",
                   help="load: prepare() leaves the embedder's model and the candidates' inverted file to "
                        "the first query (an ablation)")
    p.add_argument("--build-key", default="build", help="build: the JSON key to write (default 'build')")
    p.add_argument("--no-hotpotqa-pool", action="store_true",
                   help="build: recombine UltraDomain and MultiHop-RAG sentences only (an ablation)")
    p.add_argument("--titles", choices=("pool", "own", "none"), default="pool",
                   help="build: the recombined documents' titles: names of the pool, four documents each "
                        "(default), a name from the document's own text, or none (scale_corpus.py)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="query: a Config query field for every question (retrieve's overrides), e.g. "
                        "w_spread=0 or scoring=exhaustive (repeatable: one score alone is the others at 0)")
    p.add_argument("--weights-n", type=int, default=None, metavar="N",
                   help="build, query, baseline: the lexical attributes' weights log(N/df)/log(N) with N at "
                        "least this (an ablation: a small index weighted as a big one; pass it to the build "
                        "and to every query of that index)")
    p.add_argument("--weights-which", choices=WEIGHTS_WHICH, default="all",
                   help="with --weights-n: which weights take N's value: all (default), those of the "
                        "attributes that link at the index's own size (w > 1/2), or the others")
    p.add_argument("--weights-exact", action="store_true",
                   help="with --weights-n: N itself also for a bigger index (a fixed unit in place of log N)")
    p.add_argument("--weights-from", metavar="DIR", default=None,
                   help="query, baseline: before the first query, take the lexical weights of the index at DIR "
                        "(its df of every attribute it holds, and its N; an ablation: this index weighted "
                        "as that one, nothing else changed)")
    p.add_argument("--weights-part", choices=WEIGHTS_PARTS, default="both",
                   help="with --weights-from: take its df and N (default), its df only, or its N only")
    p.add_argument("--weights-side", choices=WEIGHTS_SIDES, default="all",
                   help="with --weights-from or --weights-unit: the new weights everywhere (default), on the "
                        "question's side only (its activation and residual coverage), or in the links only")
    p.add_argument("--weights-unit", type=int, default=None, metavar="U",
                   help="query, baseline: before the first query, w(a) = log(U/df)/log(U) (a fixed unit in "
                        "place of log N), with this index's df or, with --weights-from, that index's")
    p.add_argument("--weights-distinct", action="store_true",
                   help="query, baseline: before the first query, the lexical weights of the corpus's distinct "
                        "text: N and every df counted over the chunks that hold a sentence no earlier chunk "
                        "holds, as the library's builds count them (for an index built before)")
    p.add_argument("--weights-every-chunk", action="store_true",
                   help="update: the lexical weights left over every chunk, not recounted over the distinct "
                        "text (an ablation: what counting them costs an update)")
    p.add_argument("--bm25-distinct", action="store_true",
                   help="query, baseline: BM25's idf over the chunks of new text too (an ablation)")
    p.add_argument("--weights-local", type=int, default=None, metavar="K",
                   help="query: query-local weights in the links, each attribute's rarity among the question's "
                        "K best chunks (an ablation)")
    p.add_argument("--onnx-spinning", action="store_true",
                   help="query: ONNX Runtime's idle threads spin between runs, its own default (an ablation)")
    p.add_argument("--attr", action="append", default=[], metavar="FAMILY:ATTRIBUTE",
                   help="facts: a lexical attribute whose df and weight to record (repeatable)")
    p.add_argument("--a", metavar="CHUNKS:KEY", help="compare: the first query record (0: the 5k index's JSON)")
    p.add_argument("--b", metavar="CHUNKS:KEY", help="compare: the second; the gap is a minus b")
    args = p.parse_args(argv)
    if any("=" not in x for x in args.set):
        p.error("--set takes FIELD=VALUE, e.g. --set w_spread=0")
    args.set = {k: _number_or_text(v) for k, v in (x.split("=", 1) for x in args.set)}
    weights_as_if(args.weights_n, args.weights_which, args.weights_exact)
    weights_local(args.weights_local)
    if args.onnx_spinning:
        onnx_spinning()
    if args.part == "baseline":          # the 5k index: HotpotQA-500's corpus alone, same embedder
        import tempfile
        args.index = args.index or tempfile.mkdtemp(prefix="ctxrag-scale-5k-")
        args.chunks = 0
        build(args)
        query(args)
        return 0
    if args.part == "compare":
        compare(args)
        return 0
    if not args.index:
        p.error("--index is required")
    {"build": build, "query": query, "query-compare": query_compare, "load": load, "update": update,
     "migrate": migrate, "facts": facts}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
