#!/usr/bin/env python
"""Ablations of the default method (query-time spreading, docs/MULTIHOP.md) on each shared set.

    python bench/multihop/ablations.py [hotpotqa_500 | multihoprag_small ...]

Every variant changes query-time fields of ``Config()`` only, so all of them read the one index the
evaluation harness caches for the set (eval_sets.py builds the same one). Each variant is one
:func:`contextrag.eval.run` of the ``contextrag`` system, retrieval only; the recall figures and the
query latency of every variant go to bench/results/multihop/eval_<set>/ablations.json beside that
set's evaluation.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_sets import RESULTS, SETS, data_file  # noqa: E402

# name -> query-time overrides of Config(); "default" is Config() itself
VARIANTS = {
    "default": {},
    "title_only": {"spread_families": {"title": 1.0}},
    "term_only": {"spread_families": {"term": 1.0}},
    "title_term_phrase": {"spread_families": {"title": 1.0, "term": 1.0, "phrase": 1.0}},
    "seeds_3": {"spread_seeds": 3},
    "seeds_10": {"spread_seeds": 10},
    "w_spread_0.5": {"w_spread": 0.5},
    "w_spread_1.5": {"w_spread": 1.5},
    "no_spreading": {"w_spread": 0.0},
    "no_routing_term": {"w_fuzzy": 0.0},
}
KEYS = ("recall@2", "recall@5", "recall@10", "strict_recall@5", "complete@5")


def main(names) -> None:
    from contextrag import Config, __version__
    from contextrag.eval import datasets, run
    for name in names:
        qa = datasets.load(str(data_file(name)), SETS[name][1])
        out = {"dataset": name, "questions": len(qa.questions), "variants": {},
               "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                           "load_average_start": round(os.getloadavg()[0], 2)},
               "versions": {"contextrag": __version__, "python": platform.python_version()},
               "note": "each variant: Config() with the overrides shown, system 'contextrag', no LLM"}
        t0 = time.perf_counter()
        for vname, over in VARIANTS.items():
            with tempfile.TemporaryDirectory() as tmp:
                res = run(qa, out=tmp, systems=["contextrag"], config=Config(**over), llm=None, plots=False,
                          progress=False)
            row = res["systems"]["contextrag"]
            out["variants"][vname] = {"overrides": over, **{k: row.get(k) for k in KEYS},
                                      "per_type_recall@5": {t: v.get("recall@5") for t, v in
                                                            res.get("per_type", {}).get("contextrag", {}).items()},
                                      "latency_no_embed_p50_ms": row.get("latency_no_embed_p50_ms")}
            print(name, vname, {k: row.get(k) for k in KEYS[:3]}, flush=True)
        out["seconds"] = round(time.perf_counter() - t0, 1)
        out["machine"]["load_average_end"] = round(os.getloadavg()[0], 2)
        dest = RESULTS / f"eval_{name}" / "ablations.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n")
        os.replace(tmp, dest)


if __name__ == "__main__":
    main(sys.argv[1:] or list(SETS))
