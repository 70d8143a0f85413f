#!/usr/bin/env python
"""The multi-hop retrieval evaluation of docs/MULTIHOP.md: every system on each shared set.

    python bench/multihop/eval_sets.py [hotpotqa_500 | multihoprag_small ...]

Runs :func:`contextrag.eval.run` (retrieval only, no LLM) on HotpotQA-500 and MultiHop-RAG small and
writes bench/results/multihop/eval_<set>/ (report.md, results.json, plots; the per-question
questions.jsonl is removed afterwards, it is large and rebuilt by any rerun). Data come from
$CONTEXTRAG_DATA, default ../shared/data beside the repository; indexes are cached under
$CONTEXTRAG_EVAL_CACHE (default ~/.cache/contextrag/eval-indexes).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("CONTEXTRAG_DATA", REPO.parent / "shared" / "data"))
RESULTS = REPO / "bench" / "results" / "multihop"
# set name -> (file under DATA, harness format)
SETS = {"hotpotqa_500": ("hotpotqa_500.json", "hotpotqa"),
        "multihoprag_small": ("multihoprag_small.json", "multihoprag")}
SYSTEMS = ["bm25", "dense", "hybrid", "hybrid_renorm", "contextrag", "contextrag_no_summaries", "contextrag_paper"]


def data_file(name: str) -> Path:
    path = DATA / SETS[name][0]
    if not path.is_file():
        sys.exit(f"{path} not found: set CONTEXTRAG_DATA to the folder holding {SETS[name][0]}")
    return path


def main(names) -> None:
    from contextrag.eval import run
    os.chdir(REPO)   # the report records both paths as given: relative ones name no machine
    for name in names:
        out = RESULTS / f"eval_{name}"
        res = run(os.path.relpath(data_file(name), REPO), format=SETS[name][1], out=os.path.relpath(out, REPO),
                  systems=SYSTEMS, llm=None)
        (out / "questions.jsonl").unlink(missing_ok=True)
        print(name, {s: res["systems"][s]["recall@5"] for s in SYSTEMS})


if __name__ == "__main__":
    main(sys.argv[1:] or list(SETS))
