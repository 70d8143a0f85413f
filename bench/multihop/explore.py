"""Exploration grid for the lexical-family spreading; writes explore_<dataset>.json."""
from __future__ import annotations

import sys
import time

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[2] / "python"))
from contextrag.index.lexical import LexicalContext  # noqa: E402
from contextrag.query.spread import hop, seed_activation  # noqa: E402

from common import BM25, hybrid, load_hotpot, load_mhrag, ranked_docs, recall_at, summarize, write_json  # noqa: E402


def prepare(ds, families=("title", "phrase", "term")):
    bm = BM25(ds["titles"], ds["texts"])
    B = np.stack([bm.scores(q) for q in ds["questions"]])
    C = ds["qemb"] @ ds["emb"].T
    t = time.time()
    ctx = LexicalContext.build(ds["titles"], ds["texts"], families=families)
    build = time.time() - t
    MU = {f: [fam.query_activation(q) for q in ds["questions"]] for f, fam in ctx.families.items()}
    return B, C, ctx, MU, build


def combined(ctx, fw):
    """Union of families, incidence of family f scaled by fw[f] (fw[f] = 0 drops it)."""
    mats = [ctx.families[f].incidence * w for f, w in fw.items() if w > 0]
    I = sp.hstack(mats).tocsr() if mats else sp.csr_matrix((0, 0))
    return I, I.T.tocsr()


def evaluate(ds, B, C, MU, I, It, fw, *, lam=0.0, n_seeds=5, use_mu=True, use_seeds=True, mode="add"):
    per = []
    for qi in range(len(ds["questions"])):
        h = hybrid(B[qi], C[qi])
        r = np.clip(h / max(h.max(), 1e-9), 0, 1).astype(np.float32)
        if lam > 0:
            mu = None
            if use_mu:
                mu = sp.hstack([MU[f][qi] * w for f, w in fw.items() if w > 0]).toarray().ravel()
            seeds = np.argpartition(-r, n_seeds - 1)[:n_seeds] if use_seeds else np.zeros(0, np.int64)
            act = seed_activation(r, seeds, I, mu)
            g = hop(act, It, n=r.size)
            s = r + lam * g if mode == "add" else np.maximum(r, lam * g + (1 - lam) * r)
        else:
            s = r
        per.append(recall_at(ranked_docs(s, ds["doc"]), ds["gold"][qi]))
    return summarize(per, ds["types"])


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "hotpot"
    ds = load_hotpot() if which == "hotpot" else load_mhrag(which)
    B, C, ctx, MU, build = prepare(ds)
    rows = []
    base = evaluate(ds, B, C, MU, None, None, {}, lam=0)
    rows.append(dict(name="hybrid", res=base))
    print("hybrid", base["all"], flush=True)
    grid = []
    for fw in ({"title": 1.0}, {"phrase": 1.0}, {"term": 1.0}, {"title": 1.0, "phrase": 1.0},
               {"title": 1.0, "phrase": 1.0, "term": 1.0}):
        for use_mu, use_seeds in ((True, False), (False, True), (True, True)):
            for lam in (0.25, 0.5, 1.0):
                grid.append((fw, use_mu, use_seeds, lam))
    cache = {}
    for fw, use_mu, use_seeds, lam in grid:
        key = tuple(sorted(fw.items()))
        if key not in cache:
            cache[key] = combined(ctx, fw)
        I, It = cache[key]
        t = time.time()
        res = evaluate(ds, B, C, MU, I, It, fw, lam=lam, use_mu=use_mu, use_seeds=use_seeds)
        dt = (time.time() - t) / len(ds["questions"])
        rows.append(dict(families=fw, use_mu=use_mu, use_seeds=use_seeds, lam=lam, res=res,
                         ms_per_query=round(1000 * dt, 2)))
        print(fw, use_mu, use_seeds, lam, res["all"], {k: v["recall@5"] for k, v in res.items() if k != "all"},
              round(1000 * dt, 1), "ms", flush=True)
    write_json(f"explore_{ds['name']}", dict(dataset=ds["name"], lexical_build_s=round(build, 2), rows=rows))
