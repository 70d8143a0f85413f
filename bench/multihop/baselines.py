"""Baselines on HotpotQA-500 (and MultiHop-RAG small): BM25, dense, flat hybrid 0.3·BM25/max + 0.5·cos."""
from __future__ import annotations

import time

import numpy as np

from common import BM25, hybrid, load_hotpot, load_mhrag, ranked_docs, recall_at, summarize, write_json


def run(ds):
    t0 = time.time()
    bm = BM25(ds["titles"], ds["texts"])
    build_s = time.time() - t0
    res = {"bm25": [], "dense": [], "hybrid": []}
    lat = []
    for qi, q in enumerate(ds["questions"]):
        t = time.perf_counter()
        b = bm.scores(q)
        c = ds["emb"] @ ds["qemb"][qi]
        h = hybrid(b, c)
        lat.append(time.perf_counter() - t)
        for name, s in (("bm25", b), ("dense", c), ("hybrid", h)):
            res[name].append(recall_at(ranked_docs(s, ds["doc"]), ds["gold"][qi]))
    return dict(dataset=ds["name"], n_chunks=len(ds["texts"]), n_questions=len(ds["questions"]),
                bm25_build_s=round(build_s, 2),
                hybrid_latency_ms_p50=round(1000 * float(np.median(lat)), 2),
                systems={k: summarize(v, ds["types"]) for k, v in res.items()})


if __name__ == "__main__":
    out = {"hotpotqa_500": run(load_hotpot())}
    for mode in ("para", "whole"):
        ds = load_mhrag(mode)
        out[ds["name"]] = run(ds)
    p = write_json("baselines", out)
    for k, v in out.items():
        print(k, v["n_chunks"], {s: v["systems"][s]["all"] for s in v["systems"]})
