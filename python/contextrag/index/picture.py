"""A picture of what retrieval walks (``contextrag inspect --out``), two panels side by side:

* **chunk links** (left): the links the query-time spreading follows. Chunks of different documents
  that share a rare title or term (lexical/nodes.py: w(a) > 1/2, held by chunks of at least two
  documents) are joined through a labelled square for that title or term; the attributes are taken
  titles first, each family's strongest link first, until about ``max_chunks`` chunks are shown (at most ``per_link`` chunks per
  attribute, those of highest degree), so the panel stays readable at 30 documents and at 5,000
  chunks. Chunks sit at a 2-D PCA of their embeddings and are coloured by document; the documents
  with the most chunks shown are labelled with their titles.
* **concept graph** (right): the RQ concept nodes (seed, join, meet) at a 2-D PCA of their members'
  mean embedding, sized by member count, lattice edges dark, co-occurrence edges faint, the largest
  nodes labelled with their attributes and the title most of their chunks share.

``.html`` wraps the PNG with a table of the concept nodes. matplotlib comes with ``contextrag[plot]``.
"""
from __future__ import annotations

import base64
import html
import io
import textwrap
from pathlib import Path

import numpy as np

from .graph import COOC, NODE_KINDS
from .deferred import settled

COLORS = {"seed": "#1f77b4", "join": "#d62728", "meet": "#2ca02c"}
FAMILY_COLORS = {"title": "#1f77b4", "term": "#ff7f0e", "phrase": "#9467bd"}


def _pca2(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, np.float64)
    if len(X) < 2:
        return np.zeros((len(X), 2))
    X = X - X.mean(axis=0)
    _, _, Vt = np.linalg.svd(X, full_matrices=False)
    P = X @ Vt[:2].T
    return P if P.shape[1] == 2 else np.hstack([P, np.zeros((len(P), 2 - P.shape[1]))])


def _lexical(ix):
    """The index's lexical families (title, term), or built from its chunk texts when it stores none."""
    lex = getattr(ix, "lexical", None)
    if lex is not None and getattr(lex, "families", None):
        return lex
    from .lexical.families import LexicalContext
    return LexicalContext.build(list(ix.chunk_titles), list(ix.chunk_texts), families=("title", "term"))


def chunk_links(ix, max_chunks: int = 240, per_link: int = 8, max_links: int = 60) -> dict:
    """The sample the left panel draws: {"chunks": sorted chunk indices, "links": [(label, family,
    [chunk indices])], "linking": the index's linking titles and terms (rare, of two documents or more)}."""
    from .lexical.nodes import select_lexical_nodes
    n = ix.n_chunks
    if n == 0:
        return {"chunks": np.zeros(0, np.int64), "links": [], "linking": 0}
    nodes = select_lexical_nodes(_lexical(ix), ix.chunk_doc_ids, n_join=2**31 - 1, n_meet=0)
    rank = {"title": 0, "phrase": 1}          # entities before terms, each in link-strength order
    nodes = sorted(nodes, key=lambda nd: rank.get(nd.attributes[0].partition(":")[0], 2))
    chosen: dict[int, None] = {}
    links = []
    for nd in nodes:
        if len(links) >= max_links or len(chosen) >= max_chunks:
            break
        order = np.argsort(-nd.degrees, kind="stable")[:per_link]
        members = [int(nd.members[i]) for i in order]
        if len({ix.chunk_doc_ids[c] for c in members}) < 2:
            continue                     # the cross-document link lies beyond the chunks shown
        family, _, name = nd.attributes[0].partition(":")
        links.append((name, family, members))
        chosen.update(dict.fromkeys(members))
    return {"chunks": np.array(sorted(chosen), dtype=np.int64), "links": links,
            "linking": sum(len(nd.attributes) for nd in nodes)}


def _short(text: str, width: int = 22) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + "…"


def _draw_links(ax, ix, sample: dict, n_doc_labels: int = 14) -> None:
    import matplotlib.pyplot as plt
    chunks = sample["chunks"]
    if not len(chunks):
        ax.text(0.5, 0.5, "no chunks of different documents share a rare title or term",
                ha="center", va="center", transform=ax.transAxes)
        ax.set_xticks([]), ax.set_yticks([])
        return
    P = _pca2(np.asarray(ix.chunk_embeddings[chunks]))
    span = np.ptp(P, axis=0)
    P = P / np.where(span > 0, span, 1.0)
    where = {int(c): i for i, c in enumerate(chunks)}
    docs = [ix.chunk_doc_ids[int(c)] for c in chunks]
    order = list(dict.fromkeys(docs))
    cmap = plt.get_cmap("tab20")
    colour = {d: cmap(i % 20) for i, d in enumerate(order)}
    for family in dict.fromkeys(f for _, f, _ in sample["links"]):
        ax.plot([], [], color=FAMILY_COLORS.get(family, "#7f7f7f"), lw=1.2, label=f"shared {family}")
    ranked = []
    for label, family, members in sample["links"]:
        pts = P[[where[c] for c in members]]
        hub = pts.mean(axis=0)
        col = FAMILY_COLORS.get(family, "#7f7f7f")
        for p in pts:
            ax.plot([hub[0], p[0]], [hub[1], p[1]], color=col, lw=0.7, alpha=0.55, zorder=1)
        ax.scatter([hub[0]], [hub[1]], marker="s", s=16, c=col, zorder=3, edgecolors="none")
        ranked.append((hub, label, col))
    for hub, label, col in ranked[:24]:      # the strongest links named; the rest drawn unnamed
        ax.annotate(_short(label), hub, xytext=(3, 3), textcoords="offset points", fontsize=7, color=col,
                    zorder=5, bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.7))
    ax.scatter(P[:, 0], P[:, 1], s=22, c=[colour[d] for d in docs], edgecolors="#333333", linewidths=0.3,
               zorder=4)
    counts = {d: docs.count(d) for d in order}
    for d in sorted(order, key=lambda d: -counts[d])[:n_doc_labels]:
        sel = np.array([x == d for x in docs])
        c0 = P[sel].mean(axis=0)
        title = ix.docs.get(d, {}).get("title") or d
        ax.annotate(_short(title, 26), c0, xytext=(0, -9), textcoords="offset points", fontsize=6.5,
                    ha="center", color="#222222", style="italic", zorder=5)
    ax.set_title(textwrap.fill(
        f"chunk links the spreading follows: {len(sample['links'])} of {sample['linking']} linking titles/terms, "
        f"{len(chunks)} of {ix.n_chunks} chunks, {len(order)} of {len(ix.docs)} documents", 70), fontsize=9)
    ax.legend(loc="best", fontsize=7, title="dot colour: document", title_fontsize=7)
    ax.set_xticks([]), ax.set_yticks([])


