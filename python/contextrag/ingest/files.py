"""Documents from files: a folder (walked recursively), single files, or a list of both.

* Readers by suffix: .txt/.text/.rst (text, decoded by contextrag.textfile), .md/.markdown
  (ingest/markdown.py), .pdf (pypdf), .html/.htm (trafilatura), .docx (python-docx); .json/.jsonl
  given by path are corpora of records (ingest/records.py). In a folder walk other files, .json and
  .jsonl included, and hidden files and folders (".git") are ignored (counted, not read).
* Document ids: a folder's files get their path relative to that folder ("guide/intro.md"); a file
  given by itself gets its name; ``root`` makes every id relative to that folder instead (a file
  outside it is an error). ``file_roots`` (what ``add`` passes: the index's source folder, then the
  current folder) come first where they hold the file: each file's id is its path relative to the
  first of them inside which it lies. ``Ingested.root`` is the folder the ids are relative to
  (``root``, or the one folder given), which an index remembers as its source folder.
* Each file document's metadata: ``source`` (= its id), ``sha256`` (of the file's bytes),
  ``format`` (pdf, html, markdown, text, docx), what the reader found (``pages``, ``author``,
  ``date``, ``year``, front-matter fields), and its pages or sections as segments
  (contextrag.index.segments).
* A file that cannot be read (binary, undecodable, encrypted or broken PDF, a reader's failure such
  as a PDF compression bomb, no visible text, larger than ``MAX_FILE_BYTES``, a symlink loop, a
  name that is not UTF-8) is skipped, or is a ValueError with ``strict``; one warning names every
  skipped file and its reason (files sharing a reason said together); when nothing at all is readable
  that is a ValueError saying so. Entries that are not regular files (FIFOs, sockets, devices, also
  behind a symlink) are skipped without being opened; every read is bounded by ``MAX_FILE_BYTES``.
  A format whose reader cannot be imported (pypdf, trafilatura and lxml_html_clean, python-docx
  missing or broken) has its files skipped for that reason, naming the extra that installs it
  (pip install 'contextrag[docs]'): one format's missing package never stops the others.
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..textfile import TextFileWarning, has_visible_text, shown_name, sniff
from .base import Extracted, Unreadable, scalar_metadata, skipped_summary
from .records import Fields, read_records, unique

log = logging.getLogger("contextrag.ingest")

KINDS = {".txt": "text", ".text": "text", ".rst": "text", ".md": "markdown", ".markdown": "markdown",
         ".pdf": "pdf", ".html": "html", ".htm": "html", ".docx": "docx"}
RECORD_SUFFIXES = (".json", ".jsonl")


@dataclass(frozen=True)
class Source:
    path: Path
    doc_id: str
    kind: str


@dataclass
class Listing:
    sources: list[Source] = field(default_factory=list)
    records: list[Path] = field(default_factory=list)
    ignored: int = 0


@dataclass
class Ingested:
    docs: list[dict]
    files: int                      # document files looked at (records files not counted)
    skipped: list[tuple[str, str]]  # (file, reason)
    ignored: int                    # files of other types in the folders walked
    root: Path | None = None        # the folder every file id is relative to, when there is one

    def summary(self) -> str:
        s = f"read {_n(len(self.docs), 'document')} from {_n(self.files, 'file')}"
        if self.skipped:
            s += f"; {len(self.skipped)} skipped (unreadable, see the warnings)"
        if self.ignored:
            s += f"; {_n(self.ignored, 'file')} of other types ignored"
        return s


def _n(k: int, word: str) -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")


def as_paths(paths, what: str = "paths") -> list[Path]:
    """``paths`` (a str/PathLike, or an iterable of them) as a list of Paths."""
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    if isinstance(paths, (bytes, dict)) or not hasattr(paths, "__iter__"):
        raise TypeError(f"{what} must be a path or a list of paths, got {type(paths).__name__}")
    out = []
    for p in paths:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"{what} must hold str or os.PathLike paths, got {type(p).__name__}")
        out.append(Path(p))
    if not out:
        raise ValueError(f"{what} is empty: give a folder or at least one file")
    return out


def _walk(folder: Path):
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith("."):
                yield Path(dirpath) / name


def _rel_id(path: Path, base: Path) -> str:
    for form in (Path, Path.absolute, Path.resolve):   # tried in turn: resolve() fails on a symlink loop
        try:
            return form(path).relative_to(form(base)).as_posix()
        except (ValueError, RuntimeError, OSError):
            continue
    raise ValueError(f"{path} is not inside {base}, the folder document ids are relative to (--root, or "
                     "the source folder the index remembers); give --root to choose another")


def _first_rel(path: Path, roots) -> str | None:
    for r in roots:
        try:
            return _rel_id(path, Path(r))
        except ValueError:
            continue
    return None


def list_files(paths, *, root=None, file_roots=()) -> Listing:
    """The document files and record corpora that ``paths`` name, with their document ids."""
    base = None if root is None else Path(root)
    if base is not None and not base.is_dir():
        raise NotADirectoryError(f"root {str(base)!r} is not a folder")
    out = Listing()
    seen: dict[str, Path] = {}
    for p in as_paths(paths):
        if not p.exists():
            raise FileNotFoundError(f"corpus {str(p)!r} does not exist")
        if p.is_dir():
            for f in _walk(p):
                kind = KINDS.get(f.suffix.lower())
                if kind is None:
                    out.ignored += 1
                    continue
                rel = _rel_id(f, base) if base is not None else _first_rel(f, file_roots) or _rel_id(f, p)
                out.sources.append(Source(f, rel, kind))
        else:
            suffix = p.suffix.lower()
            if suffix in RECORD_SUFFIXES:
                out.records.append(p)
                continue
            kind = KINDS.get(suffix)
            if kind is None:
                raise ValueError(f"corpus {str(p)!r} is not a supported file: give a folder, a .json or .jsonl "
                                 f"corpus, or files ending in {', '.join(sorted(KINDS))}")
            rel = _rel_id(p, base) if base is not None else _first_rel(p, file_roots) or p.name
            out.sources.append(Source(p, rel, kind))
    for s in out.sources:
        if s.doc_id in seen and seen[s.doc_id].resolve() != s.path.resolve():
            raise ValueError(f"{seen[s.doc_id]} and {s.path} would share the document id {s.doc_id!r}; "
                             "give their common folder (or --root) so ids keep the folder names")
        seen[s.doc_id] = s.path
    out.sources = list({s.doc_id: s for s in out.sources}.values())   # a file named twice is read once
    return out


MAX_FILE_BYTES = 512 << 20     # a corpus file larger than this is skipped (every read is bounded by it)
_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def _not_regular(mode: int) -> str:
    return next((what for test, what in _FILE_KINDS if test(mode)), "a special entry")


def read_file_bytes(path: Path, limit: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed), at most ``limit`` of them.

    Unreadable for anything else, without opening it (a FIFO would block the open, a device such as
    /dev/zero never ends), for a file larger than ``limit``, and for an OSError (a symlink loop, no
    permission). The open is non-blocking and the opened file is checked again, so an entry replaced
    by a FIFO between the check and the open cannot block either."""
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(f"it is {_not_regular(st.st_mode)}, not a regular file")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise Unreadable(f"it is {_not_regular(st.st_mode)}, not a regular file")
            if st.st_size > limit:
                raise Unreadable(f"it is larger than the {_size(limit)} a corpus file may have")
            data = f.read(limit + 1)
    except OSError as e:
        raise Unreadable(f"it cannot be read ({e.strerror or type(e).__name__})") from None
    if len(data) > limit:
        raise Unreadable(f"it grew past the {_size(limit)} a corpus file may have while it was read")
    return data


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_text(data: bytes) -> Extracted:
    text, note = sniff(data)
    if text is None:
        raise Unreadable(note.removeprefix("skipped, "))
    ex = Extracted(text)
    if note:
        ex.metadata["encoding_note"] = note
    return ex


