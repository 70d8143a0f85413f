#!/usr/bin/env python
"""Recall of `contextrag` with each embedder on every shared set -> bench/results/embedders_recall.json

    python bench/bench_embedders_recall.py WORKDIR [--embedders onnx,onnx-int8,static]
        [--sets hotpotqa500,multihoprag] [--out embedders_recall.json]

Runs the evaluation harness (``contextrag eval``, no LLM, system ``contextrag`` only, default Config
with ``embedder`` changed) on HotpotQA-500 and MultiHop-RAG (small) for each embedder, into
WORKDIR/<set>_<embedder> (an existing results.json there is reused, so an interrupted run resumes),
and collects recall@2/5/10, the index build's seconds (wall, with its stages) and the load average
around it. Each embedder gets its own index and passage-embedding cache, so every build embeds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import DATA, machine, write  # noqa: E402

SETS = {"hotpotqa500": ("hotpotqa_500.json", "hotpotqa"), "multihoprag": ("multihoprag_small.json", "multihoprag")}


def run_one(work: Path, name: str, emb: str) -> dict:
    out = work / f"{name}_{emb}"
    res = out / "results.json"
    load = None
    if not res.is_file():
        cfg = work / f"config_{emb}.json"
        cfg.write_text(json.dumps({"embedder": emb}))
        data, fmt = SETS[name]
        load = {"loadavg_start": os.getloadavg()}
        subprocess.run([sys.executable, "-m", "contextrag.cli", "eval", str(DATA / data), "--format", fmt,
                        "--out", str(out), "--no-llm", "--config", str(cfg), "--systems", "contextrag",
                        "--cache-dir", str(work / f"cache_{emb}"), "--no-plots", "--quiet"], check=True)
        load["loadavg_end"] = os.getloadavg()
    r = json.loads(res.read_text())
    row = {k: r["systems"]["contextrag"].get(k) for k in ("recall@2", "recall@5", "recall@10")}
    row["questions"] = r["systems"]["contextrag"].get("n")
    for info in (r.get("indexes") or {}).values():
        if isinstance(info, dict) and "seconds" in info:
            stats = info.get("stats") or {}
            row["build_seconds"] = info["seconds"]
            row["build_from_cache"] = info.get("from_cache")
            row["build_seconds_per_stage"] = stats.get("timings")
            row["chunks"] = stats.get("chunks")
    if load:
        row.update(load)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workdir", type=Path)
    p.add_argument("--embedders", default="onnx,onnx-int8,static")
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--out", default="embedders_recall.json")
    args = p.parse_args(argv)
    out = {"benchmark": "embedders_recall", "machine": machine(), "system": "contextrag (default Config)",
           "niceness": os.nice(0), "results": {}}
    for emb in args.embedders.split(","):
        for name in args.sets.split(","):
            out["results"][f"{name}/{emb}"] = run_one(args.workdir, name, emb)
            print(name, emb, out["results"][f"{name}/{emb}"], flush=True)
    write(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
