"""On-disk index: one directory, no pickle, atomic replacement, verified on load.

Layout::

    DIR/CURRENT                   the name of the live snapshot (one line)
    DIR/LOCK                      the writers' lock file (flock; empty, never part of a snapshot)
    DIR/snap-<ns>-<id>/manifest.json      format + version, library version, config, embedding model,
                                          dims, counts, checksum (xxh3_128) + size of every other file,
                                          and the sha256 of the manifest's own bytes (manifest_sha256)
    DIR/snap-<ns>-<id>/arrays.safetensors every array (embeddings, context, graph, items, codebooks)
    DIR/snap-<ns>-<id>/columns.safetensors the documents' ids, titles, metadata and the chunks' ids, documents,
                                          titles and texts as flat UTF-8 arrays (index/columns.py)
    DIR/snap-<ns>-<id>/meta.sqlite        virtual items, attribute families, info (and, before format 3,
                                          the documents and chunks: one row each)
    DIR/snap-<ns>-<id>/prepared.safetensors what queries derive from the rest, stored so a load maps it
                                          instead of rebuilding it (index/prepared.py)
    DIR/snap-<ns>-<id>/bm25/...           BM25's term counts (counts.safetensors) and vocabulary (terms.json),
                                          scored at query time (index/bm25_index.py); before format 4,
                                          bm25s's own files (.npy saved with allow_pickle=False, JSON)
    DIR/snap-<ns>-<id>/tokens.safetensors the chunks' words and word counts, memory-mapped (lexical/words.py)

Why a pointer file: replacing a directory by rename takes two renames (old away, new in), and a
kill between them leaves no index at DIR. Instead a save writes DIR/.tmp-<id>/ completely (each file
fsynced), renames it to a fresh snapshot name, then atomically replaces DIR/CURRENT (write a temp
file, fsync, os.replace). At every instant CURRENT names a complete snapshot, so a killed save leaves
the previous index loadable. After each successful save, old snapshots and the leftovers of killed
saves are renamed out of the way and removed by a thread.
A directory holding manifest.json directly (a snapshot copied elsewhere) also loads.

Every byte of a snapshot is covered by a checksum (the files by the manifest, the manifest by its own
``manifest_sha256``, computed over its exact bytes with that value zeroed), and CURRENT must be exactly
one snapshot name and a newline: a truncated file or a flipped byte anywhere is an IndexFormatError,
never a silently different index. The files' checksum is XXH3-128 (the ``xxhash`` package), not
sha256: it guards against corruption, not forgery (whoever can rewrite a file can rewrite the
unsigned manifest beside it, so a cryptographic hash buys nothing), and it runs at memory speed, about
5x sha256's rate here: verifying a million-chunk snapshot (5.6 GB) is ~0.7 CPU-s instead of ~3.7.
Snapshots of formats 1-3 carry sha256 entries, which are still verified as sha256.

Large files (64 MB and more) are written with O_DIRECT where the file system takes it
(``CONTEXTRAG_DIRECT_IO``: ``auto``, ``1`` every file, ``0`` none), through one aligned staging buffer
per writer: a buffered write copies every byte into fresh page-cache pages first, which at a million
chunks is GBs of memory the kernel must find while the process holds the old and the new index, and the
cached copy is not what the saving process reads afterwards (it keeps the arrays it wrote). A later
load reads the files from disk once, as after a reboot.

Writers and readers: one writer at a time per directory, through an OS lock (``fcntl.flock``) on
DIR/LOCK held for a whole read-modify-write (:func:`writer_lock`; ContextRAG takes it). The kernel
drops the lock when its holder dies, so a writer killed with SIGKILL never blocks the next one.
Readers take no lock: they read CURRENT, then that snapshot; a writer's clean-up may delete the
snapshot under a slow reader, which then sees CURRENT moved on and loads the new one (:func:`load`
retries), so a reader always gets one complete snapshot.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import stat
import time
import uuid
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .deferred import DeferredRows

FORMAT = "contextrag-index"
FORMAT_VERSION = 4      # 4: xxh3_128 checksums, BM25 as counts; 3: columns + prepared.safetensors; 2: manifest_sha256
ARRAYS = "arrays.safetensors"
META = "meta.sqlite"
MANIFEST = "manifest.json"
CURRENT = "CURRENT"
LOCK = "LOCK"
_SELF_SUM = "manifest_sha256"
_FILE_SUM = "xxh3_128"       # the files' checksum since format 4 (formats 1-3: "sha256")
_ZERO_SUM = b"0" * 64
_SNAP_RE = re.compile(r"^snap-\d+-[0-9a-f]{8}$")


class IndexFormatError(ValueError):
    """The directory is not a loadable contextrag index (foreign, corrupt, truncated or too new)."""


class IndexLockTimeout(TimeoutError):
    """Another writer held the index's lock for longer than the timeout."""


# ---- the writers' lock ---------------------------------------------------------------------

DEFAULT_LOCK_TIMEOUT = 600.0   # seconds a writer waits for another writer (a rebuild can take minutes)


@contextlib.contextmanager
def writer_lock(path, timeout: float | None = DEFAULT_LOCK_TIMEOUT):
    """Hold the exclusive writer lock of the index directory ``path`` (created if absent).

    Waits up to ``timeout`` seconds (None: forever) for another writer, then raises
    IndexLockTimeout. An flock belongs to the open file description, so it is released when the
    holder exits or is killed, and it also excludes a second writer of the same process.
    """
    import fcntl
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout >= 0):
        raise ValueError(f"lock timeout must be a number of seconds >= 0 or None, got {timeout!r}")
    root = check_writable(path)
    root.mkdir(parents=True, exist_ok=True)
    try:     # never through a symlink: a planted LOCK link would make a writer create a file elsewhere
        fd = os.open(root / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise IndexFormatError(f"index {str(root)!r}: its lock file {LOCK} is a symbolic link; refusing to "
                                   "follow it (remove it: a writer recreates it)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IndexFormatError(f"index {str(root)!r}: its lock file {LOCK} is not a regular file (remove it)")
    try:
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
            if deadline is not None and time.monotonic() >= deadline:
                raise IndexLockTimeout(f"index {str(root)!r} is being written by another process; gave up "
                                       f"waiting after {timeout:g} s (lock file {LOCK})")
            time.sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))
            pause = min(pause * 2, 0.1)
        yield root
    finally:
        os.close(fd)   # releases the lock


