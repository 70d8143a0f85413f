"""The served index and its one writer.

Readers take the current ContextRAG (one attribute read: the old or the new index, whole). Writes
from any number of requests go into one queue; a single writer thread takes everything pending,
applies it to a private copy of the index (consecutive adds as one ``add``, consecutive deletes as
one ``delete``: one save each; each copies the index as the library's writes do), and swaps the copy
in, its query state built. Each request waits for its own outcome: the ids it added or deleted, or
the error that refused its part of the batch."""
from __future__ import annotations

import copy
import threading
import uuid

from ..rag import release_later


class NotInIndex(LookupError):
    """A delete named a document the index does not hold."""


class _Job:
    __slots__ = ("kind", "docs", "ids", "done", "result", "error")

    def __init__(self, kind, docs=None, ids=None):
        self.kind, self.docs, self.ids = kind, docs, ids
        self.done = threading.Event()
        self.result = self.error = None

    def finish(self, result=None, error=None):
        self.result, self.error = result, error
        self.done.set()


def new_doc_id() -> str:
    """An id for a posted document that has none: random, so an id is never handed out twice (a
    counter over the documents present would give a deleted document's id to the next one)."""
    return f"doc-{uuid.uuid4().hex[:16]}"


class IndexHolder:
    def __init__(self, rag):
        self._rag = rag
        self.generation = 0          # bumped by every applied batch of writes (GET /health reports it)
        self._cv = threading.Condition()
        self._pending: list[_Job] = []
        self._writer: threading.Thread | None = None
        self.batches = 0             # batches applied (a batch holds every write pending when it starts)

    @property
    def rag(self):
        return self._rag

    # ---- the requests' side
    def add(self, docs: list[dict]) -> dict:
        """Queue documents (dicts; one without an id gets a fresh one) and wait until they are in the
        index and saved. Returns {"ids": [...], ...the batch's add summary}."""
        docs = [d if d.get("id") is not None else {**d, "id": new_doc_id()} for d in docs]
        return self._submit(_Job("add", docs=docs))

    def delete(self, ids: list[str]) -> dict:
        """Queue a delete and wait for it. NotInIndex when an id is not in the index."""
        return self._submit(_Job("delete", ids=[str(i) for i in ids]))

    def _submit(self, job: _Job):
        with self._cv:
            self._pending.append(job)
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(target=self._run, name="contextrag-index-writer", daemon=True)
                self._writer.start()
            self._cv.notify()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.result

    # ---- the writer
    def _run(self):
        while True:
            with self._cv:
                if not self._pending:
                    self._writer = None          # the next submit starts a new writer
                    return
                batch, self._pending = self._pending, []
            try:
                self._apply(batch)
            except BaseException as e:  # noqa: BLE001 - every waiting request hears of it
                for j in batch:
                    if not j.done.is_set():
                        j.finish(error=e)

    def _copy(self):
        """The served object, not its index: each of its writes copies the index itself
        (``ContextRAG._write``: the copy shares what an update replaces and never changes in place, so
        memory-mapped arrays stay mapped), changes and saves the copy, readies it for queries and only
        then holds it; the served object and its index stay as they are. Its settings carry over."""
        return copy.copy(self._rag)

    def _apply(self, batch: list[_Job]):
        new = self._copy()
        changed = False
        i = 0
        while i < len(batch):                   # runs of the same kind, in arrival order
            j = i
            while j < len(batch) and batch[j].kind == batch[i].kind:
                j += 1
            run = batch[i:j]
            changed |= (self._adds if run[0].kind == "add" else self._deletes)(new, run)
            i = j
        retired = []
        if changed:
            retired.append(self._rag)
            self._rag = new
            self.generation += 1
        self.batches += 1
        for job in batch:
            job.done.set()
        release_later(retired)     # the replaced object, and with it its index once no query reads it

    @staticmethod
    def _adds(new, jobs) -> bool:
        """One add for the run; jobs whose ids clash (with the index or an earlier job) are refused
        first. Should the joint add fail, each job is tried alone, so one bad document fails only
        its own request."""
        seen = set(new.index.docs)
        ok = []
        for job in jobs:
            ids = [str(d["id"]) for d in job.docs]
            clash = [d for d in ids if d in seen]
            if clash or len(set(ids)) < len(ids):
                job.error = ValueError(f"docs: ids already in the index: {clash[:5] or ids[:5]}")
                continue
            seen.update(ids)
            ok.append(job)
        if not ok:
            return False
        try:
            out = new.add([d for job in ok for d in job.docs])
        except (ValueError, TypeError) as e:
            if len(ok) == 1:
                ok[0].error = e
                return False
            changed = False
            for job in ok:
                try:
                    job.result = {"ids": [str(d["id"]) for d in job.docs], **new.add(job.docs)}
                    changed = True
                except (ValueError, TypeError) as e:
                    job.error = e
            return changed
        for job in ok:
            job.result = {"ids": [str(d["id"]) for d in job.docs], **out, "docs": len(job.docs),
                          "batch_docs": out.get("docs")}
        return True

    @staticmethod
    def _deletes(new, jobs) -> bool:
        ok, ids, gone = [], [], set()
        for job in jobs:
            missing = [d for d in job.ids if d not in new.index.docs or d in gone]
            if missing:
                job.error = NotInIndex(f"no document {missing[0]!r} in the index")
                continue
            gone.update(job.ids)
            ids.extend(job.ids)
            ok.append(job)
        if not ok:
            return False
        out = new.delete(ids)
        for job in ok:
            job.result = {"ids": list(job.ids), **out}
        return True


class Served:
    """What the routers share: the index holder, the LLM (or None), the auth dependencies."""

    def __init__(self, *, holder: IndexHolder, llm, guarded: list, version: str, llm_gate=None):
        self.holder, self.llm, self.guarded, self.version = holder, llm, guarded, version
        self.llm_gate = llm_gate
