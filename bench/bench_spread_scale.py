"""Scale of the lexical spreading context, and the first query after loading an index.

1. ``lexical``: the title and term families over an N-chunk recombined corpus (bench/spread_corpus.py),
   built by map/reduce with ``--workers`` map threads (``--map thread``: the native map, the default
   build) or spawned map processes (``--map process``: the native map; ``--map python``: the Python
   map): wall seconds, CPU seconds of the driver and of the workers (on a shared machine the CPU
   seconds are the work, the wall time includes waiting for other tenants), peak resident memory of
   the driver (the corpus texts are part of it) and of each worker process; their sum bounds the
   build's memory. Results go to the part ``lexical`` (``--map thread``) or ``lexical_<map>``.
2. ``--index DIR``: load a saved index (e.g. the HotpotQA-500 index the eval harness cached) with
   ``ContextRAG.load``, which prepares the query stage and starts the embedder's load in the
   background; finish the embedder's load with one warm-up question, then time the first retrieval
   and the following ones. Nothing is rebuilt: the stored families are used.

Writes bench/results/spread_scale.json (merging the parts run).

    CONTEXTRAG_DATA=path/to/shared/data python bench/bench_spread_scale.py --chunks 1000000
    python bench/bench_spread_scale.py --index ~/.cache/contextrag/eval-indexes/<hotpot index>
"""
from __future__ import annotations

import argparse
import json

import numpy as np
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# bench_cpu_common (torch) is imported in main() only: the spawned map workers import this module.


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


class ChildPeaks:
    """Samples the peak resident memory (VmHWM) of this process's children every 0.2 s. (The
    children's ru_maxrss is no use here: a spawned worker's is the parent's size at the fork before
    its exec, shared pages it never touches after.)"""

    def __init__(self):
        import os
        import threading
        self.pid, self.peaks, self._stop = os.getpid(), {}, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        import os
        while not self._stop.is_set():
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    st = open(f"/proc/{d}/status").read()
                except OSError:
                    continue
                f = dict(line.split(":", 1) for line in st.splitlines() if ":" in line)
                if int(f.get("PPid", "0").strip() or 0) == self.pid and "VmHWM" in f:
                    kb = int(f["VmHWM"].split()[0])
                    self.peaks[d] = max(self.peaks.get(d, 0), kb)
            self._stop.wait(0.2)

    def stop(self) -> list:
        self._stop.set()
        self._t.join()
        return sorted((kb / 1024 ** 2 for kb in self.peaks.values()), reverse=True)


def lexical_scale(n: int, workers: int, how: str = "thread") -> dict:
    """The title and term families by map/reduce (``lexical_families``): the map in ``workers``
    threads of this process (``how="thread"``) or spawned processes (spawned, not forked, so a
    worker's memory is its own and not the corpus's shared pages; ``"process"``: the native map,
    ``"python"``: the Python map), the reduce here. Wall and CPU seconds of this process and of the
    workers."""
    from spread_corpus import make_corpus

    from contextrag.index.lexical import families as lexical
    t0 = time.perf_counter()
    titles, texts = make_corpus(n)
    out = {"chunks": n, "corpus_s": time.perf_counter() - t0,
           "corpus_chars": int(sum(len(x) for x in texts)), "peak_rss_gb_after_corpus": peak_rss_gb(),
           "workers": workers, "map": how, "block": lexical.BLOCK if how == "python" else lexical.NATIVE_BLOCK}
    t, c = time.perf_counter(), time.process_time()
    ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    peaks = ChildPeaks() if how != "thread" else None    # threads: no child processes to sample
    ctx = lexical.lexical_families(titles, texts, ["title", "term"], workers=workers,
                                   mp_context=None if how == "thread" else "spawn", native=how != "python")
    child_gb = peaks.stop() if peaks is not None else []
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["lexical_s"] = time.perf_counter() - t
    out["lexical_cpu_s_driver"] = time.process_time() - c
    out["lexical_cpu_s_workers"] = (ch1.ru_utime + ch1.ru_stime) - (ch0.ru_utime + ch0.ru_stime)
    out["lexical_cpu_s"] = out["lexical_cpu_s_driver"] + out["lexical_cpu_s_workers"]
    for name, f in ctx.families.items():
        out[f"{name}_attributes"] = len(f.vocab)
        out[f"{name}_nnz"] = int(f.incidence.nnz)
        out[f"{name}_linking_attributes"] = int((f.df >= 2).sum())
    out["peak_rss_gb_driver"] = peak_rss_gb()
    out["peak_rss_gb_workers"] = child_gb[:workers]
    out["peak_rss_gb_bound"] = out["peak_rss_gb_driver"] + sum(child_gb[:workers])
    arrs = lexical.lexical_arrays(ctx)
    out["stored_bytes"] = int(sum(a.nbytes for a in arrs.values()))
    t = time.perf_counter()
    from contextrag.query.spread import LexicalState
    LexicalState(ctx, {"title": 1.0, "term": 1.0}, n, n, titles)
    out["prepare_for_spreading_s"] = time.perf_counter() - t
    out["peak_rss_gb_end"] = peak_rss_gb()
    return out


