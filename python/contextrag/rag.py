"""``ContextRAG``: build, load, update and query an extraction-free graph RAG index.

    rag = ContextRAG.build(docs, path="idx", config=Config(...), llm=None)
    rag = ContextRAG.load("idx")
    rag.add(more_docs); rag.delete(["doc3"]); rag.stats(); rag.rebuild()
    hits = rag.retrieve("question", k=12, filter={"year": {"$gte": 2020}})   # contextrag.query.retrieve
    many = rag.retrieve_many(["q1", "q2"], k=12) # batched: one embedding call, one spreading hop
    ans = rag.answer("question", llm=client, style="paragraph")   # contextrag.query.answer; styles:
                                                 # short, paragraph ([n] citations), extractive
    for x in rag.answer_stream("question"): ...  # text deltas, then the Answer

``docs``: an iterable of str or dict(id, text, title=..., metadata=..., segments=...); a document id
is any non-empty string. Or files: a folder or file path (str or os.PathLike), or a list of
os.PathLike, read by contextrag.ingest (PDF, HTML, Markdown, DOCX, text, JSON/JSONL; unreadable files
skipped with a warning, or a ValueError with ``strict=True``):

    rag = ContextRAG.build("reports/", path="idx")      # ids: paths relative to reports/
    rag.add([Path("reports/q3.pdf")], replace=True)    # upsert: id "q3.pdf", relative to reports/
    report = rag.sync_folder("reports/")               # added / changed / deleted, by content hash

The index remembers the folder its file ids are relative to (``root``, or the one folder it was
built from or last synced with: ``rag.index.info["source_root"]``); ``add`` makes the ids of the
files it reads relative to it (``root=`` overrides), so a file added by itself gets the id that
``sync_folder`` gives it, and same-named files of different folders never share an id.

With a ``path`` every change is saved atomically before the call returns (a failed
save leaves the previous index on disk).
The in-memory index is ``rag.index`` (contextrag.index.core.Index; its fields are documented there).

Several writers, in one process or many: ``add``, ``delete``, ``rebuild`` and ``save`` hold the index
directory's writer lock (contextrag.index.store.writer_lock) for their whole read-modify-write. If
another writer moved the index on since this object last read or wrote it, the change is applied on
top of the index on disk (reloaded), never over it, so concurrent adds all land. A writer waits up to
``lock_timeout`` seconds (default 600) and then raises IndexLockTimeout. Updates work on a copy that
replaces ``rag.index`` only once saved, so queries running in other threads meanwhile see the old or
the new index, whole, and a failed update leaves ``rag.index`` as it was.

``IndexFormatError`` (an index this library cannot read), ``IndexLockTimeout`` and ``FORMAT_VERSION``
(the on-disk format this library writes) are importable from this module.
"""
from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol, Sequence, Union

import numpy as np

from .config import DEFAULT_K

if TYPE_CHECKING:
    from .config import Config
    from .index.core import Index
    from .llm.base import LLMClient
    from .query import Answer, Hit

#: One document: its text, or a dict with ``id`` and ``text`` (and optionally ``title``, ``metadata``,
#: ``segments``).
Document = Union[str, dict[str, Any]]
#: What ``build`` and ``add`` take: documents, or files to read (a folder or file path, or a list of
#: ``os.PathLike`` paths).
Documents = Union[str, "os.PathLike[str]", Iterable[Document], Sequence["os.PathLike[str]"]]
#: The documents a query may draw from: a document id or an iterable of them.
DocIds = Union[str, Iterable[str]]
#: A metadata filter (contextrag.query.filters): conditions per field, or ``fn(doc_id, metadata) -> bool``.
Filter = Union[dict[str, Any], Callable[[str, dict[str, Any]], bool]]


class TextEmbedder(Protocol):
    """What ``embedder=`` takes: two methods mapping ``n`` texts to an ``(n, dim)`` float matrix."""

    def embed_passages(self, texts: list[str]) -> Any: ...

    def embed_queries(self, texts: list[str]) -> Any: ...


