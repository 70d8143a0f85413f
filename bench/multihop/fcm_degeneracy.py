"""FCM degeneracy: mean largest membership per RQ level for several m and normalisations,
and what the paper's routing (eq. 14-16, θ=0.5, weight 0.2) and the RQ family in the spreading do to
recall on HotpotQA-500."""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
import torch

from common import BM25, load_hotpot, ranked_docs, recall_at, summarize, write_json
from contextrag.ops import fcm_memberships, fuzzy_route, rq_kmeans
from contextrag.index.lexical import LexicalContext
from contextrag.query.spread import hop, seed_activation

SIZES = (96, 24, 12)


def levels(E, sizes=SIZES, seed=0):
    X = torch.from_numpy(E.astype(np.float32))
    rq = rq_kmeans(X, sizes=sizes, seed=seed, n_iter=25)
    R, out = X.clone(), []
    for C, codes in zip(rq.codebooks, rq.codes.T):
        out.append((R.clone(), C))
        R -= C[codes]
    return out


def memberships(lv, m, norm):
    U = []
    for R, C in lv:
        u = fcm_memberships(R, C, m=m).numpy()
        if norm == "max":          # divide each row by its largest membership
            u = u / u.max(axis=1, keepdims=True)
        U.append(u.astype(np.float32))
    return U


def routing_mu(q, lv, theta=0.5):
    """eq. 14-15 for attribute concepts: μ = θ → (1 + cos(q, centroid))/2, per level."""
    mus = []
    for R, C in lv:
        Cn = C.numpy() / np.maximum(np.linalg.norm(C.numpy(), axis=1, keepdims=True), 1e-9)
        s = (1 + q @ Cn.T) / 2
        mus.append(np.minimum(1.0, 1 - theta + s))
    return np.concatenate(mus, axis=1)


if __name__ == "__main__":
    ds = load_hotpot()
    t = time.time()
    lv = levels(ds["emb"])
    rq_s = time.time() - t
    bm = BM25(ds["titles"], ds["texts"])
    Bs = np.stack([bm.scores(q) for q in ds["questions"]])
    Cs = ds["qemb"] @ ds["emb"].T
    H = Bs * 0.3 / Bs.max(axis=1, keepdims=True) + 0.5 * Cs
    MU = routing_mu(ds["qemb"], lv)
    out = {"rq_seconds": round(rq_s, 2), "sizes": SIZES, "uniform": [round(1 / k, 4) for k in SIZES],
           "mu_fraction_equal_1": round(float((MU >= 1.0).mean()), 4), "rows": []}
    base = [recall_at(ranked_docs(H[i], ds["doc"]), ds["gold"][i]) for i in range(500)]
    out["hybrid"] = summarize(base, ds["types"])["all"]
    lex = LexicalContext.build(ds["titles"], ds["texts"], families=("title", "term"))
    Ilex = sp.hstack([f.incidence for f in lex.families.values()]).tocsr()
    mulex = [sp.hstack([f.query_activation(q) for f in lex.families.values()]) for q in ds["questions"]]
    for m in (2.0, 1.5, 1.25, 1.1, 1.05):
        for norm in ("none", "max"):
            U = memberships(lv, m, norm)
            mm = [round(float(u.max(axis=1).mean()), 4) for u in U]
            Ucat = np.concatenate(U, axis=1)
            F = fuzzy_route(MU.astype(np.float32), Ucat)
            per = [recall_at(ranked_docs(H[i] + 0.2 * F[i], ds["doc"]), ds["gold"][i]) for i in range(500)]
            # the RQ family joined to the lexical families in the spreading (weight 1)
            Iall = sp.hstack([Ilex, sp.csr_matrix(np.where(Ucat >= 0.05, Ucat, 0))]).tocsr()
            It = Iall.T.tocsr()
            per2 = []
            for i in range(500):
                h = H[i]
                r = (h / h.max()).astype(np.float32)
                hs = np.sort(h)[::-1]
                rs = np.clip((h - hs[25]) / (hs[0] - hs[25]), 0, 1).astype(np.float32)
                mu = np.concatenate([mulex[i].toarray().ravel(), np.zeros(Ucat.shape[1], np.float32)])
                seeds = np.argpartition(-r, 4)[:5]
                g = hop(seed_activation(rs, seeds, Iall, mu), It, n=r.size)
                per2.append(recall_at(ranked_docs(r + g, ds["doc"]), ds["gold"][i]))
            row = dict(m=m, norm=norm, mean_max_membership=mm,
                       partition_coefficient=[round(float((u ** 2).sum(1).mean()), 4) for u in U],
                       routing=summarize(per)["all"], spread_with_rq=summarize(per2)["all"])
            out["rows"].append(row)
            print(row, flush=True)
    write_json("fcm_degeneracy", out)