def current_snapshot(path) -> str | None:
    """The snapshot name CURRENT holds now (None: no CURRENT, e.g. a snapshot directory itself)."""
    try:
        return (Path(path) / CURRENT).read_bytes().decode("ascii", errors="replace").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None


# ---- helpers -------------------------------------------------------------------------------

def _digest(p: Path, algorithm: str) -> str:
    """The hex checksum of file p; both hashes release the GIL on large blocks (files hash in threads)."""
    if algorithm == _FILE_SUM:
        import xxhash
        h = xxhash.xxh3_128()
    else:
        h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _sha256(p: Path) -> str:
    return _digest(p, "sha256")


def file_sum(p: Path) -> str:
    """The checksum a manifest of this format records for file p."""
    return _digest(p, _FILE_SUM)


def _sum_kind(rel: str, meta: dict) -> str:
    """Which checksum a manifest entry carries (formats 1-3: sha256; 4: xxh3_128)."""
    for algorithm in (_FILE_SUM, "sha256"):
        if isinstance(meta.get(algorithm), str):
            return algorithm
    raise IndexFormatError(f"manifest entry {rel!r} has no checksum (corrupt manifest)")


def _fsync_file(p: Path) -> None:
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(p: Path) -> None:
    try:
        fd = os.open(p, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _put_csr(arrs: dict, key: str, M) -> None:
    M = sp.csr_matrix(M)
    arrs[f"{key}.indptr"] = M.indptr.astype(np.int64)
    arrs[f"{key}.indices"] = M.indices.astype(np.int32)
    arrs[f"{key}.shape"] = np.asarray(M.shape, np.int64)
    if M.dtype != bool:
        arrs[f"{key}.data"] = M.data.astype(np.float32)


def _get_csr(arrs: dict, key: str, *, boolean: bool) -> sp.csr_matrix:
    indptr, indices = arrs[f"{key}.indptr"], arrs[f"{key}.indices"]
    shape = tuple(int(x) for x in arrs[f"{key}.shape"])
    data = np.ones(len(indices), bool) if boolean else arrs[f"{key}.data"]
    return sp.csr_matrix((data, indices, indptr), shape=shape)


def _np(x):
    if isinstance(x, DeferredRows):        # written from its sources (index/deferred.py)
        return x
    a = np.ascontiguousarray(x)
    return a.astype(np.uint8) if a.dtype == bool else a


# ---- save ----------------------------------------------------------------------------------

def _arrays(ix) -> dict:
    a: dict = {
        "embeddings": ix.embeddings, "chunk_positions": ix.chunk_positions, "chunk_spans": ix.chunk_spans,
        "chunk_fitted": ix.chunk_fitted, "attr_centroids": ix.attr_centroids,
        "item_kinds": ix.item_kinds, "item_node": ix.item_node,
        "node_kind": ix.graph.kind, "node_parents": ix.graph.parents, "node_attr": ix.graph.attr,
        "node_intent": ix.graph.intent, "node_score": ix.graph.score,
        "edge_src": ix.graph.edge_src, "edge_dst": ix.graph.edge_dst, "edge_kind": ix.graph.edge_kind,
        "edge_weight": ix.graph.edge_weight,
    }
    _put_csr(a, "item_members", ix.item_members)
    _put_csr(a, "item_sources", ix.item_sources)
    _put_csr(a, "node_members", ix.graph.members)
    if getattr(ix, "_attr_sums", None) is not None:     # the centroids' sums, for updates (index/build.py)
        a["attr_sums"] = ix._attr_sums
    if getattr(ix.graph, "cooc", None) is not None:     # window counts, for updates (index/graph.py)
        C = sp.csr_matrix(ix.graph.cooc)
        a.update({"node_cooc.indptr": C.indptr.astype(np.int64), "node_cooc.indices": C.indices.astype(np.int32),
                  "node_cooc.data": C.data.astype(np.int64), "node_cooc.shape": np.asarray(C.shape, np.int64)})
    for i, b in enumerate(ix.context.blocks):
        if sp.issparse(b.matrix):
            _put_csr(a, f"ctx.{i}.csr", b.matrix)
        else:
            a[f"ctx.{i}.dense"] = b.matrix
        _put_csr(a, f"ctx.{i}.members", b.members)
        a[f"ctx.{i}.groups"] = b.groups
        for k, v in b.state.items():
            a[f"ctx.{i}.state.{k}"] = v
        for k, v in b.rows.items():
            a[f"ctx.{i}.rows.{k}"] = v
    cs = getattr(ix, "chunk_sentences", None)
    if cs is not None:                             # the sentence hashes of the distinct text (index/distinct.py)
        a["chunk_sentences.indptr"], a["chunk_sentences.hashes"] = cs.indptr, cs.hashes
    if getattr(ix, "lexical", None) is not None:   # the spreading families (index/lexical/)
        from .lexical.families import lexical_arrays
        a.update(lexical_arrays(ix.lexical))
    return {k: _np(v) for k, v in a.items()}


def _write_sqlite(ix, p: Path) -> None:
    con = sqlite3.connect(p)
    try:
        # no journal and no fsync of its own: a new file in the unpublished snapshot directory, which
        # the save fsyncs before CURRENT names it (an fsync here waited on the GBs being written)
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.executescript("""
            CREATE TABLE docs(ord INTEGER PRIMARY KEY, doc_id TEXT UNIQUE NOT NULL, title TEXT, metadata TEXT);
            CREATE TABLE chunks(idx INTEGER PRIMARY KEY, chunk_id TEXT NOT NULL, doc_id TEXT NOT NULL,
                                title TEXT, text TEXT NOT NULL);
            CREATE TABLE items(idx INTEGER PRIMARY KEY, item_id TEXT NOT NULL, text TEXT NOT NULL);
            CREATE TABLE families(idx INTEGER PRIMARY KEY, name TEXT NOT NULL, weight REAL NOT NULL,
                                  attr_names TEXT NOT NULL, info TEXT NOT NULL, state_keys TEXT NOT NULL);
            CREATE TABLE kv(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE doc_segments(doc_id TEXT PRIMARY KEY, segments TEXT NOT NULL);
        """)
        # the documents and chunks are in columns.safetensors (format 3): their tables stay, empty,
        # so a reader of the file finds the schema it knows
        # pages/sections of a document (index/segments.py): a table of their own
        con.executemany("INSERT INTO doc_segments VALUES (?,?)",
                        [(d, json.dumps(v["segments"])) for d, v in ix.docs.items() if v.get("segments")])
        n = ix.n_chunks
        con.executemany("INSERT INTO items VALUES (?,?,?)",
                        [(i, ix.item_ids[i], ix.item_texts[i]) for i in range(n, ix.n_items)])
        con.executemany("INSERT INTO families VALUES (?,?,?,?,?,?)",
                        [(i, b.name, b.weight, json.dumps(b.names), json.dumps(b.info, default=str),
                          json.dumps({"state": sorted(b.state), "rows": sorted(b.rows),
                                      "sparse": bool(sp.issparse(b.matrix))}))
                         for i, b in enumerate(ix.context.blocks)])
        con.executemany("INSERT INTO kv VALUES (?,?)", [
            ("info", json.dumps(ix.info, default=str)), ("timings", json.dumps(ix.timings)),
            ("ledger", json.dumps(ix.ledger.to_dict()))])
        if getattr(ix, "lexical", None) is not None:
            from .lexical.families import lexical_meta
            con.execute("INSERT INTO kv VALUES (?,?)", ("lexical", json.dumps(lexical_meta(ix.lexical))))
        con.commit()
    finally:
        con.close()


def _columns(ix) -> tuple[dict, dict]:
    """(arrays, {column: encoding}) of the documents' and chunks' string tables (index/columns.py)."""
    from . import columns
    n = ix.n_chunks
    docs = ix.docs
    cols = {"doc.ids": list(docs), "doc.titles": [v["title"] for v in docs.values()],
            "doc.metadata": ["{}" if type(md) is dict and not md else json.dumps(md, default=str)   # most: none
                             for md in (v["metadata"] for v in docs.values())],
            "chunk.ids": list(ix.chunk_ids), "chunk.doc_ids": list(ix.chunk_doc_ids),
            "chunk.titles": list(ix.chunk_titles)}
    arrays, enc = {}, {}
    for name, values in cols.items():
        arrays[name], enc[name] = columns.encode(values)
    texts = ix.chunk_texts
    if len(texts) != n:
        raise ValueError(f"the index has {len(texts)} chunk texts for {n} chunks")
    if isinstance(texts, columns.LazyStrings):    # as loaded (and added to): the stored bytes as they are
        arrays["chunk.texts"], arrays["chunk.text_offsets"] = texts.encoded()
    else:
        arrays["chunk.texts"], arrays["chunk.text_offsets"] = columns.encode_texts(texts)
    return arrays, enc


def _counts(ix) -> dict:
    from .core import ITEM_KINDS
    from .graph import EDGE_KINDS, NODE_KINDS
    return {"docs": len(ix.docs), "chunks": ix.n_chunks, "items": ix.n_items,
            "items_by_kind": {k: int((ix.item_kinds == i).sum()) for i, k in enumerate(ITEM_KINDS)},
            "attributes": ix.context.n_attributes, "nodes": int(ix.graph.n_nodes),
            "nodes_by_kind": {k: int((ix.graph.kind == i).sum()) for i, k in enumerate(NODE_KINDS)},
            "edges": int(len(ix.graph.edge_src)),
            "edges_by_kind": {k: int((ix.graph.edge_kind == i).sum()) for i, k in enumerate(EDGE_KINDS)}}


def _with_self_sum(body: bytes, digest: bytes) -> bytes:
    """``body`` with the (last) manifest_sha256 value replaced by ``digest``."""
    key = b'"%s": "' % _SELF_SUM.encode()
    at = body.rfind(key)
    if at < 0:
        return body
    at += len(key)
    return body[:at] + digest + body[at + len(digest):]


_ST_NAMES = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
             np.dtype(np.int64): "I64", np.dtype(np.int32): "I32", np.dtype(np.int16): "I16",
             np.dtype(np.int8): "I8", np.dtype(np.uint64): "U64", np.dtype(np.uint32): "U32",
             np.dtype(np.uint16): "U16", np.dtype(np.uint8): "U8", np.dtype(np.bool_): "BOOL"}