def prepare_hotpot() -> dict:
    """What a first query adds over the next ones on the HotpotQA-500 paragraphs (no index needed):
    preparing the loaded families for spreading (the weighted union, its transpose, document codes),
    then one μ + hop. Wall and CPU seconds, best of 3."""
    from bench_spread import hotpot
    from spread_corpus import data_dir

    from contextrag import ops
    from contextrag.index.lexical.families import lexical_families
    from contextrag.query.spread import LexicalState
    titles, texts, questions = hotpot(data_dir())
    ctx = lexical_families(titles, texts, ["title", "term"])
    n = len(texts)
    best = {}
    for _ in range(3):
        t, c = time.perf_counter(), time.process_time()
        st = LexicalState(ctx, {"title": 1.0, "term": 1.0}, n, n, titles)
        prep = (time.perf_counter() - t, time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        ops.spread_hop(st.G, np.array([[0, 1, 2, 3, 4]]), np.array([[1, .8, .6, .4, .2]], np.float32),
                       st.mu_rows(questions[:1]))
        hop = (time.perf_counter() - t, time.process_time() - c)
        if not best or prep[1] < best["prepare_cpu_ms"] / 1e3:
            best = {"chunks": n, "prepare_ms": prep[0] * 1e3, "prepare_cpu_ms": prep[1] * 1e3,
                    "one_query_hop_ms": hop[0] * 1e3, "one_query_hop_cpu_ms": hop[1] * 1e3}
    return best


def first_query(index_dir: str) -> dict:
    from contextrag import ContextRAG
    t0 = time.perf_counter()
    rag = ContextRAG.load(index_dir)
    t_load = time.perf_counter() - t0
    # load starts the ONNX model's load in the background (Embedder.preload): the warm-up below
    # waits for whatever of it is left
    preloaded = bool(getattr(rag.index.embedder, "loaded", False))
    t = time.perf_counter()
    rag.index.embedder.embed_queries(["warm-up question for the embedder"])
    t_emb = time.perf_counter() - t
    qs = ["Which magazine was started first, Arthur's Magazine or First for Women?",
          "The director of the romantic comedy Big Stone Gap is based in what New York city?",
          "What government position was held by the woman who portrayed Corliss Archer in Kiss and Tell?",
          "Who was known by his stage name Aladin and helped organizations improve their performance?"]
    times = []
    for q in qs:
        t = time.perf_counter()
        rag.retrieve(q, k=10)
        times.append(time.perf_counter() - t)
    return {"index_chunks": rag.index.n_chunks, "load_s": t_load, "embedder_loaded_by_end_of_load": preloaded,
            "embedder": getattr(rag.index.embedder, "backend", None), "embedder_warmup_s": t_emb,
            "first_query_ms": times[0] * 1e3, "next_queries_ms": [x * 1e3 for x in times[1:]],
            "first_query_overhead_ms": (times[0] - min(times[1:])) * 1e3,
            "lexical_families_stored": list(rag.index.lexical.families)}


def loadavg() -> list:
    import os
    return [round(x, 2) for x in os.getloadavg()]


def main():
    # bench_cpu_common imports torch (0.3 GB resident): only after the lexical build, whose peak
    # memory this script reports
    RESULTS = Path(__file__).resolve().parent / "results"
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--map", choices=("thread", "process", "python"), default="thread")
    ap.add_argument("--index")
    ap.add_argument("--prepare-hotpot", action="store_true")
    args = ap.parse_args()
    path = RESULTS / "spread_scale.json"
    res = json.loads(path.read_text()) if path.exists() else {}
    if args.chunks:
        l0 = loadavg()
        part = "lexical" if args.map == "thread" else f"lexical_{args.map}"
        res[part] = {**lexical_scale(args.chunks, args.workers, args.map), "load_average_start": l0,
                     "load_average_end": loadavg()}
    from bench_cpu_common import machine
    res.update({"machine": machine(), "note": "shared 2-core machine; load average recorded per part"})
    if args.prepare_hotpot:
        l0 = loadavg()
        res["hotpot_first_query_preparation"] = {**prepare_hotpot(), "load_average_start": l0,
                                                 "load_average_end": loadavg()}
    if args.index:
        l0 = loadavg()
        res["first_query_after_load"] = {**first_query(args.index), "load_average_start": l0,
                                         "load_average_end": loadavg()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "machine"}, indent=1))


if __name__ == "__main__":
    main()
