"""The hop step (attributes -> chunks) on the real HotpotQA lexical context: contextrag.ops.fuzzy_route
with a scipy CSR incidence against spread.hop's gather over the active attributes' columns.
Writes ops_csr_vs_gather.json (same result required; times in ms, median of 20 queries)."""
from __future__ import annotations

import time

import numpy as np

from common import BM25, hybrid, load_hotpot, write_json
from method import doc_codes_of
from contextrag import ops
from contextrag.index.lexical import LexicalContext
from contextrag.query.spread import hop, pick_seeds, seed_activation, seed_relevance

FW = {"title": 1.0, "term": 1.0}

if __name__ == "__main__":
    ds = load_hotpot()
    bm = BM25(ds["titles"], ds["texts"])
    ctx = LexicalContext.build(ds["titles"], ds["texts"], families=tuple(FW))
    I = ctx.incidence(FW)
    It = I.T.tocsr()
    codes = doc_codes_of(ds)
    t_ops, t_gather, maxdiff = [], [], 0.0
    for qi, q in enumerate(ds["questions"][:20]):
        h = hybrid(bm.scores(q), ds["emb"] @ ds["qemb"][qi])
        act = seed_activation(seed_relevance(h), pick_seeds(h, 5, codes), I, ctx.query_activation(q, FW))
        t0 = time.perf_counter()
        a = np.asarray(ops.fuzzy_route(act[None, :], I))[0]
        t1 = time.perf_counter()
        b = hop(act, It, n=I.shape[0])
        t2 = time.perf_counter()
        t_ops.append(t1 - t0)
        t_gather.append(t2 - t1)
        maxdiff = max(maxdiff, float(np.abs(a - b).max()))
    out = dict(n_chunks=I.shape[0], n_attributes=I.shape[1], nnz=int(I.nnz), max_abs_diff=maxdiff,
               backends={k: v["available"] for k, v in ops.backends().items()},
               ops_fuzzy_route_csr_ms=round(1000 * float(np.median(t_ops)), 3),
               gather_hop_ms=round(1000 * float(np.median(t_gather)), 3))
    write_json("ops_csr_vs_gather", out)
    print(out)
