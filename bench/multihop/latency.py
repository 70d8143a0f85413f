"""Per-stage query latency of the method on HotpotQA-500 (no LLM), with the machine's load recorded.
Writes bench/results/multihop/latency.json."""
from __future__ import annotations

import os
import time

import numpy as np

from common import BM25, _embedder, hybrid, load_hotpot, ranked_docs, write_json
from method import doc_codes_of
from contextrag.index.lexical import LexicalContext
from contextrag.query.spread import spread_scores

FW = {"title": 1.0, "term": 1.0}

if __name__ == "__main__":
    ds = load_hotpot()
    t = time.time()
    bm = BM25(ds["titles"], ds["texts"])
    bm_s = time.time() - t
    t = time.time()
    ctx = LexicalContext.build(ds["titles"], ds["texts"], families=tuple(FW))
    I = ctx.incidence(FW)
    It = I.T.tocsr()
    lex_s = time.time() - t
    codes = doc_codes_of(ds)
    emb = _embedder()
    stages = {k: [] for k in ("embed_query", "bm25", "cosine", "query_mentions", "spread", "rank", "total")}
    load_before = os.getloadavg()
    for q in ds["questions"]:
        t0 = time.perf_counter()
        qe = emb.encode([q], normalize_embeddings=True, show_progress_bar=False)[0]
        t1 = time.perf_counter()
        b = bm.scores(q)
        t2 = time.perf_counter()
        h = hybrid(b, ds["emb"] @ qe)
        t3 = time.perf_counter()
        mu = ctx.query_activation(q, FW)
        t4 = time.perf_counter()
        s, _ = spread_scores(h, I, It=It, mu=mu, doc=codes)
        t5 = time.perf_counter()
        ranked_docs(s, ds["doc"])
        t6 = time.perf_counter()
        for k, a, z in (("embed_query", t0, t1), ("bm25", t1, t2), ("cosine", t2, t3), ("query_mentions", t3, t4),
                        ("spread", t4, t5), ("rank", t5, t6), ("total", t0, t6)):
            stages[k].append(z - a)
    pct = lambda a, p: round(1000 * float(np.percentile(a, p)), 3)  # noqa: E731
    out = dict(n_queries=len(ds["questions"]), n_chunks=len(ds["texts"]),
               index_seconds=dict(bm25=round(bm_s, 2), lexical_context=round(lex_s, 2)),
               lexical_attributes=int(I.shape[1]), lexical_nnz=int(I.nnz),
               load_average_before=load_before, load_average_after=os.getloadavg(),
               threads="OMP/OPENBLAS/MKL = 1, torch.set_num_threads(1)",
               ms={k: dict(p50=pct(v, 50), p95=pct(v, 95)) for k, v in stages.items()},
               retrieval_without_query_embedding_ms=dict(
                   p50=pct(np.array(stages["total"]) - np.array(stages["embed_query"]), 50),
                   p95=pct(np.array(stages["total"]) - np.array(stages["embed_query"]), 95)))
    write_json("latency", out)
    print(out)
