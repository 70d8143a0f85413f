"""The chosen method against the baselines, with ablations and latency.

Method: hybrid relevance r = h / max h (h = 0.3·BM25/max + 0.5·cos), then one Łukasiewicz spreading
step over the lexical context (title + term families, normalised-IDF incidence): seeds = the 5 best
chunks of distinct documents, seed degrees = h min-max scaled over the top-25 candidates,
act(a) = max(μ(q,a), max_s r_s(s) ⊗ I(s,a)), hop(c) = max_a act(a) ⊗ I(c,a), score = r + 1·hop.
Writes bench/results/multihop/method.json.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from contextrag.index.lexical import LexicalContext  # noqa: E402
from contextrag.query.spread import spread_scores  # noqa: E402

from common import (BM25, _embedder, hybrid, load_hotpot, load_mhrag, ranked_docs, recall_at,  # noqa: E402
                    summarize, write_json)

DEFAULT = dict(families={"title": 1.0, "term": 1.0}, n_seeds=5, lam=1.0, candidates=25, mu=True, seeds=True)
VARIANTS = {
    "method": {},
    "title_only": dict(families={"title": 1.0}),
    "term_only": dict(families={"term": 1.0}),
    "title_term_phrase": dict(families={"title": 1.0, "term": 1.0, "phrase": 1.0}),
    "seeds_3": dict(n_seeds=3),
    "seeds_10": dict(n_seeds=10),
    "lam_0.5": dict(lam=0.5),
    "lam_1.5": dict(lam=1.5),
    "no_query_mentions": dict(mu=False),
    "query_mentions_only": dict(seeds=False),
}


def evaluate(ds, ctx, B, C, doc_codes, p):
    fw = p["families"]
    I = ctx.incidence(fw)
    It = I.T.tocsr()
    per = []
    for qi, q in enumerate(ds["questions"]):
        h = hybrid(B[qi], C[qi])
        mu = ctx.query_activation(q, fw) if p["mu"] else None
        s, _ = spread_scores(h, I, It=It, mu=mu, n_seeds=p["n_seeds"] if p["seeds"] else 0,
                             lam=p["lam"], candidates=p["candidates"], doc=doc_codes)
        per.append(recall_at(ranked_docs(s, ds["doc"]), ds["gold"][qi]))
    return summarize(per, ds["types"])


def latency(ds, ctx, bm, embedder, n=200):
    """Wall time per question from text to ranked list, with and without embedding the question."""
    fw = DEFAULT["families"]
    I = ctx.incidence(fw)
    It = I.T.tocsr()
    E = ds["emb"]
    codes = doc_codes_of(ds)
    full, noemb = [], []
    for q in ds["questions"][:n]:
        t0 = time.perf_counter()
        qe = embedder.encode([q], normalize_embeddings=True, show_progress_bar=False)[0]
        t1 = time.perf_counter()
        h = hybrid(bm.scores(q), E @ qe)
        s, _ = spread_scores(h, I, It=It, mu=ctx.query_activation(q, fw), n_seeds=5, lam=1.0, doc=codes)
        ranked_docs(s, ds["doc"])
        t2 = time.perf_counter()
        full.append(t2 - t0)
        noemb.append(t2 - t1)
    pct = lambda a, p: round(1000 * float(np.percentile(a, p)), 2)  # noqa: E731
    return dict(n=n, with_query_embedding_ms=dict(p50=pct(full, 50), p95=pct(full, 95)),
                retrieval_only_ms=dict(p50=pct(noemb, 50), p95=pct(noemb, 95)))


def doc_codes_of(ds):
    ids = {d: i for i, d in enumerate(dict.fromkeys(ds["doc"]))}
    return np.asarray([ids[d] for d in ds["doc"]], dtype=np.int64)


def run(ds, embedder=None):
    t = time.time()
    bm = BM25(ds["titles"], ds["texts"])
    bm_s = time.time() - t
    t = time.time()
    ctx = LexicalContext.build(ds["titles"], ds["texts"], families=("title", "term", "phrase"))
    lex_s = time.time() - t
    B = np.stack([bm.scores(q) for q in ds["questions"]])
    C = ds["qemb"] @ ds["emb"].T
    codes = doc_codes_of(ds)
    systems = {}
    for name, s in (("bm25", B), ("dense", C), ("hybrid", None)):
        per = []
        for qi in range(len(ds["questions"])):
            sc = hybrid(B[qi], C[qi]) if s is None else s[qi]
            per.append(recall_at(ranked_docs(sc, ds["doc"]), ds["gold"][qi]))
        systems[name] = summarize(per, ds["types"])
    for name, over in VARIANTS.items():
        systems[name] = evaluate(ds, ctx, B, C, codes, {**DEFAULT, **over})
        print(ds["name"], name, systems[name]["all"], flush=True)
    fam = {f: dict(attributes=len(v.vocab), nnz=int(v.incidence.nnz),
                   linking_attributes=int((v.df >= 2).sum())) for f, v in ctx.families.items()}
    out = dict(dataset=ds["name"], n_chunks=len(ds["texts"]), n_questions=len(ds["questions"]),
               bm25_index_s=round(bm_s, 2), lexical_context_s=round(lex_s, 2), families=fam,
               systems=systems)
    if embedder is not None:
        out["latency"] = latency(ds, ctx, bm, embedder)
        print(out["latency"], flush=True)
    return out


if __name__ == "__main__":
    emb = _embedder()
    res = {"config": DEFAULT}
    for ds in (load_hotpot(), load_mhrag("para"), load_mhrag("whole")):
        res[ds["name"]] = run(ds, emb if ds["name"] == "hotpotqa_500" else None)
    write_json("method", res)
