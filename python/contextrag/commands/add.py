"""`contextrag add IDX PATHS...`: add documents (files, a folder, JSON/JSONL corpora) to an index
without rebuilding it. A document whose id is already in the index replaces it (an upsert), or is an
error with ``--no-replace``; either way never a duplicate.

File ids are paths relative to the index's source folder (the folder it was built from or last
synced with), so ``add idx corpus/products/gannet.md`` on an index of ``corpus`` gives the id
``products/gannet.md``, the one ``sync`` gives it; ``--root`` names another folder. A file outside
the source folder (or of an index that remembers none) gets its path relative to the current folder
when it lies inside it (``fa/notes.txt`` and ``fb/notes.txt`` stay two documents), else as
`contextrag index` names it. The report counts what the write did, decided under the
index's writer lock, so concurrent adds each report their own outcome."""
from __future__ import annotations

import json
from .index import add_corpus_arguments, ingest


def add_arguments(p):
    p.add_argument("index", help="index directory")
    p.add_argument("paths", nargs="+", help="files or folders to add (as `contextrag index` reads them)")
    p.add_argument("--no-replace", action="store_true", help="an id already in the index is an error "
                   "(default: the new document replaces it)")
    add_corpus_arguments(p, root_help="make document ids paths relative to this folder (default: the "
                         "index's source folder, the one it was built from or last synced with)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    from contextrag import ContextRAG
    from contextrag.rag import file_roots, source_root
    rag = ContextRAG.load(args.index, prepare=False)   # writes, no queries
    got = ingest(args.paths, args, file_roots=file_roots(rag.index) if args.root is None else ())
    root = args.root if args.root is not None else source_root(rag.index)
    there = sorted(d["id"] for d in got.docs if d["id"] in rag.index.docs)
    if there and args.no_replace:          # said before any work; the write checks again under its lock
        raise ValueError(f"{len(there)} of these documents are already in the index ({', '.join(there[:5])}"
                         f"{' …' if len(there) > 5 else ''}); without --no-replace they would be replaced")
    out = rag.add(got.docs, replace=not args.no_replace)
    result = {"added": out["added_ids"], "replaced": out["replaced_ids"],
              "skipped": [list(s) for s in got.skipped], "chunks_added": out["chunks"],
              "chunks_deleted": out["chunks_deleted"], "docs_in_index": len(rag.index.docs),
              "root": str(root) if root is not None else None}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"added {len(result['added'])}, replaced {len(result['replaced'])} documents "
              f"(+{out['chunks']} / -{out['chunks_deleted']} chunks); "
              f"{result['docs_in_index']} documents in {args.index}")
        for key in ("added", "replaced"):
            if result[key]:
                print(f"  {key}: " + ", ".join(result[key][:5]) + (" …" if len(result[key]) > 5 else ""))
    return 0