_BLOCK = 1 << 26


_DIRECT_ALIGN = 4096         # O_DIRECT's alignment of buffer, offset and length (every block size up to 4 KB)
_DIRECT_BUF = 1 << 23        # the aligned staging buffer of one direct writer
_DIRECT_MIN = 1 << 26        # "auto": files of at least this many bytes bypass the page cache


def _direct_mode() -> str:
    """CONTEXTRAG_DIRECT_IO: ``auto`` (unset: files of 64 MB or more are written with O_DIRECT, where
    the platform and the file system allow it), ``1`` (every file), ``0`` (none: the page cache)."""
    v = (os.environ.get("CONTEXTRAG_DIRECT_IO") or "auto").strip().lower()
    if v not in ("auto", "0", "1"):
        raise ValueError(f"CONTEXTRAG_DIRECT_IO must be 'auto', '0' or '1', got {v!r}")
    return v


class _DirectRefused(OSError):
    """The file system refused O_DIRECT (at open or at the first write): write through the page cache."""


class _DirectSink:
    """Sequential writes to a new file with O_DIRECT, staged in one page-aligned buffer (anonymous
    mmap); the last block is padded and the file truncated to its size. What it saves: a buffered
    write first copies every byte into fresh page-cache pages (GBs at a million chunks, a cost in
    kernel time that grows with how hard the machine must look for free memory) and the file then
    stays cached beside the index the process holds in memory."""

    def __init__(self, path: Path):
        import mmap
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            if e.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise _DirectRefused(e.errno, f"O_DIRECT refused for {path}") from e
            raise
        try:
            self.buf = mmap.mmap(-1, _DIRECT_BUF)
        except BaseException:
            os.close(self.fd)
            raise
        self.view = np.frombuffer(self.buf, np.uint8)
        self.fill = self.off = 0

    def write(self, data) -> None:
        src = np.frombuffer(data, np.uint8)
        i = 0
        while i < src.size:
            k = min(src.size - i, _DIRECT_BUF - self.fill)
            self.view[self.fill:self.fill + k] = src[i:i + k]
            self.fill += k
            i += k
            if self.fill == _DIRECT_BUF:
                self._flush(_DIRECT_BUF)
                self.fill = 0

    def _flush(self, n: int) -> None:
        done = 0
        while done < n:       # a short write (a file system near full) goes on from where it stopped
            try:
                with memoryview(self.buf) as whole, whole[done:n] as part:   # released even if pwrite keeps it
                    k = os.pwrite(self.fd, part, self.off + done)
            except OSError as e:
                if e.errno == errno.EINVAL and self.off + done == 0:
                    raise _DirectRefused(e.errno, "O_DIRECT write refused") from e
                raise
            if k <= 0:
                raise OSError(errno.EIO, f"direct write made no progress at byte {self.off + done}")
            done += k
        self.off += n

    def close(self) -> None:
        try:
            size = self.off + self.fill
            if self.fill:
                padded = -(-self.fill // _DIRECT_ALIGN) * _DIRECT_ALIGN
                self.view[self.fill:padded] = 0
                self._flush(padded)
                os.ftruncate(self.fd, size)
        finally:
            self.abort()

    def abort(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self.view = None            # the buffer's last export, so that it can be unmapped
            self.buf.close()


def write_safetensors(path: Path, arrays: dict, metadata: dict | None = None) -> dict:
    """Write ``arrays`` to ``path`` in the safetensors format, streamed from the arrays as they are
    (memory-mapped ones included) and hashed while written; returns the manifest entry
    {checksum (:data:`_FILE_SUM`), "bytes"}. ``safetensors.numpy.save_file`` first serialises every
    array into one bytes object (a copy of the file in memory: GBs at a million chunks) and the file then had to be read back
    to be hashed. The layout is safetensors': the arrays in order of decreasing item size (so each
    is aligned in a memory map), the header padded to 8 bytes (tested loadable by safetensors).
    Large files bypass the page cache (O_DIRECT, :func:`_direct_mode`); where the file system
    refuses it, the file is written through the page cache instead (the same bytes)."""
    items = []
    for k, v in arrays.items():
        a = v if isinstance(v, DeferredRows) else np.asarray(v)
        if a.dtype not in _ST_NAMES:
            raise TypeError(f"array {k!r}: dtype {a.dtype} has no safetensors name")
        items.append((k, a))
    items.sort(key=lambda kv: (-kv[1].dtype.itemsize, kv[0]))
    header, off = {}, 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for k, a in items:
        header[k] = {"dtype": _ST_NAMES[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    total = 8 + len(head) + off
    mode = _direct_mode()
    if hasattr(os, "O_DIRECT") and (mode == "1" or (mode == "auto" and total >= _DIRECT_MIN)):
        try:
            return _stream(head, items, _DirectSink(path))
        except _DirectRefused:
            logging.getLogger("contextrag").debug("contextrag: %s written through the page cache "
                                                  "(the file system refused O_DIRECT)", path)
    with open(path, "wb") as f:
        return _stream(head, items, f)


def _stream(head: bytes, items: list, sink) -> dict:
    """The file's bytes (its header, then each array) into ``sink``, hashed as they go."""
    import xxhash
    h = xxhash.xxh3_128()
    size = 0
    try:
        for part in (len(head).to_bytes(8, "little"), head):
            sink.write(part)
            h.update(part)
            size += len(part)
        for _, a in items:
            for block in _blocks(a):
                sink.write(block)
                h.update(block)
                size += len(block)
    except BaseException:
        if isinstance(sink, _DirectSink):
            sink.abort()
        raise
    if isinstance(sink, _DirectSink):
        sink.close()
    return {_FILE_SUM: h.hexdigest(), "bytes": size}


def _blocks(a):
    """An array's bytes in order, as blocks (a deferred one's gathered from its sources)."""
    if isinstance(a, DeferredRows):
        yield from a.blocks()
        return
    flat = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    for i in range(0, flat.size, _BLOCK):
        yield memoryview(flat[i:i + _BLOCK])


LAST_SAVE: dict = {}     # wall seconds of the last write_snapshot's steps (for bench/, not stored)


def _write_synced(path: Path, arrays: dict, metadata: dict | None = None) -> dict:
    """:func:`write_safetensors`, then the file's fsync (in the same writer thread, while the other
    writes on)."""
    entry = write_safetensors(path, arrays, metadata)
    _fsync_file(path)
    return entry


class _Steps:
    def __init__(self, out: dict):
        self.out = out

    @contextlib.contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.out[name] = round(self.out.get(name, 0.0) + time.perf_counter() - t0, 4)


def write_snapshot(ix, d: Path, meanwhile=None) -> dict:
    """All files of one snapshot into the (empty) directory d; returns the manifest. ``meanwhile``:
    called once every array is handed to the writer threads, while they write and hash (:func:`save`);
    an exception from it is logged, not raised (the caller calls it again after)."""
    from .. import __version__
    from . import columns, prepared
    LAST_SAVE.clear()
    t = _Steps(LAST_SAVE)
    from .bm25_index import CountBM25
    from .lexical import words as lw
    from concurrent.futures import ThreadPoolExecutor
    (d / "bm25").mkdir()
    files, futs = {}, []
    # each file is written (hashed as it is written, then fsynced) in a thread as soon as its arrays
    # are ready, while the next one's are prepared (the spreading incidence); writing, hashing and
    # fsync release the GIL, and at a million chunks they are GBs. The string columns are encoded in
    # a writer thread too, beside the preparing.
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="contextrag-write") as pool:
        def write(p: Path, arrays: dict, meta=None) -> None:
            futs.append((p, pool.submit(_write_synced, p, arrays, meta)))

        def write_columns() -> dict:
            col_arrays, col_enc = _columns(ix)
            return {**_write_synced(d / columns.FILE, col_arrays), "encoding": col_enc}
        with t("prepare"):
            # an update's arrays named as rows of other arrays (index/deferred.py) are gathered as
            # they are written; the index then maps them from the file written
            remap = []
            write(d / ARRAYS, _arrays(ix))
            if isinstance(ix.embeddings, DeferredRows):
                remap.append((futs[-1][1], lambda: setattr(ix, "embeddings", map_arrays(d / ARRAYS)["embeddings"])))
            if getattr(ix, "words", None) is not None:      # the chunks' words, for updates (lexical/words.py)
                write(d / lw.FILE, ix.words.arrays(), {"version": str(lw.VERSION)})
                if ix.words.deferred:
                    remap.append((futs[-1][1], lambda: setattr(ix, "words", ix.words.mapped_from(d / lw.FILE))))
            futs.append((d / columns.FILE, pool.submit(write_columns)))
        with t("prepared"):
            prep_arrays, prep_meta = prepared.prepared_arrays(ix)
            if prep_arrays:
                write(d / prepared.FILE, prep_arrays)
        with t("meta"):
            if isinstance(ix.bm25, CountBM25):
                from .bm25_index import COUNTS_FILE
                arrs, meta = ix.bm25.to_arrays()
                write(d / "bm25" / COUNTS_FILE, arrs, meta)
                ix.bm25.save(str(d / "bm25"), allow_pickle=False, arrays=False)   # its terms
            else:
                ix.bm25.save(str(d / "bm25"), allow_pickle=False)
            _write_sqlite(ix, d / META)
        if remap:
            with t("mapped"):       # before the new index's query state is built on them
                for fut, rebind in remap:
                    fut.result()
                    rebind()
        if meanwhile is not None:
            with t("meanwhile"):
                try:
                    meanwhile()
                except Exception:      # not the save's to fail: the caller runs it again and sees it
                    logging.getLogger("contextrag").debug(
                        "contextrag: the work done while the snapshot was written failed", exc_info=True)
        with t("write_wait"):
            for p, fut in futs:
                files[p.relative_to(d).as_posix()] = fut.result()
    col_enc = files[columns.FILE].pop("encoding")
    paths = sorted((p for p in d.rglob("*") if p.is_file()), key=lambda p: -p.stat().st_size)   # largest first

    def _seal(p: Path) -> tuple:        # fsync and hash, in threads, what the writers did not
        rel = p.relative_to(d).as_posix()
        if rel in files:
            return rel, files[rel]
        _fsync_file(p)
        return rel, {_FILE_SUM: file_sum(p), "bytes": p.stat().st_size}
    with t("fsync"), ThreadPoolExecutor(max_workers=max(1, min(len(paths), os.cpu_count() or 1)),
                                        thread_name_prefix="contextrag-seal") as pool:
        files = dict(sorted(pool.map(_seal, paths)))
    emb = ix.embedder
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "library_version": __version__,
        "created_unix": time.time(), "config": ix.config.to_dict(),
        "embedding": {"model": ix.config.embedding_model, "dim": ix.dim,
                      "query_prefix": getattr(emb, "query_prefix", None),
                      "passage_prefix": getattr(emb, "passage_prefix", None)},
        "counts": _counts(ix), "families": [b.name for b in ix.context.blocks],
        "lexical_families": list(ix.lexical.families) if getattr(ix, "lexical", None) is not None else [],
        "words": {"file": lw.FILE, "version": lw.VERSION} if getattr(ix, "words", None) is not None else None,
        "columns": {"file": columns.FILE, "encoding": col_enc},
        "prepared": {"file": prepared.FILE, **prep_meta} if prep_arrays else None,
        "files": files, _SELF_SUM: _ZERO_SUM.decode(),
    }
    body = json.dumps(manifest, indent=2, default=str).encode()
    digest = hashlib.sha256(body).hexdigest()
    manifest[_SELF_SUM] = digest
    (d / MANIFEST).write_bytes(_with_self_sum(body, digest.encode()))
    _fsync_file(d / MANIFEST)
    _fsync_dir(d)
    return manifest


def check_writable(path) -> Path:
    """``path`` may receive an index: absent, empty, or already an index directory."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    root = Path(path)
    if root.exists() and not root.is_dir():
        raise ValueError(f"path {str(root)!r} exists and is not a directory")
    if root.is_dir() and any(p.name != LOCK for p in root.iterdir()) and not (root / CURRENT).exists():
        raise ValueError(f"path {str(root)!r} is a non-empty directory that is not a contextrag index; "
                         "refusing to write into it")
    return root


def _os_errno(e: BaseException) -> int | None:
    """The OS error that safetensors (its Rust I/O error, "os error 28") and SQLite ("database or disk
    is full") report in their own types, or None for an error of another kind."""
    if not isinstance(e, Exception):
        return None
    msg = str(e)
    m = re.search(r"\(os error (\d+)\)", msg)
    if m:
        return int(m.group(1))
    if isinstance(e, sqlite3.Error) and ("disk is full" in msg or "disk I/O error" in msg):
        return errno.ENOSPC if "full" in msg else errno.EIO
    if "No space left on device" in msg:
        return errno.ENOSPC
    return None


def _discard_failed_save(root: Path, tmp: Path, snap: Path | None, ptr: Path | None) -> None:
    """Remove what a failed save wrote (its temporary or renamed snapshot, its CURRENT candidate), so a
    full disk is not left fuller; CURRENT still names the previous snapshot, which is kept."""
    shutil.rmtree(tmp, ignore_errors=True)
    if ptr is not None:
        with contextlib.suppress(OSError):
            ptr.unlink()
    if snap is not None and current_snapshot(root) != snap.name:
        shutil.rmtree(snap, ignore_errors=True)


def save(ix, path, *, meanwhile=None) -> Path:
    """Write ``ix`` to the index directory ``path`` atomically (see module docstring). ``meanwhile``:
    work to do while the files are written (:func:`write_snapshot`).

    Callers that read-modify-write hold :func:`writer_lock` around the whole sequence. An OSError
    (a full disk, a read-only mount) is re-raised with the path and the assurance that the previous
    index is unchanged, which it is: CURRENT is replaced only after everything else is on disk.
    """
    root = check_writable(path)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-{uuid.uuid4().hex[:8]}"
    snap = ptr = None
    try:
        tmp.mkdir()
        write_snapshot(ix, tmp, meanwhile)
        snap = root / f"snap-{time.time_ns()}-{uuid.uuid4().hex[:8]}"
        os.rename(tmp, snap)
        _fsync_dir(root)
        ptr = root / f".CURRENT-{uuid.uuid4().hex[:8]}"
        ptr.write_text(snap.name + "\n")
        _fsync_file(ptr)
        os.replace(ptr, root / CURRENT)       # the commit point
        _fsync_dir(root)
    except BaseException as e:
        _discard_failed_save(root, tmp, snap, ptr)
        if isinstance(e, OSError):
            code, why = e.errno, e.strerror or str(e)
        else:
            code = _os_errno(e)
            if code is None:
                raise
            why = os.strerror(code)
        name = errno.errorcode.get(code, "") if code else ""
        raise OSError(code, f"saving the index to {str(root)!r} failed ({why}{', ' + name if name else ''}); "
                            "the previous index is unchanged") from e
    _remove_old(root, snap)
    return snap


_REMOVERS: list = []


def _remove_old(root: Path, snap: Path) -> None:
    """Old snapshots and leftovers of killed saves: renamed out of the way now (a leftover name, so a
    killed process's are found by the next save), their files unlinked by a thread (seconds for the
    5.8 GB of a million chunks). The thread is not a daemon: the interpreter waits for it at exit."""
    doomed = []
    for p in root.iterdir():
        if p.name in (snap.name, CURRENT) or not (p.name.startswith((".tmp-", ".CURRENT-", ".old-"))
                                                   or _SNAP_RE.match(p.name)):
            continue
        if not p.is_dir():
            p.unlink(missing_ok=True)
            continue
        if not p.name.startswith(".old-"):
            try:
                p = p.rename(root / f".old-{uuid.uuid4().hex[:8]}")
            except OSError:
                pass
        doomed.append(p)
    if doomed:
        import threading
        t = threading.Thread(target=lambda: [shutil.rmtree(p, ignore_errors=True) for p in doomed],
                             name="contextrag-remove-old", daemon=False)
        t.start()
        _REMOVERS[:] = [r for r in _REMOVERS if r.is_alive()] + [t]


def wait_removals() -> None:
    """Wait until the old snapshots that saves in this process let go of are removed."""
    for t in list(_REMOVERS):
        t.join()


# ---- load ----------------------------------------------------------------------------------

def snapshot_dir(path) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no index at {str(root)!r}")
    if not root.is_dir():
        raise IndexFormatError(f"{str(root)!r} is not a directory, so not a contextrag index")
    for name in (CURRENT, MANIFEST):
        if (root / name).is_symlink():
            raise IndexFormatError(f"{str(root)!r}: {name} is a symbolic link; refused (an index holds plain "
                                   "files only)")
    if (root / CURRENT).is_file():
        raw = (root / CURRENT).read_bytes()
        name = raw[:-1].decode("ascii", errors="replace")
        if (not raw.endswith(b"\n") or not _SNAP_RE.fullmatch(name) or not (root / name).is_dir()
                or (root / name).is_symlink()):
            raise IndexFormatError(f"{str(root)!r}: CURRENT holds {raw[:80]!r}, which does not name a snapshot "
                                   "directory here (corrupt index)")
        return root / name
    if (root / MANIFEST).is_file():
        return root
    raise IndexFormatError(f"{str(root)!r} is not a contextrag index (no CURRENT or {MANIFEST})")


def read_manifest(snap: Path) -> dict:
    _refuse_links(snap, MANIFEST)
    try:
        raw = (snap / MANIFEST).read_bytes()
        m = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        raise IndexFormatError(f"{str(snap)!r}: {MANIFEST} is missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise IndexFormatError(f"{str(snap / MANIFEST)!r} is corrupt (not valid JSON: {e})") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise IndexFormatError(f"{str(snap / MANIFEST)!r} is not a contextrag index manifest "
                               f"(format {m.get('format') if isinstance(m, dict) else None!r})")
    v = m.get("format_version")
    if not isinstance(v, int) or v < 1:
        raise IndexFormatError(f"{str(snap / MANIFEST)!r}: invalid format_version {v!r}")
    if v > FORMAT_VERSION:
        raise IndexFormatError(f"index format version {v} was written by a newer contextrag "
                               f"({m.get('library_version')}); this one reads up to {FORMAT_VERSION}")
    if v >= 2 or _SELF_SUM in m:
        got = m.get(_SELF_SUM)
        if not isinstance(got, str) or hashlib.sha256(_with_self_sum(raw, _ZERO_SUM)).hexdigest() != got:
            raise IndexFormatError(f"{str(snap / MANIFEST)!r} fails its own checksum (corrupt or modified manifest)")
    for key, typ in (("config", dict), ("files", dict), ("embedding", dict), ("counts", dict)):
        if not isinstance(m.get(key), typ):
            raise IndexFormatError(f"{str(snap / MANIFEST)!r} lacks {key!r} (corrupt manifest)")
    return m


def _refuse_links(snap: Path, rel: str) -> None:
    """An index's own files are never symbolic links (a save writes plain files): a link planted in a
    snapshot would make a load read (and its errors describe) a file outside the index."""
    p = snap
    for part in Path(rel).parts:
        p = p / part
        if p.is_symlink():
            raise IndexFormatError(f"index file {rel} is a symbolic link in {str(snap)!r}; refused "
                                   "(an index holds plain files only)")


def verify(snap: Path, manifest: dict, *, wait: bool = True):
    """Check that every file the manifest lists is there, a plain file of its size and checksum.

    ``wait=False``: the names and sizes are checked now, the checksums in threads (the hashes release
    the GIL: the files are hashed while the caller reads them); returns a function that waits for the
    hashes and raises IndexFormatError on a mismatch. At a million chunks the snapshot holds GBs, so
    hashing them on the caller's thread first would double the load time."""
    files = manifest["files"]
    for req in (ARRAYS, META):
        if req not in files:
            raise IndexFormatError(f"manifest lists no {req} (corrupt manifest)")
    for rel, meta in files.items():
        if not isinstance(meta, dict) or Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise IndexFormatError(f"manifest entry {rel!r} is invalid (corrupt manifest)")
        p = snap / rel
        _refuse_links(snap, rel)
        if not p.is_file():
            raise IndexFormatError(f"index file {rel} is missing from {str(snap)!r}")
        if p.stat().st_size != meta.get("bytes"):     # (no sizes in the message: only ours, but still)
            raise IndexFormatError(f"index file {rel} does not have the size its manifest gives "
                                   "(truncated or modified)")
        _sum_kind(rel, meta)
    jobs = sorted(files.items(), key=lambda kv: -int(kv[1].get("bytes") or 0))   # largest first
    if wait:
        for rel, meta in jobs:
            _check_sum(snap, rel, _digest(snap / rel, _sum_kind(rel, meta)), meta)
        return None
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1)),
                              thread_name_prefix="contextrag-verify")
    futures = [(rel, pool.submit(_digest, snap / rel, _sum_kind(rel, meta)), meta) for rel, meta in jobs]
    pool.shutdown(wait=False)

    def finish() -> None:
        for rel, fut, meta in futures:
            _check_sum(snap, rel, fut.result(), meta)
    return finish


