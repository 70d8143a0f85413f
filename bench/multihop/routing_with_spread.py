"""Does the paper's routing term (eq. 14-16, θ = 0.5, weight 0.2) help once spreading is on, and which
FCM m should the default use? HotpotQA-500 and MultiHop-RAG small; writes routing_with_spread.json."""
from __future__ import annotations

import numpy as np

from common import BM25, hybrid, load_hotpot, load_mhrag, ranked_docs, recall_at, summarize, write_json
from fcm_degeneracy import levels, memberships, routing_mu
from method import doc_codes_of
from contextrag.index.lexical import LexicalContext
from contextrag.ops import fuzzy_route
from contextrag.query.spread import spread_scores

FW = {"title": 1.0, "term": 1.0}


def run(ds, sizes):
    bm = BM25(ds["titles"], ds["texts"])
    B = np.stack([bm.scores(q) for q in ds["questions"]])
    C = ds["qemb"] @ ds["emb"].T
    lv = levels(ds["emb"], sizes=sizes)
    MU = routing_mu(ds["qemb"], lv)
    ctx = LexicalContext.build(ds["titles"], ds["texts"], families=tuple(FW))
    I = ctx.incidence(FW)
    It = I.T.tocsr()
    mus = [ctx.query_activation(q, FW) for q in ds["questions"]]
    codes = doc_codes_of(ds)
    out = {}
    for m in (None, 2.0, 1.1):
        F = None
        if m is not None:
            U = np.concatenate(memberships(lv, m, "none"), axis=1)
            F = np.asarray(fuzzy_route(MU.astype(np.float32), U))
        for spread in (False, True):
            per = []
            for i in range(len(ds["questions"])):
                h = hybrid(B[i], C[i]) + (0.2 * F[i] if F is not None else 0.0)
                s = spread_scores(h, I, It=It, mu=mus[i], doc=codes)[0] if spread else h
                per.append(recall_at(ranked_docs(s, ds["doc"]), ds["gold"][i]))
            name = f"routing_m{m}" if m else "no_routing"
            name += "+spread" if spread else ""
            out[name] = summarize(per, ds["types"])
            print(ds["name"], name, out[name]["all"], flush=True)
    return out


if __name__ == "__main__":
    res = {}
    ds = load_hotpot()
    res[ds["name"]] = run(ds, (96, 24, 12))
    ds = load_mhrag("para")
    res[ds["name"]] = run(ds, (96, 24, 12))
    write_json("routing_with_spread", res)