def _check_config(config: Config | None) -> Config:
    from .config import Config
    if config is None:
        return Config()
    if not isinstance(config, Config):
        raise TypeError(f"config must be a contextrag.Config, got {type(config).__name__}")
    if config.chunk_tokenizer not in ("model", "regex"):
        raise ValueError(f"config.chunk_tokenizer must be 'model' or 'regex', got {config.chunk_tokenizer!r}")
    if config.fcm_normalize not in ("none", "max"):
        raise ValueError(f"config.fcm_normalize must be 'none' or 'max', got {config.fcm_normalize!r}")
    if not (isinstance(config.member_ratio, (int, float)) and 0 < config.member_ratio <= 1):
        raise ValueError(f"config.member_ratio must be in (0, 1], got {config.member_ratio!r}")
    for name in ("min_support", "node_text_chunks", "summary_chunks", "cooc_window"):
        v = getattr(config, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"config.{name} must be an int >= 1, got {v!r}")
    mp = config.rq_max_points_per_centroid
    if mp is not None and (isinstance(mp, bool) or not isinstance(mp, int) or mp < 1):
        raise ValueError(f"config.rq_max_points_per_centroid must be None or an int >= 1, got {mp!r}")
    return config


def _check_llm(llm: LLMClient | None) -> LLMClient | None:
    if llm is not None and not callable(getattr(llm, "complete", None)):
        raise TypeError(f"llm must be a contextrag.llm LLMClient (with .complete), got {type(llm).__name__}")
    return llm


class _CheckedEmbedder:
    """Wraps a (possibly custom) embedder: every output must be a finite (n, dim) float matrix."""

    def __init__(self, inner: TextEmbedder) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _check(self, fn: Callable[[Any], Any], texts: Any, what: str) -> np.ndarray:
        texts = list(texts) if not isinstance(texts, str) else texts
        E = fn(texts)
        try:
            E = np.asarray(E, dtype=np.float32)
        except (TypeError, ValueError):
            raise ValueError(f"the embedder's {what} returned {type(E).__name__}, not a float matrix") from None
        n = len(texts)
        if E.ndim != 2 or E.shape[0] != n or (n and E.shape[1] == 0):
            raise ValueError(f"the embedder's {what} returned shape {E.shape} for {n} texts; "
                             "expected (len(texts), dim) with dim >= 1")
        if not np.isfinite(E).all():
            bad = int((~np.isfinite(E)).any(axis=1).sum())
            raise ValueError(f"the embedder's {what} returned NaN or infinite values for {bad} of {n} texts")
        return E

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        return self._check(self.inner.embed_passages, texts, "embed_passages")

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._check(self.inner.embed_queries, texts, "embed_queries")


def _checked_embedder(emb: TextEmbedder | None) -> _CheckedEmbedder | None:
    if emb is None or isinstance(emb, _CheckedEmbedder):
        return emb
    for name in ("embed_passages", "embed_queries"):
        if not callable(getattr(emb, name, None)):
            raise TypeError(f"embedder must have {name}(list[str]) -> (n, dim) array, "
                            f"got {type(emb).__name__}")
    return _CheckedEmbedder(emb)


def _is_paths(docs: Any) -> bool:
    """Whether ``docs`` names files (a path, or a list of os.PathLike) rather than documents."""
    if isinstance(docs, (str, os.PathLike)):
        return True
    if isinstance(docs, (list, tuple)) and docs and any(isinstance(d, os.PathLike) for d in docs):
        if not all(isinstance(d, (os.PathLike, str)) for d in docs) or \
                not all(isinstance(d, os.PathLike) for d in docs):
            raise TypeError("docs mixes paths and documents: give a list of os.PathLike paths (files to "
                            "read) or a list of str/dict documents, not both")
        return True
    return False


def _documents(docs: Any, strict: bool, root: str | os.PathLike[str] | None = None,
               file_roots: Sequence[Path] = ()) -> tuple[Any, Path | None]:
    """(``docs`` as documents, the folder file ids are relative to or None): files read through
    contextrag.ingest, anything else as given."""
    if _is_paths(docs):
        from .ingest import read_documents
        got = read_documents(docs, strict=strict, root=root, file_roots=file_roots)
        return got.docs, got.root
    return docs, (Path(root).resolve() if root is not None else None)