def _read_markdown(data: bytes) -> Extracted:
    from .markdown import markdown_to_text
    ex = _read_text(data)
    note = ex.metadata.get("encoding_note")
    out = markdown_to_text(ex.text)
    if note:
        out.metadata["encoding_note"] = note
    return out


def _reader(kind: str):
    if kind == "text":
        return _read_text
    if kind == "markdown":
        return _read_markdown
    if kind == "pdf":
        from .pdf import read_pdf
        return read_pdf
    if kind == "html":
        from .html import read_html

        def html(data):
            if b"\x00" in data[:8192]:
                raise Unreadable("it is a binary file")
            return read_html(data)
        return html
    if kind == "docx":
        from .docx import read_docx
        return read_docx
    raise ValueError(f"unknown document kind {kind!r}")


def read_source(src: Source, data: bytes | None = None) -> dict:
    """The document (a dict for ContextRAG.build/add) of one file; Unreadable when it cannot be read."""
    if shown_name(src.doc_id) != src.doc_id:
        raise Unreadable("its name is not valid UTF-8 (rename the file)")
    if data is None:
        data = read_file_bytes(src.path)
    if not data.strip():
        raise Unreadable("it is empty")
    reader = _reader(src.kind)
    try:
        ex = reader(data)
    except (Unreadable, ImportError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as e:    # noqa: BLE001 - a reader's failure on one file (a PDF bomb's LimitReachedError...)
        raise Unreadable(f"its {src.kind} reader failed ({type(e).__name__}: {e})"[:300]) from None
    if not has_visible_text(ex.text):
        raise Unreadable("it holds no text")
    note = ex.metadata.pop("encoding_note", None)
    if note:
        warnings.warn(f"corpus file {src.doc_id}: {note}", TextFileWarning, stacklevel=2)
    meta = {**scalar_metadata(ex.metadata), "source": src.doc_id, "sha256": sha256_hex(data), "format": src.kind}
    title = " ".join((ex.title or "").split()) or src.path.stem.replace("_", " ")
    doc = {"id": src.doc_id, "text": ex.text, "title": title, "metadata": meta}
    if ex.segments:
        doc["segments"] = ex.segments
    return doc


def read_documents(paths, *, root=None, strict: bool = False, fields: Fields = Fields(),
                   file_roots=()) -> Ingested:
    """Every document that ``paths`` name (see the module docstring), in a stable order."""
    listing = list_files(paths, root=root, file_roots=file_roots)
    docs: list[dict] = []
    skipped: list[tuple[str, str]] = []
    for src in listing.sources:
        try:
            docs.append(read_source(src))
        except Unreadable as e:
            name = shown_name(src.doc_id)
            if strict:
                raise ValueError(f"corpus file {name} is unreadable: {e} (--strict; without it the "
                                 "file would be skipped)") from None
            skipped.append((name, str(e)))
    if skipped:   # one warning for them all (files sharing a reason, a missing reader's, said once)
        warnings.warn(f"corpus: {skipped_summary(skipped, len(listing.sources))}", TextFileWarning, stacklevel=2)
    for rec in listing.records:
        docs.extend(read_records(rec, fields))
    given = as_paths(paths)
    base = Path(root) if root is not None else given[0] if len(given) == 1 and given[0].is_dir() else None
    out = Ingested(docs, len(listing.sources), skipped, listing.ignored,
                   base.resolve() if base is not None else None)
    if not docs:
        names = ", ".join(shown_name(str(p)) for p in as_paths(paths))[:200]
        if skipped:
            raise ValueError(f"nothing readable in {names}: all {len(skipped)} files were skipped "
                             f"(first: {skipped[0][0]}: {skipped[0][1]})")
        raise ValueError(f"nothing readable in {names}: no files of a supported type "
                         f"({', '.join(sorted(KINDS))}, or .json/.jsonl given by path)")
    unique(docs, "corpus")
    log.info(out.summary())
    return out
