"""A picture of the concept graph (``contextrag inspect``): nodes placed by a 2-D PCA of their
member chunks' mean embedding, coloured by kind, sized by member count; lattice edges dark,
co-occurrence edges faint. ``.html`` wraps the PNG with a table of the nodes."""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import numpy as np

from .graph import COOC, NODE_KINDS

COLORS = {"seed": "#1f77b4", "join": "#d62728", "meet": "#2ca02c"}


def _layout(ix) -> np.ndarray:
    g = ix.graph
    mem = g.members.astype(np.float32)
    cnt = np.maximum(np.asarray(mem.sum(axis=1)).ravel(), 1)
    C = np.asarray(mem @ ix.chunk_embeddings) / cnt[:, None]
    if len(C) < 2:
        return np.zeros((len(C), 2))
    C = C - C.mean(axis=0)
    _, _, Vt = np.linalg.svd(C, full_matrices=False)
    return C @ Vt[:2].T


def _png(ix, max_cooc: int = 2000) -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    g = ix.graph
    P = _layout(ix)
    size = np.diff(g.members.indptr)
    fig, ax = plt.subplots(figsize=(10, 8), dpi=110)
    cooc = np.flatnonzero(g.edge_kind == COOC)
    if len(cooc) > max_cooc:   # the strongest co-occurrence edges only, to keep the picture readable
        cooc = cooc[np.argsort(-g.edge_weight[cooc], kind="stable")[:max_cooc]]
    for e in cooc:
        s, d = g.edge_src[e], g.edge_dst[e]
        ax.plot(P[[s, d], 0], P[[s, d], 1], color="#bbbbbb", lw=0.3, alpha=0.4, zorder=1)
    for e in np.flatnonzero(g.edge_kind != COOC):
        s, d = g.edge_src[e], g.edge_dst[e]
        ax.plot(P[[s, d], 0], P[[s, d], 1], color="#444444", lw=0.8, alpha=0.7, zorder=2)
    for k, name in enumerate(NODE_KINDS):
        sel = g.kind == k
        if sel.any():
            ax.scatter(P[sel, 0], P[sel, 1], s=10 + 3 * np.sqrt(size[sel]) * 4, c=COLORS[name], label=f"{name} ({sel.sum()})",
                       alpha=0.8, edgecolors="white", linewidths=0.5, zorder=3)
    ax.set_title(f"concept graph: {g.n_nodes} nodes, {len(g.edge_src)} edges over {ix.n_chunks} chunks")
    ax.set_xticks([]), ax.set_yticks([])
    ax.legend(loc="best")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def draw(ix, out) -> Path:
    """Write the picture to ``out`` (.png or .html)."""
    out = Path(out)
    if out.suffix.lower() not in (".png", ".html", ".htm"):
        raise ValueError(f"out must end in .png or .html, got {str(out)!r}")
    png = _png(ix)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".png":
        out.write_bytes(png)
        return out
    g = ix.graph
    names = ix.context.attr_names
    rows = []
    for v in range(g.n_nodes):
        mem = g.members[v].indices
        titles = sorted({ix.chunk_titles[c] or ix.chunk_doc_ids[c] for c in mem[:50]})[:5]
        what = names[g.attr[v]] if g.attr[v] >= 0 else " · ".join(names[g.attr[p]] for p in g.parents[v])
        rows.append(f"<tr><td>{v}</td><td>{NODE_KINDS[g.kind[v]]}</td><td>{html.escape(what)}</td>"
                    f"<td>{len(mem)}</td><td>{html.escape('; '.join(titles))}</td></tr>")
    page = ("<!doctype html><meta charset='utf-8'><title>contextrag concept graph</title>"
            f"<img src='data:image/png;base64,{base64.b64encode(png).decode()}' style='max-width:100%'>"
            "<table border=1 cellspacing=0 cellpadding=3><tr><th>node</th><th>kind</th><th>attributes</th>"
            "<th>members</th><th>some member titles</th></tr>" + "".join(rows) + "</table>")
    out.write_text(page)
    return out
