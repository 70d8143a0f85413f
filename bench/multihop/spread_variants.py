#!/usr/bin/env python
"""Every variant of the spreading (entity seeds, later steps, residual coverage, stemmer) on each
shared set, through the evaluation harness (docs/MULTIHOP.md, "Entity seeds, a second step, residual
coverage, stemming").

    python bench/multihop/spread_variants.py [hotpotqa_500 | multihoprag_small ...]

Per set, one harness run (:func:`contextrag.eval.run`, retrieval only, no LLM) in which every variant
is a system: the query-time variants read the one index the harness caches for ``Config()``
(stemmed), the two "unstemmed" variants the index built with ``Config(stemmer=None)`` (stemming is
index-time); each question is embedded once per index and shared by the systems, so the run costs
the retrievals. Then, on the default index: how often the later spreading steps fire under either stopping rule
(``Config.spread_stop``: "head", a step taken because the ranking's head holds a new raised document;
"raised", a step that raises some item's degree) and how often the second step changes the top 10
documents.
Writes bench/results/multihop/eval_<set>/spread_variants.json.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_sets import RESULTS, SETS, data_file  # noqa: E402

# the query-time settings of the spreading before entity seeds, named titles, later steps and residual coverage
BEFORE = {"spread_entities": False, "spread_steps": 1, "w_residual": 0.0, "spread_mentions": False,
          "spread_self": True}
# the previous default: a relevance seed's path to itself counted, later steps until no degree rises
PREVIOUS = {"spread_self": True, "spread_stop": "raised", "w_residual": 1.0}
# name -> (index-time overrides, query-time overrides) of Config()
VARIANTS = {
    "default": ({}, {}),
    "previous default (self paths, stop when no degree rises)": ({}, PREVIOUS),
    "before (one step, no entity seeds, no residual)": ({}, BEFORE),
    "self paths of relevance seeds": ({}, {"spread_self": True}),
    "stop when no degree rises": ({}, {"spread_stop": "raised"}),
    "no entity seeds": ({}, {"spread_entities": False}),
    "no named-title step": ({}, {"spread_mentions": False}),
    "one step": ({}, {"spread_steps": 1}),
    "up to 3 steps": ({}, {"spread_steps": 3}),
    "w_residual 0": ({}, {"w_residual": 0.0}),
    "w_residual 0.25": ({}, {"w_residual": 0.25}),
    "w_residual 0.5": ({}, {"w_residual": 0.5}),
    "w_residual 1": ({}, {"w_residual": 1.0}),
    "w_residual 1.5": ({}, {"w_residual": 1.5}),
    "w_spread 0.5": ({}, {"w_spread": 0.5}),
    "w_spread 1.5": ({}, {"w_spread": 1.5}),
    "no spreading": ({}, {"w_spread": 0.0}),
    "unstemmed index": ({"stemmer": None}, {}),
    "unstemmed index, before (the default two versions back)": ({"stemmer": None}, BEFORE),
}
KEYS = ("recall@2", "recall@5", "recall@10", "strict_recall@5", "complete@5")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return sorted(f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile") if f in have)
    except OSError:
        pass
    return []


def latency_tail(rows: list[dict]) -> dict:
    """p50/p99 of one retrieve call without the question's embedding (ms), from the harness rows."""
    ms = [r["latency_ms"] - r.get("embed_ms", 0.0) for r in rows if "latency_ms" in r]
    if not ms:
        return {}
    return {"no_embed_p50_ms": round(float(np.percentile(ms, 50)), 2),
            "no_embed_p99_ms": round(float(np.percentile(ms, 99)), 2)}


