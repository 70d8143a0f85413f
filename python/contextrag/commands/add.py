"""`contextrag add IDX PATHS...`: add documents (files, a folder, JSON/JSONL corpora) to an index
without rebuilding it. A document whose id is already in the index replaces it (an upsert), or is an
error with ``--no-replace``; either way never a duplicate."""
from __future__ import annotations

import json

from .index import add_corpus_arguments, ingest


def add_arguments(p):
    p.add_argument("index", help="index directory")
    p.add_argument("paths", nargs="+", help="files or folders to add (as `contextrag index` reads them)")
    p.add_argument("--no-replace", action="store_true", help="an id already in the index is an error "
                   "(default: the new document replaces it)")
    add_corpus_arguments(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    from contextrag import ContextRAG
    rag = ContextRAG.load(args.index)
    got = ingest(args.paths, args)
    there = sorted(d["id"] for d in got.docs if d["id"] in rag.index.docs)
    if there and args.no_replace:
        raise ValueError(f"{len(there)} of these documents are already in the index ({', '.join(there[:5])}"
                         f"{' …' if len(there) > 5 else ''}); without --no-replace they would be replaced")
    out = rag.add(got.docs, replace=not args.no_replace)
    result = {"added": [d["id"] for d in got.docs if d["id"] not in there], "replaced": there,
              "skipped": [list(s) for s in got.skipped], "chunks_added": out["chunks"],
              "chunks_deleted": out["chunks_deleted"], "docs_in_index": len(rag.index.docs)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"added {len(result['added'])}, replaced {len(there)} documents "
              f"(+{out['chunks']} / -{out['chunks_deleted']} chunks); "
              f"{result['docs_in_index']} documents in {args.index}")
    return 0
