"""`contextrag sync IDX FOLDER`: make an index match a folder: add new files, re-read changed ones
(by the sha256 of their bytes), delete the documents of removed files; report what changed. An
unchanged folder leaves the index untouched (no new snapshot). Document ids are paths relative to
FOLDER, as `contextrag index FOLDER` gives them; without FOLDER, the index's source folder (the one
it was built from or last synced with)."""
from __future__ import annotations

import json


def add_arguments(p):
    p.add_argument("index", help="index directory")
    p.add_argument("folder", nargs="?", help="the folder the index mirrors (default: its source folder)")
    p.add_argument("--strict", action="store_true", help="an unreadable file is an error (default: skipped "
                   "with a warning; a changed file that no longer reads keeps its indexed version)")
    p.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def _names(ids, n=5):
    return ", ".join(ids[:n]) + (" …" if len(ids) > n else "")


def run(args) -> int:
    from contextrag import ContextRAG
    rag = ContextRAG.load(args.index, prepare=False)   # writes, no queries
    rep = rag.sync_folder(args.folder, strict=args.strict, dry_run=args.dry_run)
    n = len(rep["added"]) + len(rep["changed"]) + len(rep["deleted"])
    rep["changes"] = n
    if args.json:
        print(json.dumps(rep, indent=2))
        return 0
    print(f"{n} changes{' (dry run: nothing written)' if args.dry_run else ''}: {len(rep['added'])} added, "
          f"{len(rep['changed'])} changed, {len(rep['deleted'])} deleted; {rep['unchanged']} unchanged"
          + (f"; {len(rep['skipped'])} unreadable skipped" if rep["skipped"] else ""))
    for key in ("added", "changed", "deleted"):
        if rep[key]:
            print(f"  {key}: {_names(rep[key])}")
    if not n:
        print(f"{args.index} left as it was")
    return 0