def _check_sum(snap: Path, rel: str, digest: str, meta: dict) -> None:
    algorithm = _sum_kind(rel, meta)
    if digest != meta[algorithm]:
        raise IndexFormatError(f"index file {rel} fails its {algorithm} checksum (corrupt or modified)")


_ST_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
              "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
              "U8": np.uint8, "BOOL": np.bool_}


def map_arrays(path: Path) -> dict:
    """The arrays of a safetensors file as views of one private memory map: a load reads no array
    until a query touches it, so it costs the header, not the file (safetensors' own loader copies
    every array into memory). The map is copy-on-write: an update that changes an array in place
    changes this process's pages only, never the snapshot's file."""
    import mmap
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise ValueError("shorter than its 8-byte header length")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    n = int.from_bytes(mm[:8], "little")
    if n > size - 8:
        raise ValueError("its header length exceeds the file")
    header = json.loads(bytes(mm[8:8 + n]))
    base, out = 8 + n, {}
    for key, spec in header.items():
        if key == "__metadata__":
            continue
        dt = np.dtype(_ST_DTYPES[spec["dtype"]])
        a, b = (int(x) for x in spec["data_offsets"])
        shape = tuple(int(x) for x in spec["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= a <= b <= size - base or b - a != count * dt.itemsize:
            raise ValueError(f"array {key!r} lies outside the file or disagrees with its shape")
        arr = np.frombuffer(mm, dtype=dt, count=count, offset=base + a).reshape(shape)
        out[key] = arr if arr.flags.aligned else arr.copy()
    return out


def load(path, *, embedder=None, preload_embedder: bool = False):
    """Load the index at ``path`` (verifying format, version and checksums). ``preload_embedder``:
    start loading the index's embedder model in the background while the tables are read
    (``Embedder.preload``), for a caller that is about to query.

    A writer may replace the snapshot while it is read (readers take no lock): when reading fails and
    CURRENT meanwhile names another snapshot, the new one is read instead.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    for _ in range(100):
        before = current_snapshot(path)
        try:
            return _load_once(path, embedder, preload_embedder)
        except (IndexFormatError, OSError, KeyError, IndexError, ValueError, TypeError, AttributeError) as e:
            if before is None or current_snapshot(path) == before:
                if isinstance(e, (IndexFormatError, OSError)):
                    raise
                raise IndexFormatError(f"index {os.fspath(path)!r}: its tables are inconsistent "
                                       f"({type(e).__name__}: {e}) (corrupt index)") from None
    raise IndexFormatError(f"index {os.fspath(path)!r} kept changing while it was read")


def _load_once(path, embedder, preload_embedder: bool = False):
    from ..config import Config
    from ..embed.embedder import Embedder

    snap = snapshot_dir(path)
    m = read_manifest(snap)
    try:
        config = Config.from_dict(_config_dict(m["config"]))
    except (TypeError, ValueError) as e:
        raise IndexFormatError(f"manifest config is invalid: {e}") from None
    emb = embedder if embedder is not None else Embedder.from_config(config)
    if preload_embedder and callable(getattr(emb, "preload", None)):
        emb.preload()          # the model loads while the files are checked and read
    checked = verify(snap, m, wait=False)   # the checksums are computed while the tables are read
    try:
        ix = _read_snapshot(snap, m, config, emb)
    except BaseException:
        checked()          # a corrupt file is reported as such, not as the error reading it caused
        raise
    checked()
    return ix


def _load_bm25(snap: Path):
    from .bm25_index import load
    try:
        return load(snap / "bm25")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise IndexFormatError(f"bm25 cannot be read: {e} (corrupt index)") from None


def _read_snapshot(snap: Path, m: dict, config, emb):
    from ..llm.ledger import CostLedger
    from .context import FamilyBlock, FuzzyContext
    from .core import Index
    from .graph import ConceptGraph
    try:
        a = map_arrays(snap / ARRAYS)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise IndexFormatError(f"{ARRAYS} cannot be read: {e}") from None
    cols = m.get("columns")
    if cols is not None:              # format 3: the string tables as flat arrays (index/columns.py)
        docs, chunk_ids, chunk_doc_ids, chunk_titles, chunk_texts = _read_columns(snap, m, cols)
    try:
        con = sqlite3.connect(f"file:{snap / META}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise IndexFormatError(f"{META} cannot be opened: {e}") from None
    try:
        if cols is None:              # formats 1-2: one SQLite row per document and per chunk
            docs = {d: {"title": t, "metadata": {} if md == "{}" else json.loads(md)}     # most have none
                    for _, d, t, md in con.execute("SELECT * FROM docs ORDER BY ord")}
            rows = con.execute("SELECT chunk_id, doc_id, title, text FROM chunks ORDER BY idx").fetchall()
            chunk_ids, chunk_doc_ids = [r[0] for r in rows], [r[1] for r in rows]
            chunk_titles, chunk_texts = [r[2] or "" for r in rows], [r[3] for r in rows]
            del rows
        if con.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='doc_segments'").fetchone():
            for d, segs in con.execute("SELECT doc_id, segments FROM doc_segments"):
                if d not in docs:
                    raise ValueError(f"segments of an unknown document {d!r}")
                docs[d]["segments"] = json.loads(segs)
        vitems = con.execute("SELECT item_id, text FROM items ORDER BY idx").fetchall()
        fams = con.execute("SELECT idx, name, weight, attr_names, info, state_keys FROM families ORDER BY idx").fetchall()
        kv = {k: json.loads(v) for k, v in con.execute("SELECT key, value FROM kv")}
    except (sqlite3.Error, ValueError, TypeError) as e:
        raise IndexFormatError(f"{META} cannot be read: {e}") from None
    finally:
        con.close()
    blocks = []
    for i, name, w, names, info, keys in fams:
        keys = json.loads(keys)
        M = _get_csr(a, f"ctx.{i}.csr", boolean=False) if keys["sparse"] else a[f"ctx.{i}.dense"]
        blocks.append(FamilyBlock(name, float(w), M, _get_csr(a, f"ctx.{i}.members", boolean=True),
                                  json.loads(names), a[f"ctx.{i}.groups"],
                                  {k: a[f"ctx.{i}.state.{k}"] for k in keys["state"]},
                                  {k: a[f"ctx.{i}.rows.{k}"] for k in keys["rows"]}, json.loads(info)))
    g = ConceptGraph(a["node_kind"], a["node_parents"], a["node_attr"], a["node_intent"],
                     _get_csr(a, "node_members", boolean=True), a["node_score"],
                     a["edge_src"], a["edge_dst"], a["edge_kind"], a["edge_weight"])
    if "node_cooc.indptr" in a:       # the window counts updates keep (absent before they were stored)
        g.cooc = _get_csr(a, "node_cooc", boolean=False)
    from .columns import LazyStrings
    item_texts = (chunk_texts.with_tail([v[1] for v in vitems]) if isinstance(chunk_texts, LazyStrings)
                  else chunk_texts + [v[1] for v in vitems])
    ix = Index(config=config, docs=docs, chunk_ids=chunk_ids, chunk_doc_ids=chunk_doc_ids,
               chunk_titles=chunk_titles, chunk_texts=chunk_texts,
               chunk_positions=a["chunk_positions"], chunk_spans=a["chunk_spans"],
               chunk_fitted=a["chunk_fitted"].astype(bool), context=FuzzyContext(blocks), graph=g,
               attr_centroids=a["attr_centroids"], item_ids=chunk_ids + [v[0] for v in vitems],
               item_kinds=a["item_kinds"], item_texts=item_texts,
               item_node=a["item_node"], item_members=_get_csr(a, "item_members", boolean=True),
               item_sources=_get_csr(a, "item_sources", boolean=True), embeddings=a["embeddings"],
               bm25=_load_bm25(snap), embedder=emb,
               ledger=CostLedger({k: v for k, v in kv.get("ledger", {}).items() if k != "total"}),
               timings=kv.get("timings", {}), info=kv.get("info", {}))
    if ix.n_items != len(ix.embeddings) or ix.n_chunks != m["counts"].get("chunks"):
        raise IndexFormatError("index tables disagree in length (corrupt index)")
    ix.info["path"] = str(snap)
    if "attr_sums" in a and a["attr_sums"].shape == ix.attr_centroids.shape:   # absent before they were stored
        ix._attr_sums = a["attr_sums"]
    if "chunk_sentences.indptr" in a:     # absent before they were stored (the first update hashes them)
        from .distinct import ChunkSentences
        cs = ChunkSentences(a["chunk_sentences.indptr"], a["chunk_sentences.hashes"])
        if cs.n_chunks != ix.n_chunks or int(cs.indptr[-1]) != cs.hashes.size:
            raise IndexFormatError("chunk_sentences disagree with the chunks (corrupt index)")
        ix.chunk_sentences = cs
    _load_lexical(ix, a, kv.get("lexical"), m)
    _load_words(ix, snap, m)
    _load_prepared(ix, snap, m)
    return ix


@contextlib.contextmanager
def _no_gc():
    """The cyclic collector off while millions of small dicts are made at once: each would count
    towards a collection, and each full collection walks every object made so far (at a million
    documents that was most of the load's time). Nothing made here is garbage; it is on again after."""
    import gc
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_columns(snap: Path, m: dict, cols: dict):
    """(docs, chunk ids, chunk doc ids, chunk titles, chunk texts) from columns.safetensors."""
    from . import columns
    rel = cols.get("file")
    if rel not in m["files"]:
        raise IndexFormatError(f"manifest names the string columns {rel!r} but lists no such file (corrupt manifest)")
    try:
        c = map_arrays(snap / rel)
        enc = cols["encoding"]
        n_docs, n = int(m["counts"]["docs"]), int(m["counts"]["chunks"])
        ids = columns.decode(c["doc.ids"], enc["doc.ids"], n_docs)
        titles = columns.decode(c["doc.titles"], enc["doc.titles"], n_docs)
        metas = columns.decode(c["doc.metadata"], enc["doc.metadata"], n_docs)
        with _no_gc():
            docs = {d: {"title": t, "metadata": {} if md == "{}" else json.loads(md)}      # most have none
                    for d, t, md in zip(ids, titles, metas)}
        if len(docs) != n_docs:
            raise ValueError("repeated document ids")
        out = [columns.decode(c[k], enc[k], n) for k in ("chunk.ids", "chunk.doc_ids", "chunk.titles")]
        texts = columns.LazyStrings(c["chunk.texts"], c["chunk.text_offsets"])
        if len(texts) != n:
            raise ValueError(f"{len(texts)} chunk texts for {n} chunks")
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise IndexFormatError(f"{rel} cannot be read: {e} (corrupt index)") from None
    return (docs, *out, texts)


def _load_prepared(ix, snap: Path, manifest: dict) -> None:
    """What queries derive, as the save stored it (index/prepared.py); an index without it (format
    1-2) derives it on its first query (ContextRAG.prepare), as before."""
    from . import prepared
    meta = manifest.get("prepared")
    if meta is None:
        return
    if meta.get("file") not in manifest["files"]:
        raise IndexFormatError(f"manifest names prepared arrays {meta.get('file')!r} but lists no such file "
                               "(corrupt manifest)")
    try:
        prepared.attach(ix, map_arrays(snap / meta["file"]), meta)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise IndexFormatError(f"{meta.get('file')} cannot be read: {e} (corrupt index)") from None


def _load_words(ix, snap: Path, manifest: dict) -> None:
    """The chunks' stored words, memory-mapped (index/lexical/words.py); a snapshot written before
    they were stored has none: its first update tokenises the corpus once (build._migrated_words)."""
    from .lexical import words as lw
    if lw.FILE not in manifest.get("files", {}):
        return
    try:
        ix.words = lw.load(snap / lw.FILE, ix.n_chunks)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise IndexFormatError(f"{lw.FILE} cannot be read: {e} (corrupt index)") from None


def _load_lexical(ix, arrays: dict, meta, manifest: dict) -> None:
    """The stored lexical families; a snapshot written before they were stored (no "lexical" entry)
    gets them built once here, with a warning, so no query has to build them (saved with the next save)."""
    import logging
    import time as _time

    from .lexical.families import lexical_from_arrays
    if meta is not None:
        try:
            ix.lexical = lexical_from_arrays(arrays, meta)
        except (KeyError, ValueError) as e:
            raise IndexFormatError(f"the lexical families of this index cannot be read: {e}") from None
        return
    from .build import build_lexical, lexical_family_names     # the build stage: only for older snapshots
    if not lexical_family_names(ix.config):
        return
    t = _time.perf_counter()
    build_lexical(ix)
    logging.getLogger("contextrag").warning(
        "contextrag: index snapshot (format version %s, library %s) has no stored lexical families; built %s "
        "from the chunk texts in %.1f s. Save the index (ContextRAG.save) to store them.",
        manifest.get("format_version"), manifest.get("library_version"), list(ix.lexical.families),
        _time.perf_counter() - t)


def _config_dict(d: dict) -> dict:
    out = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
    out.setdefault("stemmer", None)    # an index saved before Config.stemmer existed has unstemmed tokens
    return out