def source_root(ix: Index) -> Path | None:
    """The folder the index's file ids are relative to, when it remembers one that still exists."""
    r = (getattr(ix, "info", None) or {}).get("source_root")
    return Path(r) if isinstance(r, str) and r and Path(r).is_dir() else None


def file_roots(ix: Index) -> list[Path]:
    """The folders ``add`` makes a file's id relative to, the first that holds it: the index's
    source folder, then the current folder (same-named files of two folders keep two ids)."""
    return [r for r in (source_root(ix), Path.cwd()) if r is not None]


def _snapshot_of(index: Index) -> str | None:
    p = (getattr(index, "info", None) or {}).get("path")
    return Path(p).name if p else None


def release_later(retired: list) -> None:
    """Let go of what ``retired`` holds (a replaced index, or the object serving it; the caller keeps
    no other reference) on a thread of its own. Where that was the last reference, freeing the index's
    arrays (gigabytes at a million chunks; docs/SCALING.md) would otherwise hold up the write that
    replaced it; an index still read elsewhere (a query in flight, the caller's own
    reference) is freed later by whoever drops it last."""
    from .query._once import drop_elsewhere
    drop_elsewhere(retired)


def _copy_index(ix: Index) -> Index:
    """A deep copy to change while queries keep reading ``ix``; the embedder (a model) is shared."""
    memo = {id(ix.embedder): ix.embedder}
    ledger = getattr(ix, "ledger", None)
    if ledger is not None:                       # holds a lock, which does not copy
        from .llm.ledger import CostLedger
        memo[id(ledger)] = CostLedger({k: v for k, v in ledger.to_dict().items() if k != "total"})
    # a copy in O(N) C-level steps, not N deepcopy calls: the tables of strings are copied as lists
    # (strings do not change); what an update replaces and never changes in place is shared
    for name in ("chunk_ids", "chunk_doc_ids", "chunk_titles", "chunk_texts", "item_ids", "item_texts"):
        v = getattr(ix, name, None)
        if isinstance(v, list):
            memo[id(v)] = list(v)
    for name in ("bm25", "lexical", "embeddings", "item_kinds", "item_node", "item_members", "item_sources",
                 "attr_centroids", "chunk_positions", "chunk_spans", "chunk_fitted"):
        v = getattr(ix, name, None)
        if v is not None:
            memo[id(v)] = v
    ctx = getattr(ix, "context", None)
    for b in getattr(ctx, "blocks", ()):        # an update replaces a block's arrays, never writes into them
        for v in (b.matrix, b.members, *b.rows.values(), *b.state.values()):   # (index/context.py)
            memo[id(v)] = v
    for name in ("_extents", "_extents_items"):  # caches an update drops or extends, never changes in place
        v = getattr(ix, name, None)
        if v is not None:
            memo[id(v)] = v
    prep = getattr(ix, "_spread_prepared", None)
    if prep is not None:                         # the stored spreading incidence: stale once the copy changes
        memo[id(prep)] = None
    docs = getattr(ix, "docs", None)
    if isinstance(docs, dict):                   # entries are added and removed, never changed in place
        memo[id(docs)] = dict(docs)
    return copy.deepcopy(ix, memo)


def _prepare_view(ix: Index) -> Any:
    """The corpus view and the spreading state of ``ix``'s Config, built once per index object;
    returns the view."""
    from .query import spread, view_of
    view = view_of(ix)
    fams = ix.config.spread_families
    if ix.config.w_spread > 0 and any(w > 0 for w in fams.values()):
        spread.lexical_state(view, fams)
    return view


def _prepare_queries(ix: Index) -> None:
    """:func:`_prepare_view` and, where queries score candidates, the RQ cells' inverted file (0.1 s
    at a million chunks): built once per index object."""
    from .query.candidates import use_candidates
    use_candidates(_prepare_view(ix), ix.config)


