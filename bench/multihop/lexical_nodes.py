#!/usr/bin/env python
"""Concept nodes over the lexical context as retrievable items: do they earn their place?

    python bench/multihop/lexical_nodes.py [hotpotqa_500 | multihoprag_small ...]

Index-time variants of ``Config()`` (each its own index; the harness's passage-embedding cache means
the vectors are computed once), one :func:`contextrag.eval.run` of the ``contextrag`` system each,
retrieval only, no LLM:

* ``rq_nodes``: the RQ lattice's 64 joins + 64 meets as items (the default before this measurement);
* ``no_virtual_items``: no join/meet items at all;
* ``lexical_nodes``: 64 lexical joins + 64 lexical meets (index/lexical_nodes.py) instead of the RQ ones;
* ``rq_and_lexical_nodes``: both.

Writes bench/results/multihop/lexical_nodes.json: recall@2/5/10, strict recall@5, complete@5, the
share of top-5 slots held by virtual items, and per-question wins/losses (recall@k up / down) and
changed top-5 document lists of every variant against ``rq_nodes`` and ``no_virtual_items``. The
per-question rows of each run stay under $TMPDIR/contextrag-lexical-nodes/ (a rerun resumes).
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

VARIANTS = {
    "rq_nodes": {"n_join": 64, "n_meet": 64, "lexical_joins": 0, "lexical_meets": 0},
    "no_virtual_items": {"n_join": 0, "n_meet": 0, "lexical_joins": 0, "lexical_meets": 0},
    "lexical_nodes": {"n_join": 0, "n_meet": 0, "lexical_joins": 64, "lexical_meets": 64},
    "rq_and_lexical_nodes": {"n_join": 64, "n_meet": 64, "lexical_joins": 64, "lexical_meets": 64},
}
BASELINES = ("rq_nodes", "no_virtual_items")
KEYS = ("recall@2", "recall@5", "recall@10", "strict_recall@5", "complete@5", "virtual_top5_share")
KS = (2, 5, 10)


def _rows(path: Path) -> dict:
    from contextrag.eval.runner import load_rows
    return {r["qid"]: r for r in load_rows(path) if r.get("system") == "contextrag"}


def compare(a: dict, b: dict) -> dict:
    """Per-question comparison of variant rows ``a`` against baseline rows ``b``."""
    out = {"questions": len(set(a) & set(b))}
    for k in KS:
        won = [q for q in a if q in b and a[q][f"recall@{k}"] > b[q][f"recall@{k}"]]
        lost = [q for q in a if q in b and a[q][f"recall@{k}"] < b[q][f"recall@{k}"]]
        out[f"recall@{k}"] = {"won": len(won), "lost": len(lost), "won_ids": won, "lost_ids": lost}
    out["top5_docs_changed"] = sum(1 for q in a if q in b and a[q]["ranked"][:5] != b[q]["ranked"][:5])
    out["top10_docs_changed"] = sum(1 for q in a if q in b and a[q]["ranked"][:10] != b[q]["ranked"][:10])
    return out


def deltas(sets: dict) -> dict:
    """recall@k of every variant minus each baseline's, per set, and whether any drop exceeds 0.3 points
    (the rule: keep virtual items only where they help on both sets with no drop > 0.3 anywhere)."""
    out = {}
    for base in BASELINES:
        for v in VARIANTS:
            if v == base:
                continue
            d = {s: {f"recall@{k}": round(r["variants"][v][f"recall@{k}"] - r["variants"][base][f"recall@{k}"], 2)
                     for k in KS} for s, r in sets.items()}
            worst = min(x for per in d.values() for x in per.values())
            out[f"{v}_vs_{base}"] = {"delta": d, "largest_drop": round(min(worst, 0.0), 2),
                                     "no_drop_over_0.3": worst >= -0.3}
    return out


def main(names) -> None:
    from contextrag import Config, __version__
    from contextrag.eval import datasets, run
    dest = RESULTS / "lexical_nodes.json"
    out = json.loads(dest.read_text()) if dest.exists() else {}
    out.update({"what": "index-time variants of Config(): which join/meet virtual items the index holds; "
                        "system 'contextrag' (spreading on), retrieval only, no LLM, embedded MiniLM",
                "variants": {k: v for k, v in VARIANTS.items()},
                "versions": {"contextrag": __version__, "python": platform.python_version()},
                "machine": {"platform": platform.platform(), "cpus": os.cpu_count()}})
    out.setdefault("sets", {})
    work = Path(tempfile.gettempdir()) / "contextrag-lexical-nodes"
    for name in names:
        qa = datasets.load(str(data_file(name)), SETS[name][1])
        res_set = {"questions": len(qa.questions), "load_average_start": round(os.getloadavg()[0], 2),
                   "variants": {}, "per_question": {}}
        rows, t0 = {}, time.perf_counter()
        for vname, over in VARIANTS.items():
            d = work / name / vname
            d.mkdir(parents=True, exist_ok=True)
            res = run(qa, out=str(d), systems=["contextrag"], config=Config(**over), llm=None, plots=False,
                      progress=False)
            row = res["systems"]["contextrag"]
            stats = next(iter(res["indexes"].values())).get("stats", {})
            res_set["variants"][vname] = {**{k: row.get(k) for k in KEYS},
                                          "items_by_kind": stats.get("items_by_kind"),
                                          "lexical_nodes": stats.get("lexical_nodes")}
            rows[vname] = _rows(d / "questions.jsonl")
            print(name, vname, {k: row.get(k) for k in KEYS}, flush=True)
        for base in BASELINES:
            res_set["per_question"][f"vs_{base}"] = {v: compare(rows[v], rows[base]) for v in VARIANTS if v != base}
        res_set["seconds_this_invocation"] = round(time.perf_counter() - t0, 1)   # resumed rows cost nothing
        res_set["load_average_end"] = round(os.getloadavg()[0], 2)
        out["sets"][name] = res_set
        out["deltas"] = deltas(out["sets"])
        tmp = dest.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n")
        os.replace(tmp, dest)


if __name__ == "__main__":
    main(sys.argv[1:] or list(SETS))
