#!/usr/bin/env python
"""Query latency of the spreading variants without the question's embedding, interleaved on one index.

    python bench/multihop/spread_latency.py [hotpotqa_500] [--questions 200] [--repeats 3]

On the harness's cached ``Config()`` index of the set (HotpotQA-500: 5,522 chunks), each question is
embedded once up front; then, per question and repeat, one scoring call (eq. 13 + spreading + boosts
+ top 20, i.e. ``retrieve`` without the embedding and the hit objects) per variant in turn, so the
machine's load falls on every variant alike. Per variant the best of the repeats per question, then
p50/p99 over the questions, and the ratio to the variant without spreading (the peer in the same run).
Writes bench/results/multihop/spread_latency.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_sets import RESULTS, SETS, data_file  # noqa: E402
from spread_variants import BEFORE, PREVIOUS, cpu_flags, cpu_model  # noqa: E402

VARIANTS = {"no spreading": {"w_spread": 0.0}, "before (one step, no entity seeds, no residual)": BEFORE,
            "previous default (self paths, stop when no degree rises)": PREVIOUS,
            "default": {}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("set", nargs="?", default="hotpotqa_500", choices=list(SETS))
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    import dataclasses

    from contextrag import Config, __version__
    from contextrag.eval import datasets
    from contextrag.eval.runner import IndexCache, _backend, default_cache_dir
    from contextrag.query import view_of
    from contextrag.query.dense import embed_queries
    from contextrag.query.hybrid import score_all, top_indices

    qa = datasets.load(str(data_file(a.set)), SETS[a.set][1])
    backend, name = _backend()
    _, rag = IndexCache(default_cache_dir(), backend, name, progress=False).get(Config(), qa, ["contextrag"])
    view = view_of(rag)
    texts = [q.text for q in qa.questions][:a.questions]
    Q = embed_queries(view, texts)
    cfgs = {k: dataclasses.replace(Config(), **v) for k, v in VARIANTS.items()}
    for cfg in cfgs.values():                      # warm-up: lexical state, caches
        top_indices(score_all(view, texts[0], Q[:1], cfg)["score"], 20)
    load0 = os.getloadavg()[0]
    ms = {k: np.full((len(texts), a.repeats), np.inf) for k in cfgs}
    for rep in range(a.repeats):
        for i, t in enumerate(texts):
            for k, cfg in cfgs.items():
                t0 = time.perf_counter()
                top_indices(score_all(view, t, Q[i:i + 1], cfg)["score"], 20)
                ms[k][i, rep] = (time.perf_counter() - t0) * 1e3
    best = {k: v.min(axis=1) for k, v in ms.items()}
    peer = float(np.percentile(best["no spreading"], 50))
    out = {"dataset": a.set, "chunks": int(view.n), "questions": len(texts), "repeats": a.repeats,
           "variants": {k: {"overrides": VARIANTS[k], "p50_ms": round(float(np.percentile(v, 50)), 2),
                            "p99_ms": round(float(np.percentile(v, 99)), 2),
                            "p50_vs_no_spreading": round(float(np.percentile(v, 50)) / peer, 2)}
                        for k, v in best.items()},
           "machine": {"cpu": cpu_model(), "flags": cpu_flags(), "cpus": os.cpu_count(),
                       "platform": platform.platform(), "load_average_start": round(load0, 2),
                       "load_average_end": round(os.getloadavg()[0], 2),
                       "note": "shared machine, several other jobs running: read the ratios"},
           "versions": {"contextrag": __version__, "python": platform.python_version(), "numpy": np.__version__},
           "note": "one scoring call per question (eq. 13 + spreading + boosts + top 20) with the question "
                   "embedded beforehand; variants interleaved per question; best of the repeats per question"}
    dest = RESULTS / "spread_latency.json"
    tmp = dest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    os.replace(tmp, dest)
    print(json.dumps(out["variants"], indent=1))


if __name__ == "__main__":
    main()
