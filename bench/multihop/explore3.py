"""Third grid: aggregation (max vs Łukasiewicz bounded sum), term-family weight, seeds; all corpora."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from explore import combined, prepare
from common import hybrid, load_hotpot, load_mhrag, ranked_docs, recall_at, summarize, write_json
from contextrag.query.spread import hop, seed_activation


def run_variant(ds, B, C, MU, I, It, fw, lam, n_seeds, agg):
    per = []
    for qi in range(len(ds["questions"])):
        h = hybrid(B[qi], C[qi])
        r = np.clip(h / max(h.max(), 1e-9), 0, 1).astype(np.float32)
        mu = sp.hstack([MU[f][qi] * w for f, w in fw.items() if w > 0]).toarray().ravel()
        seeds = np.argpartition(-r, n_seeds - 1)[:n_seeds]
        g = hop(seed_activation(r, seeds, I, mu), It, n=r.size, agg=agg)
        per.append(recall_at(ranked_docs(r + lam * g, ds["doc"]), ds["gold"][qi]))
    return summarize(per, ds["types"])


if __name__ == "__main__":
    out = {}
    for ds in [load_hotpot(), load_mhrag("para"), load_mhrag("whole")]:
        B, C, ctx, MU, _ = prepare(ds, families=("title", "term"))
        rows = []
        for tw in (1.0, 0.9, 0.8):
            fw = {"title": 1.0, "term": tw}
            I, It = combined(ctx, fw)
            for agg in ("max", "sum"):
                for n_seeds in (3, 5):
                    for lam in (0.5, 1.0):
                        res = run_variant(ds, B, C, MU, I, It, fw, lam, n_seeds, agg)
                        rows.append(dict(families=fw, agg=agg, n_seeds=n_seeds, lam=lam, res=res))
                        print(ds["name"], tw, agg, n_seeds, lam,
                              [res["all"][f"recall@{k}"] for k in (2, 5, 10)],
                              {t: v["recall@5"] for t, v in res.items() if t != "all"}, flush=True)
        out[ds["name"]] = rows
    write_json("explore3", out)
