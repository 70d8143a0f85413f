"""Replacing documents and keeping an index in step with a folder (``ContextRAG.add(replace=True)``,
``ContextRAG.sync_folder``, ``contextrag add | delete | sync``).

* :func:`replace_docs`: delete some documents and add others in one change (one snapshot). When the
  change leaves none of the old documents, the index is built afresh from the new ones (the
  incremental path needs at least one old chunk to keep its codebooks).
* :func:`plan_folder`: which of a folder's files are new, changed or gone, against an index. A file
  is *changed* when the sha256 of its bytes differs from the ``sha256`` its document recorded when
  it was read (contextrag.ingest); a touched file with the same bytes is unchanged, a renamed file
  is a deletion plus an addition. The index's *file documents* are those whose id equals their
  ``source`` and that carry a ``sha256``; only they are deleted when their file is gone.
  New and changed files are read while planning, outside the writer lock. A changed file that no
  longer reads (now encrypted, say) is skipped with a warning and its indexed version is kept.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from ..textfile import TextFileWarning


def replace_docs(ix, docs: list, delete_ids, *, llm=None) -> dict:
    """Delete ``delete_ids`` (and any document that ``docs`` re-adds), then add ``docs``. Returns
    add_docs' {"docs", "chunks", "affected_nodes", "timings"} for the added documents, plus
    {"deleted": n, "replaced": n, "chunks_deleted": n, "rebuilt": bool}."""
    from .build import add_docs, build_index, delete_docs
    new_ids = {d.doc_id for d in docs}
    drop = {str(d) for d in delete_ids} | (new_ids & set(ix.docs))
    missing = sorted(drop - set(ix.docs))
    if missing:
        raise ValueError(f"doc_ids not in the index: {missing[:5]}")
    keep = [d for d in ix.docs if d not in drop]
    out = {"docs": len(docs), "chunks": 0, "affected_nodes": 0, "timings": {},
           "deleted": len(drop - new_ids), "replaced": len(drop & new_ids), "chunks_deleted": 0, "rebuilt": False}
    if not keep:
        if not docs:
            raise ValueError("this change would delete every document; build a new index instead")
        fresh = build_index(docs, ix.config, ix.embedder, llm)
        if llm is None:
            fresh.ledger = ix.ledger          # no new index-time LLM calls: the record so far stands
        fresh.info["updates"] = ix.info.get("updates", []) + [{"op": "rebuild", "docs": len(docs),
                                                               "reason": "every document was replaced"}]
        out["chunks_deleted"] = ix.n_chunks
        vars(ix).update(vars(fresh))          # the same Index object, every field from the fresh build
        out.update(chunks=ix.n_chunks, affected_nodes=int(ix.graph.n_nodes), timings=dict(ix.timings),
                   rebuilt=True)
        return out
    if drop:
        out["chunks_deleted"] = delete_docs(ix, drop)["chunks"]
    if docs:
        added = add_docs(ix, docs)
        out.update(chunks=added["chunks"], affected_nodes=added["affected_nodes"], timings=added["timings"])
    return out


def file_documents(ix) -> dict[str, str]:
    """{doc_id: sha256} of the index's documents that were read from files (see the module docstring)."""
    out = {}
    for d, info in ix.docs.items():
        meta = (info or {}).get("metadata") or {}
        if meta.get("source") == d and isinstance(meta.get("sha256"), str):
            out[d] = meta["sha256"]
    return out


@dataclass
class FolderPlan:
    added: list = field(default_factory=list)      # documents (dicts) of new files
    changed: list = field(default_factory=list)    # documents (dicts) of changed files
    deleted: list = field(default_factory=list)    # ids whose file is gone
    unchanged: int = 0
    skipped: list = field(default_factory=list)    # (id, reason)
    ignored: int = 0

    @property
    def n_changes(self) -> int:
        return len(self.added) + len(self.changed) + len(self.deleted)

    def report(self) -> dict:
        return {"added": [d["id"] for d in self.added], "changed": [d["id"] for d in self.changed],
                "deleted": list(self.deleted), "unchanged": self.unchanged,
                "skipped": [list(s) for s in self.skipped], "ignored": self.ignored, "written": False}


def plan_folder(ix, folder, *, strict: bool = False) -> FolderPlan:
    """What :func:`apply_plan` must do to make ``ix`` match ``folder`` (see the module docstring)."""
    from pathlib import Path

    from ..ingest import Unreadable, list_files, read_source, sha256_hex
    from ..ingest.files import read_file_bytes
    from ..textfile import shown_name
    from ..ingest.base import skipped_summary
    if not Path(folder).is_dir():
        raise NotADirectoryError(f"sync needs a folder, got {str(folder)!r}")
    listing = list_files([folder])
    plan = FolderPlan(ignored=listing.ignored)
    indexed = file_documents(ix)
    said = []
    for src in listing.sources:
        try:
            data = read_file_bytes(src.path)     # regular files only, bounded
        except Unreadable as e:
            data, reason = None, str(e)
        if data is not None:
            h = sha256_hex(data)
            if indexed.get(src.doc_id) == h:
                plan.unchanged += 1
                continue
            try:
                doc = read_source(src, data)
                (plan.changed if src.doc_id in ix.docs else plan.added).append(doc)
                continue
            except Unreadable as e:
                reason = str(e)
        name = shown_name(src.doc_id)
        if strict:
            raise ValueError(f"corpus file {name} is unreadable: {reason} (--strict)")
        kept = " (its indexed version is kept)" if src.doc_id in ix.docs else ""
        plan.skipped.append((name, reason))
        said.append((name, reason + kept))
    if said:       # one warning for them all (contextrag.ingest.base.skipped_summary)
        warnings.warn(f"sync: {skipped_summary(said, len(listing.sources))}", TextFileWarning, stacklevel=2)
    present = {s.doc_id for s in listing.sources}
    plan.deleted = [d for d in indexed if d not in present]
    return plan


def apply_plan(ix, plan: FolderPlan, *, llm=None) -> dict:
    """Apply a :func:`plan_folder` plan to ``ix`` in one change. Documents already as planned (another
    writer synced meanwhile) are left as they are."""
    from .chunking import normalize_docs
    now = file_documents(ix)
    docs = [d for d in plan.added + plan.changed if now.get(d["id"]) != d["metadata"]["sha256"]]
    gone = [d for d in plan.deleted if d in ix.docs]
    return replace_docs(ix, normalize_docs(docs) if docs else [], gone, llm=llm)
