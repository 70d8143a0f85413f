"""Why an item came back: the provenance of its score, for people reading results (the web page,
``retrieve(..., explain=True)``).

For every hit, ``Hit.explain`` gets

* ``relevance``: the eq. 13 score over its per-query maximum (the item's own relevance, r);
* ``seed``: True when the item is one of the chunks the spreading started from;
* ``hop``: the spreading term of query/spread.py (``parts["spread"]``), and when it is > 0, ``via``:
  ``"seed"`` with ``from`` (the seed passage) and ``attribute`` (the lexical attribute both share,
  its family and the two incidence degrees), or ``"question"`` when the attribute is one the question
  itself mentions. The strongest such path is the one reported: the hop is a max over paths (over
  the seeds of every spreading step), so the reported path gives the hop's value, plus
* ``residual``: the part of ``hop`` that is the item's residual coverage of the question (its terms
  the best chunk lacks, ``spread.residual_coverage``).

:func:`neighbourhood` turns explained hits into a small graph (question → seed → attribute → passage)
for drawing. The explanation re-runs the spreading's own seed choice (``spread.spread_trace``), so it
describes the computation that scored the item rather than a separate heuristic.
"""
from __future__ import annotations

import numpy as np

from .hybrid import score_all
from .spread import self_path_excluded, spread_trace


def _columns(st) -> list[tuple[str, str]]:
    cols = getattr(st, "_columns", None)
    if cols is None:
        cols = [(f, a) for f in st.ctx.names(st.weights) for a in st.ctx.families[f].attributes]
        st._columns = cols
    return cols


def _row(I, i):
    a, b = I.indptr[i], I.indptr[i + 1]
    return I.indices[a:b], I.data[a:b]


def _title_span(st):
    """[start, end) of the title family's columns in the spreading incidence, or None."""
    off = 0
    for name in st.ctx.names(st.weights):
        n = len(st.ctx.families[name].vocab)
        if name == "title":
            return off, off + n
        off += n
    return None


def _best_path(c: int, st, seeds, rho, mu, doc, named: bool = False, no_self=frozenset()):
    """(hop, via, seed index or None, column, seed degree, item degree) of the strongest path into c.
    ``named``: a seed that mentions the title of c's own page reaches it with the seed's degree
    (``Config.spread_mentions``). ``no_self``: seeds whose path to themselves does not count (the
    relevance seeds, unless ``Config.spread_self``)."""
    best = (0.0, None, None, -1, 0.0, 0.0)
    if c >= st.I.shape[0]:
        return best
    cols_c, vals_c = _row(st.I, c)
    if cols_c.size == 0:
        return best
    if mu is not None and mu.size:
        v = mu[cols_c] + vals_c - 1.0
        j = int(np.argmax(v))
        if v[j] > best[0]:
            best = (float(v[j]), "question", None, int(cols_c[j]), float(mu[cols_c[j]]), float(vals_c[j]))
    for s in seeds:
        s = int(s)
        if (s != c and doc[s] == doc[c]) or (s == c and s in no_self):
            continue          # no path from a seed to its sibling chunks (ops.spread_hop), nor to itself
        cols_s, vals_s = _row(st.I, s)
        common, ia, ib = np.intersect1d(cols_s, cols_c, assume_unique=True, return_indices=True)
        if common.size == 0:
            continue
        v = rho[s] + vals_s[ia] + vals_c[ib] - 2.0
        span = _title_span(st) if named else None
        if span is not None:
            crisp = (common >= span[0]) & (common < span[1]) & (vals_s[ia] < 1.0) & (vals_c[ib] >= 1.0)
            v = np.where(crisp, np.maximum(v, rho[s]), v)
        j = int(np.argmax(v))
        if v[j] > best[0]:
            best = (float(v[j]), "seed", s, int(common[j]), float(vals_s[ia[j]]), float(vals_c[ib[j]]))
    return best


