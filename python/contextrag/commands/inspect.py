"""`contextrag inspect DIR [--out graph.png]`: an index's statistics and, when asked for, a picture of
what retrieval walks (PNG or HTML: the chunk links through shared titles and terms beside the concept
graph, contextrag.index.picture) written where ``--out`` says. Nothing is written into the index
directory: a picture there would go stale at the next rebuild or sync."""
from __future__ import annotations

import json
from pathlib import Path


def add_arguments(p):
    p.add_argument("index", help="index directory")
    p.add_argument("--out", "--plot", dest="plot", metavar="PATH",
                   help="write the picture (chunk links and concept graph) to PATH (.png or .html); without it, "
                        "statistics only")
    p.add_argument("--no-plot", action="store_true", help="statistics only (the default without --out)")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")


def run(args) -> int:
    from contextrag import ContextRAG
    rag = ContextRAG.load(args.index, prepare=False)
    st = rag.stats()
    if args.json:
        print(json.dumps(st, indent=2, default=str))
    else:
        print(f"{args.index}: {st['docs']} docs, {st['chunks']} chunks, {st['items']} items "
              f"{st['items_by_kind']}, dim {st['dim']} ({st['embedding_model']}), "
              f"{st['bytes_on_disk']} bytes on disk")
        print("attribute families: " + ", ".join(f"{f['name']} ×{f['weight']}: {f['attributes']} "
                                                 f"({f['storage']}, density {f['density']:.3f})" for f in st["families"]))
        lex = st.get("lexical_families") or []
        print("lexical families (spreading): " + (", ".join(
            f"{f['name']}: {f['attributes']} attributes ({f['linking_attributes']} linking), {f['nnz']} non-zeros"
            for f in lex) if lex else "none stored"))
        ln = st.get("lexical_nodes") or {}
        print("lexical concept nodes (items): " + ", ".join(
            f"{k} {v['count']} (mean {v['mean_members']:.1f} chunks)" for k, v in ln.items()))
        print("RQ-KMeans occupancy (Table 4):")
        for o in st["occupancy"]:
            print(f"  L{o['level']}: {o['non_empty']}/{o['clusters']} clusters used, largest {o['largest_share']:.2f}, "
                  f"size entropy {o['size_entropy']:.2f}, mean max FCM membership {o['mean_max_membership']:.3f}")
        print("nodes: " + ", ".join(f"{k} {v['count']} (mean {v['mean_members']:.1f} chunks)"
                                    for k, v in st["nodes"].items()))
        print("edges: " + ", ".join(f"{k} {v}" for k, v in st["edges"].items()))
        print(f"LLM cost: {st['llm_cost'].get('total')}; graph tokens {st['graph_llm_tokens']}; "
              f"summaries: {st['summaries']}")
        print(f"drift: {st['drift']}")
    if args.plot and not args.no_plot:
        out = Path(args.plot)
        if out.suffix.lower() not in (".png", ".html"):
            raise ValueError(f"--out {args.plot}: the picture is written as .png or .html")
        from contextrag.index.picture import draw
        draw(rag.index, out)
        print(f"concept graph picture, beside the chunk links: {out}")
    elif not args.json and not args.no_plot:
        print("(--out graph.png or graph.html writes a picture of the chunk links and the concept graph)")
    return 0
