#!/usr/bin/env python
"""Second-slot variants tried for recall@2 and not kept (docs/MULTIHOP.md, "What was tried").

    python bench/multihop/second_slot.py [hotpotqa_500 | multihoprag_small ...]

"Pairing": once the default ranking is computed, its first chunk b is taken as certain (degree 1)
and every other chunk c is re-scored as r(c) + λ·(max(hop(c), link(b, c)) + res(c)), b kept first,
where link(b, ·) is one ``ops.spread_hop`` from b alone with degree 1 over
* "shared": the lexical families (a rare entity or term b and c share: 1 ⊗ I(b,a) ⊗ I(c,a));
* "named": the own pages of the titles b mentions (the named-title step from b, degree 1);
* "naming": the chunks that mention b's own title, crisply (1), where the title family gives w(title).
And two parameter-free ways to join the residual coverage to the hop instead of hop + ω·res: the
max, and the Łukasiewicz disjunction min(1, hop + res).
On the harness's cached ``Config()`` index of each set, with the eq. 13 parts of each question computed
once (its embedding shared by the variants); recall@k over the first k distinct documents of the top
20 chunk hits, as the harness counts it. Writes bench/results/multihop/eval_<set>/second_slot.json.
"""
from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_sets import RESULTS, SETS, data_file  # noqa: E402
from spread_variants import cpu_flags, cpu_model  # noqa: E402

MODES = {"default (no pairing)": (), "pairing: shared": ("shared",), "pairing: named": ("named",),
         "pairing: shared + named": ("shared", "named"), "pairing: naming": ("naming",),
         "pairing: shared + named + naming": ("shared", "named", "naming"),
         "residual joined by max(hop, res)": ("max",), "residual joined by min(1, hop + res)": ("luk",)}


def main(names) -> None:
    from contextrag import Config, __version__, ops
    from contextrag.eval import datasets
    from contextrag.eval.runner import IndexCache, _backend, default_cache_dir
    from contextrag.query import spread as SP
    from contextrag.query import view_of
    from contextrag.query.dense import embed_queries
    from contextrag.query.hybrid import base_parts, finish_parts, top_indices
    cfg = Config()
    for name in names:
        qa = datasets.load(str(data_file(name)), SETS[name][1])
        backend, bname = _backend()
        _, rag = IndexCache(default_cache_dir(), backend, bname, progress=False).get(cfg, qa, ["contextrag"])
        view = view_of(rag)
        texts = [q.text for q in qa.questions]
        Q = embed_queries(view, texts)
        parts = [base_parts(view, t, Q[i:i + 1], cfg) for i, t in enumerate(texts)]
        bases = [p["base"] for p in parts]
        st = SP.lexical_state(view, cfg.spread_families)
        T = st.ctx.families["title"].incidence.tocsr()
        M = T.astype(np.float32)
        M.data = ((M.data > 0) & (M.data < 1)).astype(np.float32)
        M.eliminate_zeros()
        M.resize((st.G.n, M.shape[1]))
        naming = ops.SpreadIncidence(M, np.concatenate([st.doc, -1 - np.arange(st.G.n - st.n_chunks)]))
        batch = SP._spread_batch(st, texts, bases, cfg, None)
        spread = SP.spread_many(view, texts, bases, cfg)
        kinds = np.asarray(view.kinds)
        out = {"dataset": name, "questions": len(texts), "variants": {},
               "machine": {"cpu": cpu_model(), "flags": cpu_flags(), "cpus": os.cpu_count(),
                           "load_average_start": round(os.getloadavg()[0], 2)},
               "versions": {"contextrag": __version__, "python": platform.python_version(), "numpy": np.__version__}}
        lam = float(cfg.w_spread)
        for vname, mode in MODES.items():
            rec = {2: [], 5: [], 10: []}
            for q, (qq, p) in enumerate(zip(qa.questions, parts)):
                b, g = spread[q]
                if mode and mode[0] in ("max", "luk"):
                    hop = batch[q][1]
                    res = (g - hop) / float(cfg.w_residual)        # the unweighted residual coverage
                    g = np.maximum(hop, res) if mode[0] == "max" else np.minimum(1.0, hop + res)
                    b = (batch[q][0] + lam * g).astype(np.float32)
                elif mode:
                    hop = batch[q][1]
                    res = g - hop
                    best = int(np.argmax(b[:st.n_chunks]))
                    link = np.zeros(st.G.n, np.float32)
                    one = np.ones((1, 1), np.float32)
                    if "shared" in mode:
                        link = np.maximum(link, ops.spread_hop(st.G, np.array([[best]]), one, None)[0])
                    if "named" in mode:
                        link = np.maximum(link, SP._named_title_step(st, [np.array([best])], [one[0]], None)[0])
                    if "naming" in mode:
                        a0, a1 = T.indptr[best], T.indptr[best + 1]
                        c = T.indices[a0:a1][T.data[a0:a1] >= 1]
                        act = sp.csr_matrix((np.ones(c.size, np.float32), (np.zeros(c.size, int), c)), shape=(1, T.shape[1]))
                        link = np.maximum(link, ops.spread_hop(naming, np.full((1, 1), -1), np.zeros((1, 1), np.float32), act)[0])
                    g = np.maximum(hop, link) + res
                    nb = batch[q][0] + lam * g
                    nb[best] = nb.max() + 1.0
                    b = nb.astype(np.float32)
                idx = top_indices(finish_parts(view, p, b, g, cfg)["score"], 20)
                docs = []
                for i in idx:
                    if kinds[i] == "chunk" and view.doc_ids[i] not in docs:
                        docs.append(view.doc_ids[i])
                gold = set(qq.gold_ids)
                for k in rec:
                    rec[k].append(len(gold & set(docs[:k])) / len(gold))
            out["variants"][vname] = {f"recall@{k}": round(100 * float(np.mean(v)), 2) for k, v in rec.items()}
            print(name, vname, out["variants"][vname], flush=True)
        out["machine"]["load_average_end"] = round(os.getloadavg()[0], 2)
        dest = RESULTS / f"eval_{name}" / "second_slot.json"
        tmp = dest.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
        os.replace(tmp, dest)


if __name__ == "__main__":
    main(sys.argv[1:] or list(SETS))
