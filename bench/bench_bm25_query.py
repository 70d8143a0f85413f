"""BM25 at query time from stored counts (index/bm25_index.CountBM25) against bm25s's stored scores, on
two snapshots of the same corpus: one written before the counts were stored (bm25s's files) and one
written by an update since. Per question: the scores of both (asserted equal bit for bit) and the
time each takes, interleaved, best of ``--repeats``. -> bench/results/<--out>, key ``--key``.

Usage: python bench/bench_bm25_query.py --bm25s DIR --counts DIR [--questions 100] [--key bm25_query]
(DIR: an index directory; only its bm25/ folder is read.)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))


def main() -> None:
    from bench_scale import machine, update_json
    from contextrag.index import bm25_index, store
    from contextrag.index.core import bm25_tokenize
    ap = argparse.ArgumentParser()
    ap.add_argument("--bm25s", type=Path, required=True)
    ap.add_argument("--counts", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--chunks", type=int, default=1_000_000, help="which scale_*.json to write")
    ap.add_argument("--key", default="bm25_query")
    a = ap.parse_args()
    data = Path(os.environ.get("CONTEXTRAG_DATA", REPO.parent / "shared" / "data"))
    qs = [q["question"] for q in json.loads((data / "hotpotqa_500.json").read_text())[:a.questions]]
    t = time.perf_counter()
    old = bm25_index.load(store.snapshot_dir(a.bm25s) / "bm25")
    t_old = time.perf_counter() - t
    t = time.perf_counter()
    new = bm25_index.load(store.snapshot_dir(a.counts) / "bm25")
    t_new = time.perf_counter() - t
    assert isinstance(new, bm25_index.CountBM25) and not isinstance(old, bm25_index.CountBM25)
    toks = [bm25_tokenize([q])[0] for q in qs]
    toks = [x for x in toks if x]
    new.get_scores(toks[0])                      # the idf and length-norm vectors, once per index
    la0 = os.getloadavg()
    best_old, best_new, postings = [], [], []
    for q in toks:
        to, tn = [], []
        for _ in range(a.repeats):
            t = time.perf_counter()
            so = old.get_scores(q)
            to.append(time.perf_counter() - t)
            t = time.perf_counter()
            sn = new.get_scores(q)
            tn.append(time.perf_counter() - t)
        np.testing.assert_array_equal(sn, so)
        best_old.append(min(to))
        best_new.append(min(tn))
        postings.append(int(sum(new.postings(new.vocab_dict[x])[0].size for x in q if x in new.vocab_dict)))
    out = {"machine": machine(), "questions": len(toks), "items": new.n_items, "equal_bit_for_bit": True,
           "load_s": {"bm25s": round(t_old, 3), "counts": round(t_new, 3)},
           "load_and_first_query_s": None,
           "per_query_ms": {"bm25s_median": round(1e3 * float(np.median(best_old)), 3),
                            "counts_median": round(1e3 * float(np.median(best_new)), 3),
                            "bm25s_p95": round(1e3 * float(np.percentile(best_old, 95)), 3),
                            "counts_p95": round(1e3 * float(np.percentile(best_new, 95)), 3),
                            "bm25s_mean": round(1e3 * float(np.mean(best_old)), 3),
                            "counts_mean": round(1e3 * float(np.mean(best_new)), 3)},
           "postings_per_query_median": int(np.median(postings)),
           "loadavg_start": la0, "loadavg_end": os.getloadavg()}
    t = time.perf_counter()
    fresh = bm25_index.load(store.snapshot_dir(a.counts) / "bm25")
    fresh.get_scores(toks[0])
    out["load_and_first_query_s"] = round(time.perf_counter() - t, 3)
    print(json.dumps(out["per_query_ms"]), out["load_and_first_query_s"], flush=True)
    update_json(a.chunks, a.key, out)


if __name__ == "__main__":
    main()