def explain_hits(view, question: str, hits, cfg, mask=None, parts: dict | None = None):
    """Set ``h.explain`` on every hit (see the module docstring); returns the hits."""
    if parts is None:
        from .dense import embed_queries
        parts = score_all(view, question, embed_queries(view, [question]), cfg, mask)
    eq13 = parts.get("eq13")
    tr = spread_trace(view, question, eq13, cfg, mask) if eq13 is not None and cfg.w_spread else None
    pos = {x: i for i, x in enumerate(view.ids)}
    if tr is not None:
        st, seeds, rho, mu, doc, r, res = tr
        seed_set = {int(s) for s in seeds}
        no_self = frozenset() if cfg.spread_self else self_path_excluded(st, question, eq13, cfg, mask)
        cols = _columns(st)
    else:
        finite = np.isfinite(eq13) if eq13 is not None else None
        mx = float(eq13[finite].max()) if finite is not None and finite.any() else 0.0
        r = np.clip(eq13 / mx, 0, 1) if mx > 0 else None
    for h in hits:
        i = pos.get(h.id)
        if i is None:
            raise ValueError(f"hits: item {h.id!r} is not in this index")
        e = {"relevance": float(r[i]) if r is not None else None, "seed": False, "hop": 0.0, "via": None}
        if tr is not None:
            e["seed"] = i in seed_set
            if e["seed"]:
                e["seed_degree"] = float(rho[i])
            hop, via, s, col, d_from, d_to = _best_path(i, st, seeds, rho, mu, doc, bool(cfg.spread_mentions), no_self)
            e["residual"] = float(res[i])      # the question's terms the best chunk lacks, held here
            e["hop"] = hop + e["residual"]
            if via is not None:
                fam, name = cols[col]
                e["via"] = via
                e["attribute"] = {"name": name, "family": fam, "from_degree": d_from, "degree": d_to}
                if s is not None:
                    e["from"] = {"id": view.ids[s], "doc_id": view.doc_ids[s], "degree": float(rho[s])}
        h.explain = e
    return hits


def neighbourhood(hits) -> dict:
    """The graph that connected explained hits: nodes (question, seed/passage items, attributes) and
    edges question→seed (seed degree), seed→attribute and attribute→passage (incidence degrees),
    question→attribute (the question's own mention). Items are numbered as the hits are (1-based)."""
    nodes = {"q": {"id": "q", "kind": "question", "label": "question"}}
    edges = []
    rank = {h.id: n for n, h in enumerate(hits, 1)}

    def item(iid, doc_id, seed):
        key = f"item:{iid}"
        if key not in nodes:
            nodes[key] = {"id": key, "kind": "seed" if seed else "passage", "item": iid, "doc_id": doc_id,
                          "rank": rank.get(iid)}
        elif seed:
            nodes[key]["kind"] = "seed"
        return key

    def edge(a, b, w, label):
        if not any(e["source"] == a and e["target"] == b for e in edges):
            edges.append({"source": a, "target": b, "weight": float(w), "label": label})

    for h in hits:
        e = h.explain or {}
        if e.get("seed"):
            edge("q", item(h.id, h.doc_id, True), e.get("seed_degree", 0.0), "seed")
    for h in hits:
        e = h.explain or {}
        if not e.get("via") or e["via"] == "seed" and e["from"]["id"] == h.id:
            continue          # no hop, or a seed's hop through its own attribute: nothing to draw
        a = e["attribute"]
        akey = f"attr:{a['family']}:{a['name']}"
        nodes.setdefault(akey, {"id": akey, "kind": "attribute", "label": a["name"], "family": a["family"]})
        if e["via"] == "seed":
            src = e["from"]
            edge("q", item(src["id"], src["doc_id"], True), src["degree"], "seed")
            edge(f"item:{src['id']}", akey, a["from_degree"], "has")
        else:
            edge("q", akey, a["from_degree"], "mentions")
        edge(akey, item(h.id, h.doc_id, bool(e.get("seed"))), a["degree"], "hop")
    return {"nodes": list(nodes.values()), "edges": edges}
