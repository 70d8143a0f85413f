"""Spreading throughput on the CPU: ``ops.spread_hop`` (C++/OpenMP, one query or a batch) against a
per-query NumPy gather (``ops.spread``'s own path when the compiled extension is missing).

Workload: the HotpotQA-500 lexical context (title + term families over the 4,955 paragraphs) and its
500 questions; seeds are each question's 5 best paragraphs of distinct documents by BM25 with
min-max seed degrees over the top 25, μ the question's mentions: the hook's own inputs. With
``--synthetic N`` the same on an N-chunk recombined corpus (bench/spread_corpus.py), questions reused.
Every backend's output is checked equal to the gather's before timing. Writes
bench/results/cpu_spread[_<N>].json.

    CONTEXTRAG_DATA=path/to/shared/data python bench/bench_spread.py [--synthetic 1000000]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cpu_common import loadavg, machine, timed, write  # noqa: E402

from contextrag import ops  # noqa: E402
from contextrag.index.lexical.families import lexical_families  # noqa: E402
from contextrag.ops.spread import gather_py  # noqa: E402
from contextrag.query.spread import LexicalState, pick_seeds, seed_relevance  # noqa: E402


def hotpot(d: Path):
    data = json.loads((d / "hotpotqa_500.json").read_text())
    paras = {}
    for q in data:
        for t, ss in q["context"]:
            paras.setdefault(t, "".join(ss))
    return list(paras), list(paras.values()), [q["question"] for q in data]


def workload(titles, texts, questions, n_seeds=5, candidates=25, bm25_seeds=True):
    import bm25s
    t0 = time.perf_counter()
    ctx = lexical_families(titles, texts, ["title", "term"])
    t_lex = time.perf_counter() - t0
    n = len(texts)
    st = LexicalState(ctx, {"title": 1.0, "term": 1.0}, n, n, titles)
    mu = st.mu_rows(questions)
    if not bm25_seeds:
        # a synthetic corpus has no relevant chunks for these questions: seeds of distinct documents
        # drawn at random, with the degree profile of real seeds (1 for the best, falling)
        rng = np.random.default_rng(0)
        seeds = rng.integers(0, n, size=(len(questions), n_seeds))
        degs = np.tile(np.linspace(1.0, 0.5, n_seeds, dtype=np.float32), (len(questions), 1))
        return st, seeds, degs, mu, t_lex
    ret = bm25s.BM25()
    ret.index(bm25s.tokenize([f"{t}\n{x}" for t, x in zip(titles, texts)], stopwords="en", show_progress=False),
              show_progress=False)
    qt = bm25s.tokenize(questions, stopwords="en", show_progress=False, return_ids=False)
    seeds = np.full((len(questions), n_seeds), -1, np.int64)
    degs = np.zeros((len(questions), n_seeds), np.float32)
    for i, toks in enumerate(qt):
        h = ret.get_scores(toks).astype(np.float32)
        s = pick_seeds(h, n_seeds, st.doc)
        seeds[i, :s.size] = s
        degs[i, :s.size] = seed_relevance(h, candidates)[s]
    return st, seeds, degs, mu, t_lex


def gather_all(st, seeds, degs, mu):
    """The NumPy gather, one query at a time: per seed its row, then the activated columns."""
    out = np.zeros((len(seeds), st.G.n), np.float32)
    for q in range(len(seeds)):
        out[q] = gather_py(st.G, seeds[q:q + 1], degs[q:q + 1].astype(st.G.dtype), mu[q:q + 1])[0]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--synthetic", type=int, default=0, help="chunks of a recombined corpus instead of HotpotQA")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--gather-queries", type=int, default=500, help="queries timed for the (slow) gather")
    args = ap.parse_args()
    from spread_corpus import data_dir, make_corpus
    d = data_dir()
    titles, texts, questions = hotpot(d)
    corpus = "hotpotqa_500 paragraphs"
    if args.synthetic:
        titles, texts = make_corpus(args.synthetic)
        corpus = f"recombined synthetic, {args.synthetic} chunks"
    load0 = loadavg()
    st, seeds, degs, mu, t_lex = workload(titles, texts, questions, bm25_seeds=not args.synthetic)
    Q = len(questions)
    gq = min(args.gather_queries, Q)
    want = gather_all(st, seeds[:gq], degs[:gq], mu[:gq])
    one = np.stack([ops.spread_hop(st.G, seeds[q:q + 1], degs[q:q + 1], mu[q:q + 1], backend="cpu")[0]
                    for q in range(gq)])
    assert np.array_equal(one, want), "ops.spread_hop differs from the gather"
    res = {"corpus": corpus, "chunks": st.G.n, "attributes": st.G.shape[1], "nnz": st.G.nnz, "queries": Q,
           "lexical_build_s": t_lex}

    r = timed(lambda: gather_all(st, seeds[:gq], degs[:gq], mu[:gq]), repeats=3, pause=False)
    res["numpy_gather_per_query"] = {"queries": gq, "best_s": r["best_s"], "median_s": r["median_s"],
                                     "queries_per_s": gq / r["best_s"]}

    def op_single():
        for q in range(Q):
            ops.spread_hop(st.G, seeds[q:q + 1], degs[q:q + 1], mu[q:q + 1], backend="cpu")
    r = timed(op_single, repeats=3, pause=False)
    res["spread_hop_cpu_one_query_per_call"] = {"best_s": r["best_s"], "median_s": r["median_s"],
                                                "queries_per_s": Q / r["best_s"]}
    B = args.batch

    def op_batched():
        for s in range(0, Q, B):
            ops.spread_hop(st.G, seeds[s:s + B], degs[s:s + B], mu[s:s + B], backend="cpu")
    r = timed(op_batched, repeats=3, pause=False)
    res[f"spread_hop_cpu_batch_{B}"] = {"best_s": r["best_s"], "median_s": r["median_s"],
                                        "queries_per_s": Q / r["best_s"]}
    res["speedup_batched_vs_gather"] = res[f"spread_hop_cpu_batch_{B}"]["queries_per_s"] / \
        res["numpy_gather_per_query"]["queries_per_s"]
    res["speedup_one_query_vs_gather"] = res["spread_hop_cpu_one_query_per_call"]["queries_per_s"] / \
        res["numpy_gather_per_query"]["queries_per_s"]
    payload = {"what": "spreading hop throughput (queries/s), CPU", "machine": machine(),
               "load_average_start": load0, "load_average_end": loadavg(),
               "note": "shared 2-core machine: other tenants' load is part of the figures; best of 3", **res}
    write("spread" + (f"_{args.synthetic}" if args.synthetic else ""), payload)
    print(json.dumps({k: v for k, v in res.items()}, indent=1))


if __name__ == "__main__":
    main()
