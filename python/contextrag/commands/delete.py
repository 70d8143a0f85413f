"""`contextrag delete IDX IDS...`: remove documents from an index by id (for files: their path
relative to the folder they were indexed from)."""
from __future__ import annotations

import json


def add_arguments(p):
    p.add_argument("index", help="index directory")
    p.add_argument("ids", nargs="+", help="document ids to remove")
    p.add_argument("--missing-ok", action="store_true", help="ignore ids that are not in the index")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args) -> int:
    from contextrag import ContextRAG
    rag = ContextRAG.load(args.index, prepare=False)   # writes, no queries
    ids = list(dict.fromkeys(args.ids))
    missing = [d for d in ids if d not in rag.index.docs]
    if missing and not args.missing_ok:
        raise ValueError(f"not in the index: {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''} "
                         "(--missing-ok ignores them)")
    ids = [d for d in ids if d not in missing]
    out = rag.delete(ids) if ids else {"docs": 0, "chunks": 0}
    result = {"deleted": ids, "missing": missing, "chunks_deleted": out["chunks"],
              "docs_in_index": len(rag.index.docs)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"deleted {len(ids)} documents ({out['chunks']} chunks); {result['docs_in_index']} documents "
              f"in {args.index}")
    return 0