def _node_label(ix, v: int) -> str:
    g = ix.graph
    names = ix.context.attr_names
    if g.attr[v] >= 0:
        return names[g.attr[v]]
    return " · ".join(names[g.attr[p]] for p in g.parents[v] if g.attr[p] >= 0)


def _member_title(ix, v: int) -> str:
    """The title most of a node's member chunks share (a name for a topic cluster)."""
    titles = [ix.chunk_titles[c] or ix.chunk_doc_ids[c] for c in ix.graph.members[v].indices[:400]]
    return max(set(titles), key=titles.count) if titles else ""


def _draw_concepts(ax, ix, max_cooc: int = 800, n_labels: int = 16) -> None:
    g = ix.graph
    mem = g.members.astype(np.float32)
    cnt = np.maximum(np.asarray(mem.sum(axis=1)).ravel(), 1)
    P = _pca2(np.asarray(mem @ settled(ix.chunk_embeddings)) / cnt[:, None]) if g.n_nodes else np.zeros((0, 2))
    size = np.diff(g.members.indptr)
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
            ax.scatter(P[sel, 0], P[sel, 1], s=12 + 12 * np.sqrt(size[sel]), c=COLORS[name],
                       label=f"{name} ({sel.sum()})", alpha=0.8, edgecolors="white", linewidths=0.5, zorder=3)
    span = float(np.ptp(P, axis=0).max()) if len(P) else 0.0
    placed: list = []
    for v in np.argsort(-size, kind="stable"):      # the largest nodes, skipping one too near a named one
        if len(placed) >= n_labels:
            break
        if any(np.hypot(*(P[v] - P[u])) < 0.06 * span for u in placed):
            continue
        placed.append(v)
        ax.annotate(f"{_short(_node_label(ix, int(v)), 14)}: {_short(_member_title(ix, int(v)), 20)} ({size[v]})",
                    P[v], xytext=(3, 3), textcoords="offset points", fontsize=6.5, color="#222222", zorder=5,
                    bbox=dict(boxstyle="round,pad=0.1", fc="white", ec="none", alpha=0.7))
    ax.set_title(textwrap.fill(f"concept graph: {g.n_nodes} nodes, {len(g.edge_src)} edges over "
                               f"{ix.n_chunks} chunks (labels: attribute: the commonest member title (member chunks))", 70), fontsize=9)
    ax.set_xticks([]), ax.set_yticks([])
    if g.n_nodes:
        ax.legend(loc="lower right", fontsize=7)
    if g.n_nodes < 5:
        ax.text(0.5, 0.06, textwrap.fill(
            f"{g.n_nodes} concept node{'' if g.n_nodes == 1 else 's'}: RQ codebooks of a small corpus are clamped to "
            "its chunk count, so the topic graph is coarse; retrieval across documents rests on the chunk links "
            "at left", 80), ha="center", va="bottom", fontsize=7.5, color="#555555", transform=ax.transAxes)


def _png(ix, dpi: int = 80) -> bytes:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(16, 8), dpi=dpi, gridspec_kw={"width_ratios": [1.25, 1]})
    _draw_links(left, ix, chunk_links(ix))
    _draw_concepts(right, ix)
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
    rows = []
    for v in range(g.n_nodes):
        mem = g.members[v].indices
        titles = sorted({ix.chunk_titles[c] or ix.chunk_doc_ids[c] for c in mem[:50]})[:5]
        rows.append(f"<tr><td>{v}</td><td>{NODE_KINDS[g.kind[v]]}</td><td>{html.escape(_node_label(ix, v))}</td>"
                    f"<td>{len(mem)}</td><td>{html.escape('; '.join(titles))}</td></tr>")
    page = ("<!doctype html><meta charset='utf-8'><title>contextrag concept graph</title>"
            f"<img src='data:image/png;base64,{base64.b64encode(png).decode()}' style='max-width:100%'>"
            "<table border=1 cellspacing=0 cellpadding=3><tr><th>node</th><th>kind</th><th>attributes</th>"
            "<th>members</th><th>some member titles</th></tr>" + "".join(rows) + "</table>")
    out.write_text(page)
    return out
