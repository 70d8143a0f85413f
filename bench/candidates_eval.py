#!/usr/bin/env python
"""Candidate scoring forced on the shared sets' small indexes (query/candidates.py), against the
exhaustive scoring they get by default: what the candidate rule loses where it would not be used.

    python bench/candidates_eval.py        # writes bench/results/query_candidates_5k.json

The full system (``contextrag``, default Config) through :func:`contextrag.eval.run`, retrieval only,
on HotpotQA-500 and MultiHop-RAG small, once with ``scoring="exhaustive"`` and once with
``scoring="candidates"``, in one process. Data from $CONTEXTRAG_DATA (default ../shared/data).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench" / "multihop"))
sys.path.insert(0, str(REPO / "bench"))


def main() -> None:
    from contextrag import Config, ContextRAG
    from contextrag.eval import run
    from contextrag.eval.runner import default_cache_dir
    from contextrag.query.candidates import budget
    from bench_scale import machine
    from eval_sets import SETS, data_file
    out = {"benchmark": "query_candidates_5k", "machine": machine(), "loadavg_start": os.getloadavg(), "sets": {}}
    for name in SETS:
        row = {}
        for mode in ("exhaustive", "candidates"):
            with tempfile.TemporaryDirectory(prefix="ctxrag-cand-") as d:
                res = run(str(data_file(name)), format=SETS[name][1], out=d, systems=["contextrag"],
                          config=Config(scoring=mode), llm=None, plots=False, progress=False)
            s = res["systems"]["contextrag"]
            row[mode] = {k: round(float(v), 4) for k, v in s.items() if k.startswith("recall@")}
            row[mode]["latency_p50_ms"] = s.get("latency_p50_ms")
        info = next(iter(res["indexes"].values()))
        n = ContextRAG.load(default_cache_dir().parent / info["path"]).index.n_items
        row["items"], row["retrieve_k"] = n, res["run"]["retrieve_k"]
        row["budget"] = budget(n, row["retrieve_k"])   # candidates per source when forced on
        out["sets"][name] = row
        print(name, row, flush=True)
    out["loadavg_end"] = os.getloadavg()
    p = REPO / "bench" / "results" / "query_candidates_5k.json"
    p.write_text(json.dumps(out, indent=2, default=str))
    print("wrote", p)


if __name__ == "__main__":
    main()