class ContextRAG:
    """An extraction-free graph RAG index, in memory and (with a ``path``) on disk.

    Build one with :meth:`build`, open a saved one with :meth:`load`; the module docstring shows
    every operation.

    Attributes:
        index: The in-memory index (``contextrag.index.core.Index``).
        path: The index directory, or None for an index that is not saved.
        llm: The LLM client used for summaries, rewrites, rerank and answers, or None.
        lock_timeout: Seconds a writer waits for the index directory's lock (None: 600).
    """

    def __init__(self, index: Index, path: str | os.PathLike[str] | None = None, llm: LLMClient | None = None, *,
                 lock_timeout: float | None = None) -> None:
        self.index = index
        self.path = None if path is None else os.fspath(path)
        self.llm = llm
        self.lock_timeout = lock_timeout
        self._snapshot = _snapshot_of(index) if path is not None else None   # what this object last read/wrote

    # ---- construction
    @classmethod
    def build(cls, docs: Documents, path: str | os.PathLike[str] | None = None, config: Config | None = None,
              llm: LLMClient | None = None, *, embedder: TextEmbedder | None = None, executor: str = "local",
              ray_address: str | None = None, strict: bool = False,
              progress: bool | None = None, root: str | os.PathLike[str] | None = None) -> "ContextRAG":
        """Chunk, embed, cluster, build the concept graph (and summaries with an LLM); save to ``path``.

        ``docs``: documents, or files to read (a folder, a file, a list of paths; see the module
        docstring); ``strict``: an unreadable file is a ValueError instead of a skip with a warning.
        ``progress``: a bar per build stage on stderr; None shows them when stderr is a terminal and
        the ``contextrag`` logger is enabled for INFO (contextrag.index.progress).

        ``executor='ray'`` embeds with Ray Data and runs stages 2-3 on shard actors of the Ray cluster
        at ``ray_address`` (a local one when None): same index, same format (contextrag.distributed).
        ``root``: the folder file ids are relative to (remembered as the index's source folder; by
        default the folder ``docs`` names, when it names one).
        """
        if executor not in ("local", "ray"):
            raise ValueError(f"executor must be 'local' or 'ray', got {executor!r}")
        from .index.progress import show_progress
        show = show_progress(progress)
        from .index.build import build_index
        from .index.chunking import normalize_docs
        from .embed.embedder import Embedder
        config = _check_config(config)
        llm = _check_llm(llm)
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        given, src_root = _documents(docs, strict, root)
        items = normalize_docs(given)
        if not items:
            raise ValueError("docs is empty: give at least one document")
        if path is not None:
            from .index.store import check_writable
            check_writable(path)   # fail before the expensive work, not after it
        emb = _checked_embedder(embedder) if embedder is not None else Embedder.from_config(config)
        if executor == "ray":
            from .distributed.build import build_index_ray
            ix = build_index_ray(items, config, emb, llm, address=ray_address)
        else:
            ix = build_index(items, config, emb, llm, progress=show)
        if src_root is not None:
            ix.info["source_root"] = str(src_root)
        rag = cls(ix, path, llm)
        if path is not None:
            rag._write(None, replace=True, progress=show)
        return rag

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, llm: LLMClient | None = None,
             embedder: TextEmbedder | None = None, lock_timeout: float | None = None,
             prepare: bool = True) -> "ContextRAG":
        """Open a saved index. ``prepare`` (default): also ready the query stage (:meth:`prepare`) and
        start loading the embedder model in the background (an ONNX export already cached:
        ``Embedder.preload``), so the first query runs as fast as the next ones; False for tools that
        only read the index (nothing is loaded then)."""
        from .index.store import load
        rag = cls(load(path, embedder=_checked_embedder(embedder), preload_embedder=prepare), path, _check_llm(llm),
                  lock_timeout=lock_timeout)
        return rag.prepare() if prepare else rag

    def prepare(self) -> "ContextRAG":
        """Build now what the first query would otherwise build: the query modules, the corpus view
        (item kinds and documents, the concept nodes' extents, the router), the spreading state of
        the index's ``Config`` (its stored lexical families prepared for ``ops.spread_hop``), the RQ
        cells' inverted file where queries score candidates, and the embedder's model when it loads
        without torch from the cache (a static model, an ONNX export: :meth:`load` starts the ONNX
        one in the background, which this waits for). Each is built once per index object and reused
        by every query; returns self."""
        _prepare_queries(self.index)
        load_model = getattr(self.index.embedder, "load_if_cached", None)
        if callable(load_model):
            load_model()
        self._queried = True     # later writes prepare the index they swap in
        return self

    def save(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write this object's index to ``path`` (default: its own), replacing what is there."""
        if path is not None:
            self.path = os.fspath(path)
        if self.path is None:
            raise ValueError("path is required: this index was built without one")
        self._write(None, replace=True)

    def _write(self, change: Callable[[Index], Any] | None, *, replace: bool = False, progress: bool = False) -> Any:
        """Under the writer lock: (re)read the index on disk if another writer moved it on, apply
        ``change(index) -> result`` to a copy, save the copy, and only then make it ``self.index``.

        ``replace``: write this object's index as it is (build, save) instead of changing the one on disk.
        """
        from .index.hugepages import small_pages
        with small_pages():          # gigabytes of new arrays at a million chunks
            return self._write_now(change, replace=replace, progress=progress)

    def _write_now(self, change: Callable[[Index], Any] | None, *, replace: bool, progress: bool) -> Any:
        from .index import store
        if self.path is None:
            work = _copy_index(self.index)
            out = change(work) if change is not None else None
            from .index.deferred import settle
            settle(work)                   # no save to write an update's deferred rows from their sources
            self._warm(work)
            retired, self.index = [self.index], work
            release_later(retired)
            return out
        timeout = store.DEFAULT_LOCK_TIMEOUT if self.lock_timeout is None else self.lock_timeout
        with store.writer_lock(self.path, timeout):
            on_disk = store.current_snapshot(self.path)
            if replace:
                work = self.index
            elif on_disk is not None and on_disk != self._snapshot:
                work = store.load(self.path, embedder=self.index.embedder)   # another writer moved it on
            else:
                work = _copy_index(self.index)
            out = change(work) if change is not None else None
            from .index.progress import Stages
            work.timings.pop("save", None)
            with Stages(work.timings, progress)("save"):
                # the new index's query state is built while its files are written
                snap = store.save(work, self.path, meanwhile=lambda: self._warm(work))
            work.info["path"] = str(snap)
            self._snapshot = snap.name
            self._warm(work)               # built once per index object: nothing left unless it failed
            retired = [self.index] if self.index is not work else []
            self.index = work
        release_later(retired)         # after the lock: the next writer need not wait for it
        return out

    def _warm(self, ix: Index) -> None:
        """Build the new index's query view and lexical state before queries see it, so that the
        first queries on it do not wait for them (seconds on a large index, on cores the querying
        threads share)."""
        if getattr(self, "_queried", False):
            _prepare_queries(ix)

    # ---- updates
    def add(self, docs: Documents, *, replace: bool = False, strict: bool = False,
            root: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Add documents without a full rebuild (new chunks assigned to the existing codebooks).

        ``docs``: documents or files (see the module docstring). A file's id is its path relative to
        ``root`` (a file outside it is an error), else to the first of the index's source folder and
        the current folder that holds it, else as contextrag.ingest gives it. An id already in the index is a
        ValueError, or with ``replace=True`` an upsert: the old document is deleted and the new one
        added in the same write (one new snapshot). The result's ``added_ids`` and ``replaced_ids``
        say which happened to each document, as decided under the writer lock."""
        from .index.chunking import normalize_docs
        from .index.update import replace_docs
        given: Any
        if _is_paths(docs):
            self.sync()                              # the source folder as the index on disk has it
            given, _ = _documents(docs, strict, root, file_roots(self.index) if root is None else ())
        else:
            given, _ = _documents(docs, strict)
        given = list(given) if given is not None and not isinstance(given, (str, bytes, dict)) else given
        if not normalize_docs(given):          # reject bad input before taking the lock
            raise ValueError("docs is empty: give at least one document")

        def change(ix: Index) -> dict[str, Any]:
            start = len(ix.docs)
            while any(f"doc{start + i}" in ix.docs for i in range(8)):
                start += 8   # generated ids ("doc<k>" for plain strings) must not collide after deletes
            new = normalize_docs(given, start=start)
            there = [d.doc_id for d in new if d.doc_id in ix.docs]
            if there and not replace:
                raise ValueError(f"docs: ids already in the index: {there[:5]}; add(..., replace=True) "
                                 "replaces them (the CLI's add does so unless --no-replace)")
            kept_root = ix.info.get("source_root")
            out = replace_docs(ix, new, there, llm=self.llm)
            if kept_root is not None:            # a rebuild from scratch starts a fresh info
                ix.info.setdefault("source_root", kept_root)
            out["added_ids"] = [d.doc_id for d in new if d.doc_id not in set(there)]
            out["replaced_ids"] = there
            return out
        out: dict[str, Any] = self._write(change)
        return out

    def sync_folder(self, folder: str | os.PathLike[str] | None = None, *, strict: bool = False,
                    dry_run: bool = False) -> dict[str, Any]:
        """Make the index's file documents match ``folder`` (None: the index's source folder): add
        new files, re-read changed ones (their bytes' sha256 differs), delete documents whose file is
        gone. Ids are paths relative to ``folder``, which becomes the index's source folder.
        Documents that did not come from a file (no ``sha256``, or an id other than their
        ``source``) are left alone. Nothing changed: nothing is written (no new snapshot).

        Returns {"added", "changed", "deleted": [ids], "unchanged": n, "skipped": [(id, reason)],
        "ignored": n, "written": bool} (contextrag.index.update.plan_folder)."""
        from .index.update import apply_plan, plan_folder
        self.sync()                                  # compare with the index on disk, not a stale copy
        if folder is None:
            folder = source_root(self.index)
            if folder is None:
                raise ValueError("folder: this index remembers no source folder (it was not built from one, "
                                 "or that folder is gone); give the folder to sync with")
        plan = plan_folder(self.index, folder, strict=strict)
        report = plan.report()
        if dry_run or not plan.n_changes:
            return report
        where = str(Path(folder).resolve())

        def change(ix: Index) -> dict[str, Any]:
            out = apply_plan(ix, plan, llm=self.llm)
            ix.info["source_root"] = where
            return out
        self._write(change)
        report["written"] = True
        return report

    def delete(self, doc_ids: DocIds) -> dict[str, Any]:
        """Remove documents (their chunks, context rows, node memberships, item texts, BM25 entries)."""
        from .index.build import delete_docs
        if doc_ids is None or isinstance(doc_ids, bytes):
            raise TypeError("doc_ids must be a str or an iterable of str")
        out: dict[str, Any] = self._write(lambda ix: delete_docs(ix, doc_ids))
        return out

    def rebuild(self, llm: LLMClient | None = None) -> "ContextRAG":
        """Re-cluster from the stored embeddings and rebuild the graph (and summaries with an LLM)."""
        from .index.build import rebuild
        llm = _check_llm(llm) or self.llm
        self._write(lambda ix: rebuild(ix, llm))
        return self

    def sync(self) -> bool:
        """Reload the index if another writer moved it on; True when it did (queries use the new one)."""
        from .index import store
        if self.path is None:
            return False
        on_disk = store.current_snapshot(self.path)
        if on_disk is None or on_disk == self._snapshot:
            return False
        ix = store.load(self.path, embedder=self.index.embedder)
        self.index, self._snapshot = ix, _snapshot_of(ix)
        return True

    # ---- diagnostics
    def stats(self) -> dict[str, Any]:
        """Sizes, timings, drift since the last full build and the lexical nodes (contextrag.index.stats)."""
        from .index.stats import index_stats
        return index_stats(self.index, self.path)

    # ---- queries (contextrag.query owns retrieval)
    def retrieve(self, question: str, k: int = DEFAULT_K, doc_ids: DocIds | None = None, *, filter: Filter | None = None,
                 explain: bool = False, **overrides: Any) -> list[Hit]:
        """The top-k items by the hybrid score (no LLM): contextrag.query.retrieve.

        Args:
            question: A non-empty question.
            k: How many hits, >= 1.
            doc_ids: Only items drawn from these documents.
            filter: Metadata conditions (contextrag.query.filters), ANDed with ``doc_ids``.
            explain: Also set ``Hit.explain``: why each item came.
            **overrides: Config query fields for this call (w_bm25, w_cos, w_fuzzy, theta,
                candidates, rerank_top, boost_summary, boost_bridge, n_rewrites, rrf_k, w_spread,
                spread_families, spread_seeds).

        Returns:
            At most ``k`` hits, best first.
        """
        from . import query
        self._queried = True
        if explain:
            overrides["explain"] = True
        hits: list[Hit] = query.retrieve(self.index, question, k=k, doc_ids=self.doc_ids_for(doc_ids, filter),
                                         **overrides)   # one index, whole
        return hits

    def retrieve_many(self, questions: Sequence[str], k: int = DEFAULT_K, doc_ids: DocIds | None = None, *,
                      filter: Filter | None = None, **overrides: Any) -> list[list[Hit]]:
        """:meth:`retrieve` for a list of questions, batched (one embedding call, one spreading hop);
        one list of hits per question, in order."""
        from . import query
        self._queried = True
        hits: list[list[Hit]] = query.retrieve_many(self.index, questions, k=k,
                                                    doc_ids=self.doc_ids_for(doc_ids, filter), **overrides)
        return hits

    def doc_ids_for(self, doc_ids: DocIds | None = None, filter: Filter | None = None) -> list[str] | None:
        """The documents a query may draw from: ``doc_ids`` ANDed with the metadata ``filter``
        (contextrag.query.filters); None when neither restricts. What ``retrieve`` and ``answer``
        pass on as ``doc_ids``."""
        from .query.filters import doc_ids_for
        ids: list[str] | None = doc_ids_for(self.index, doc_ids, filter)
        return ids

    def _filtered(self, kw: dict[str, Any]) -> dict[str, Any]:
        f = kw.pop("filter", None)
        if f is not None:
            kw["doc_ids"] = self.doc_ids_for(kw.get("doc_ids"), f)
        kw.setdefault("llm", self.llm)
        return kw

    def answer(self, question: str, **kw: Any) -> Answer:
        """Search (with the LLM's rewrites and rerank when there is one), then answer from the top hits.

        Args:
            question: A non-empty question.
            **kw: ``llm`` (default: this object's), ``k``, ``doc_ids``, ``filter``, ``rewrite``,
                ``rerank``, ``style`` ("short", "paragraph", "extractive", "span" or None for the
                default), ``max_tokens``, ``prompt`` and Config query fields, as
                contextrag.query.answer takes them.

        Returns:
            The answer with its text, hits, citations, LLM cost and wall time.
        """
        from . import query
        self._queried = True
        ans: Answer = query.answer(self.index, question, **self._filtered(kw))
        return ans

    def answer_stream(self, question: str, **kw: Any) -> Iterator[str | Answer]:
        """:meth:`answer` as text deltas (str), then the final Answer (contextrag.query.answer_stream)."""
        from . import query
        self._queried = True
        events: Iterator[str | Answer] = query.answer_stream(self.index, question, **self._filtered(kw))
        return events

    async def aanswer(self, question: str, **kw: Any) -> Answer:
        """:meth:`answer` on the client's async path (rewrites and rerank awaited concurrently)."""
        from . import query
        kw = self._filtered(kw)
        fn = getattr(query, "aanswer", None)
        if fn is not None:
            ans: Answer = await fn(self.index, question, **kw)
            return ans
        import asyncio
        return await asyncio.to_thread(query.answer, self.index, question, **kw)

    def __repr__(self) -> str:
        ix = self.index
        return (f"ContextRAG(docs={len(ix.docs)}, chunks={ix.n_chunks}, items={ix.n_items}, "
                f"nodes={ix.graph.n_nodes}, path={self.path!r})")


def __getattr__(name: str) -> Any:
    # The store's public names, without importing the store (and SciPy) with this module.
    if name in ("FORMAT_VERSION", "IndexFormatError", "IndexLockTimeout"):
        from .index import store
        return getattr(store, name)
    raise AttributeError(f"module 'contextrag.rag' has no attribute {name!r}")


__all__ = ["ContextRAG", "FORMAT_VERSION", "IndexFormatError", "IndexLockTimeout", "np"]