def steps_fired(qa, config) -> dict:
    """On the default index: per question, the later steps that raised some degree, and whether the
    top-10 documents differ from one step's."""
    from contextrag.eval.runner import IndexCache, _backend, default_cache_dir
    from contextrag.query import QUERY_FIELDS, retrieve_many, view_of
    from contextrag.query.dense import embed_queries
    from contextrag.query.hybrid import base_parts
    from contextrag.query.spread import spread_steps_fired
    backend, name = _backend()
    _, rag = IndexCache(default_cache_dir(), backend, name, progress=False).get(config, qa, ["contextrag"])
    view = view_of(rag)
    texts = [q.text for q in qa.questions]
    Q = embed_queries(view, texts)
    bases = [base_parts(view, t, Q[i:i + 1], config)["base"] for i, t in enumerate(texts)]
    out = {}
    for stop in ("head", "raised"):
        for steps in (2, 3, 4):
            cfg = config.__class__(**{**config.to_dict(), "spread_steps": steps, "spread_stop": stop})
            fired = spread_steps_fired(view, texts, bases, cfg)
            out[f"spread_stop={stop}, spread_steps={steps}"] = {
                "questions": len(texts), "steps_that_added": {str(k): int((fired == k).sum()) for k in range(steps)}}
    over = {k: getattr(config, k) for k in QUERY_FIELDS}

    def top_docs(hits):
        seen = []
        for h in hits:
            if h.doc_id not in seen:
                seen.append(h.doc_id)
        return seen[:10]
    a = retrieve_many(rag, texts, k=40, **{**over, "spread_steps": 1})
    b = retrieve_many(rag, texts, k=40, **{**over, "spread_steps": 2})
    out["top10_documents_changed_by_step_2"] = int(sum(top_docs(x) != top_docs(y) for x, y in zip(a, b)))
    return out


def main(names) -> None:
    import bm25s

    from contextrag import Config, __version__
    from contextrag.eval import datasets, run, runner
    from contextrag.eval.runner import load_rows
    from contextrag.eval.systems import System, make_systems
    for name in names:
        qa = datasets.load(str(data_file(name)), SETS[name][1])
        out = {"dataset": name, "questions": len(qa.questions), "variants": {},
               "machine": {"cpu": cpu_model(), "flags": cpu_flags(), "cpus": os.cpu_count(),
                           "platform": platform.platform(), "load_average_start": round(os.getloadavg()[0], 2),
                           "note": "shared machine, several other jobs running: latencies are noisy; "
                                   "recall does not depend on the load"},
               "versions": {"contextrag": __version__, "python": platform.python_version(),
                            "numpy": np.__version__, "bm25s": getattr(bm25s, "__version__", "?")},
               "note": "each variant: Config() with the overrides shown, system 'contextrag', no LLM; "
                       "latency = one retrieve call minus the question's embedding"}
        try:
            from importlib.metadata import version
            out["versions"]["PyStemmer"] = version("PyStemmer")
        except Exception:   # not installed: the stemmed variants fail with a clear ImportError
            pass
        t0 = time.perf_counter()
        systems = [System(v, f"Config({index_over}) queried with {query_over}", Config(**index_over), dict(query_over))
                   for v, (index_over, query_over) in VARIANTS.items()]
        runner.make_systems = lambda cfg, names: [s for s in systems if s.name in names]   # the variants as systems
        try:
            with tempfile.TemporaryDirectory() as tmp:
                res = run(qa, out=tmp, systems=list(VARIANTS), config=Config(), llm=None, plots=False, progress=False)
                rows = load_rows(Path(tmp) / "questions.jsonl")
        finally:
            runner.make_systems = make_systems
        for vname, (index_over, query_over) in VARIANTS.items():
            row = res["systems"][vname]
            per_type = res.get("per_type", {}).get(vname, {})
            out["variants"][vname] = {
                "index_overrides": index_over, "query_overrides": query_over,
                **{k: row.get(k) for k in KEYS},
                "per_type_recall@2": {t: v.get("recall@2") for t, v in per_type.items()},
                "per_type_recall@5": {t: v.get("recall@5") for t, v in per_type.items()},
                "latency": latency_tail([r for r in rows if r.get("system") == vname])}
            print(name, vname, {k: row.get(k) for k in KEYS[:3]}, out["variants"][vname]["latency"], flush=True)
        out["later_steps"] = steps_fired(qa, Config())
        print(name, out["later_steps"], flush=True)
        out["seconds"] = round(time.perf_counter() - t0, 1)
        out["machine"]["load_average_end"] = round(os.getloadavg()[0], 2)
        dest = RESULTS / f"eval_{name}" / "spread_variants.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
        os.replace(tmp, dest)


if __name__ == "__main__":
    main(sys.argv[1:] or list(SETS))
