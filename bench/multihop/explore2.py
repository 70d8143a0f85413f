"""Second exploration grid: seeds, λ, drift gate, iterations, family sets; on all three corpora."""
from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from explore import combined, prepare
from common import hybrid, load_hotpot, load_mhrag, ranked_docs, recall_at, summarize, write_json
from contextrag.query.spread import hop, seed_activation


def run_variant(ds, B, C, MU, I, It, fw, lam, n_seeds, rho, iters):
    per = []
    for qi in range(len(ds["questions"])):
        h = hybrid(B[qi], C[qi])
        r = np.clip(h / max(h.max(), 1e-9), 0, 1).astype(np.float32)
        mu = sp.hstack([MU[f][qi] * w for f, w in fw.items() if w > 0]).toarray().ravel()
        s = r
        for _ in range(iters):
            seeds = np.argpartition(-s, n_seeds - 1)[:n_seeds]
            sn = np.clip(s / s.max(), 0, 1).astype(np.float32)
            g = hop(seed_activation(sn, seeds, I, mu), It, n=r.size)
            if rho is not None:
                g = np.maximum(0.0, g + r - rho)
            s = r + lam * g
        per.append(recall_at(ranked_docs(s, ds["doc"]), ds["gold"][qi]))
    return summarize(per, ds["types"])


if __name__ == "__main__":
    out = {}
    sets = [load_hotpot(), load_mhrag("para"), load_mhrag("whole")]
    fams = [{"title": 1.0, "phrase": 1.0, "term": 1.0}, {"title": 1.0, "term": 1.0}, {"title": 1.0}]
    for ds in sets:
        B, C, ctx, MU, _ = prepare(ds)
        rows = []
        for fw in fams:
            I, It = combined(ctx, fw)
            for n_seeds in (3, 5, 10):
                for lam in (0.5, 1.0, 1.5):
                    for rho in (None, 1.0, 0.75):
                        for iters in (1, 2):
                            if iters == 2 and (n_seeds != 5 or rho is not None):
                                continue
                            res = run_variant(ds, B, C, MU, I, It, fw, lam, n_seeds, rho, iters)
                            rows.append(dict(families=list(fw), n_seeds=n_seeds, lam=lam, rho=rho,
                                             iters=iters, res=res))
                            print(ds["name"][:18], list(fw), n_seeds, lam, rho, iters,
                                  [res["all"][f"recall@{k}"] for k in (2, 5, 10)], flush=True)
        out[ds["name"]] = rows
    write_json("explore2", out)
