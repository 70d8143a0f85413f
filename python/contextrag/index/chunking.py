"""Stage 1a: documents -> chunks (token windows with overlap), keeping doc_id, title and position.

Tokens are counted with the *embedder's own tokenizer* when one is given (a Hugging Face fast
tokenizer with character offsets), so a chunk of ``Config.chunk_tokens`` tokens fits the embedder's
window exactly and is never silently truncated at embedding time. Without one (tests, custom
embedders) a regular-expression tokenizer (words and single punctuation marks) is used. Either way
the chunk text is an exact slice of the document text, from its first token's start to its last
token's end, so nothing is rewritten. A window's edges fall between words: the model's tokenizer
splits a word into several tokens ("embedder's" as "embedder", "'", "s"), and a window cut at a token
boundary inside it would start at "s". Each edge moves to the nearest word boundary (whitespace
between two tokens) inside the window, within the overlap, so the windows still cover every token and
none is longer than ``size`` tokens (see :func:`windows`). See docs/ALGORITHM.md, "Chunking".
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from .segments import check_segments

_TOKEN_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


@dataclass
class Document:
    doc_id: str
    text: str
    title: str = ""
    metadata: dict = field(default_factory=dict)
    segments: dict = field(default_factory=dict)   # pages/sections: contextrag.index.segments


def doc_entry(doc: Document) -> dict:
    """The index's record of a document (``Index.docs[doc_id]``): title, metadata, and its segments
    when it has any."""
    entry = {"title": doc.title, "metadata": doc.metadata}
    if doc.segments:
        entry["segments"] = doc.segments
    return entry


@dataclass
class Chunk:
    doc_id: str
    position: int          # index of the chunk within its document (0, 1, ...)
    text: str
    title: str = ""
    start_char: int = 0    # [start_char, end_char) of the text inside the document
    end_char: int = 0

    @property
    def chunk_id(self) -> str:
        return chunk_id(self.doc_id, self.position)


def chunk_id(doc_id: str, position: int) -> str:
    """``doc_id#position``. Unambiguous for any doc_id, '#' included: the position is the digits after
    the *last* '#', so (doc_id, position) is recovered by ``rpartition('#')``; virtual item ids
    (``summary:N``, ``join:N``, ``meet:N``) hold no '#' and cannot equal a chunk id."""
    return f"{doc_id}#{int(position)}"


def split_chunk_id(cid: str) -> tuple[str, int]:
    doc, sep, pos = cid.rpartition("#")
    if not sep or not pos.isdigit() or not pos.isascii():
        raise ValueError(f"{cid!r} is not a chunk id (doc_id#position)")
    return doc, int(pos)


def check_finite(value, where: str, *, dotted: bool = False) -> None:
    """ValueError naming the field when ``value`` holds NaN or ±Infinity (nested dicts, lists and tuples
    searched). They have no JSON form: stored in metadata they would break every JSON reply that shows
    the document. The field reads ``where['key'][0]``, or with ``dotted`` ``where.key[0]`` (the HTTP
    API's notation for a JSON body)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: {value!r} is not a finite number (JSON has no NaN or Infinity)")
    if isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{where}.{k}" if dotted else f"{where}[{k!r}]", dotted=dotted)
    elif isinstance(value, (list, tuple)):
        for j, v in enumerate(value):
            check_finite(v, f"{where}[{j}]", dotted=dotted)


def normalize_docs(docs: Iterable[Any], *, id_prefix: str = "doc", start: int = 0) -> list[Document]:
    """Accept str or dict(id, text, title=..., metadata=..., segments=...) items; reject anything else
    naming ``docs``. ``segments``: pages/sections of the text (contextrag.index.segments).

    Strings get ids ``{id_prefix}{i}``. Duplicate ids and empty texts are rejected: a duplicate
    would make ``delete(doc_ids)`` ambiguous, an empty text yields no chunk to retrieve.
    """
    if docs is None or isinstance(docs, (str, bytes, dict)):
        raise TypeError(f"docs must be an iterable of str or dict(id, text, ...), got {type(docs).__name__}")
    try:
        items = list(docs)
    except TypeError:
        raise TypeError(f"docs must be an iterable of str or dict(id, text, ...), got {type(docs).__name__}") from None
    out: list[Document] = []
    seen: set[str] = set()
    for i, d in enumerate(items):
        if isinstance(d, str):
            doc = Document(f"{id_prefix}{start + i}", d)
        elif isinstance(d, dict):
            if "text" not in d:
                raise ValueError(f"docs[{i}] has no 'text' field (keys: {sorted(d)})")
            text = d["text"]
            if not isinstance(text, str):
                raise TypeError(f"docs[{i}]['text'] must be a str, got {type(text).__name__}")
            did = d.get("id", d.get("doc_id", f"{id_prefix}{start + i}"))
            if not isinstance(did, (str, int)) or isinstance(did, bool):
                raise TypeError(f"docs[{i}]['id'] must be a str or int, got {type(did).__name__}")
            title = d.get("title") or ""
            if not isinstance(title, str):
                raise TypeError(f"docs[{i}]['title'] must be a str, got {type(title).__name__}")
            meta = d.get("metadata") or {}
            if not isinstance(meta, dict):
                raise TypeError(f"docs[{i}]['metadata'] must be a dict, got {type(meta).__name__}")
            check_finite(meta, f"docs[{i}]['metadata']")
            segs = check_segments(d.get("segments"), len(text), f"docs[{i}]['segments']")
            doc = Document(str(did), text, title, dict(meta), segs)
        else:
            raise TypeError(f"docs[{i}] must be a str or a dict(id, text, ...), got {type(d).__name__}")
        if not doc.text.strip():
            raise ValueError(f"docs[{i}] (id {doc.doc_id!r}) has an empty text")
        if not doc.doc_id:
            raise ValueError(f"docs[{i}] has an empty id; a document id is any non-empty string")
        if doc.doc_id in seen:
            raise ValueError(f"docs[{i}] repeats the id {doc.doc_id!r}; document ids must be unique")
        _check_unicode(doc, i)
        seen.add(doc.doc_id)
        out.append(doc)
    return out


def _check_unicode(doc: Document, i: int) -> None:
    """Lone surrogates (a JSON "\\ud800" escape gives one) are not Unicode text: no tokenizer, UTF-8
    encoder or index file takes them, so they are refused here, naming where; a text that draws
    nothing (only whitespace and zero-width characters) is as empty as an empty one."""
    from ..textfile import has_visible_text, lone_surrogate
    fields = [("id", doc.doc_id), ("text", doc.text), ("title", doc.title)]
    fields += [(f"metadata key {k!r}", k) for k in doc.metadata if isinstance(k, str)]
    fields += [(f"metadata[{k!r}]", v) for k, v in doc.metadata.items() if isinstance(v, str)]
    for name, value in fields:
        at = lone_surrogate(value)
        if at is not None:
            raise ValueError(f"docs[{i}] {name} holds a lone surrogate (\\u{ord(value[at]):04x} at character "
                             f"{at}), which is not valid Unicode")
    if not has_visible_text(doc.text):
        raise ValueError(f"docs[{i}] (id {ascii(doc.doc_id)}) has no visible text (only whitespace and "
                         "zero-width characters)")


def _regex_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _TOKEN_RE.finditer(text)]


def _tokenizer_offsets(tokenizer, text: str) -> list:
    """The tokens' character offsets, empty ones (b == a) included."""
    return tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False,
                     verbose=False)["offset_mapping"]


def _tokenizer_spans(tokenizer, text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in _tokenizer_offsets(tokenizer, text) if b > a]


def _outer_span(offsets) -> tuple[int, int] | None:
    """(start of the first non-empty token, end of the last one), None when every token is empty."""
    first = next((o for o in offsets if o[1] > o[0]), None)
    if first is None:
        return None
    last = next(o for o in reversed(offsets) if o[1] > o[0])
    return int(first[0]), int(last[1])


def windows(toks, size: int, overlap: int) -> list[tuple[int, int]]:
    """[start, end) token indices of the windows over the token spans ``toks`` ((start, end) characters,
    non-empty, in order): ``size`` tokens advancing by ``size - overlap``, each edge then moved to a
    word boundary, a token with whitespace before it (or the text's end).

    A window's start moves forward to the first word boundary before the next window's start and
    within ``overlap`` tokens: the tokens it skips are the previous window's last ones. Its end moves
    back to the last word boundary that still reaches the next window's start and lies past the
    previous window's end. Where no boundary lies within those limits (a run of more tokens than the
    overlap with no whitespace: a URL, text without spaces) the edge stays at the token boundary. So
    the windows cover every token, none holds more than ``size`` tokens, their count is that of the
    plain token windows, and each adds a token the one before lacks."""
    n, step = len(toks), size - overlap
    starts = list(range(0, max(n - overlap, 1), step))
    if len(starts) == 1:
        return [(0, min(size, n))]
    at = np.asarray(toks, dtype=np.int64)
    # token i begins a word when something (whitespace) lies between it and token i-1; n: the text's end
    word = np.flatnonzero(np.concatenate([[True], at[1:, 0] > at[:-1, 1], [True]]))
    moved = []
    for k, s in enumerate(starts):
        limit = min(s + overlap, starts[k + 1] if k + 1 < len(starts) else n)
        j = int(word[np.searchsorted(word, s)])
        moved.append(j if j < limit else s)
    out, last_end = [], 0
    for k, s in enumerate(moved):
        e = min(starts[k] + size, n)
        if e < n:
            lo = max(moved[k + 1], last_end + 1)
            j = int(word[np.searchsorted(word, e, side="right") - 1])
            e = j if j >= lo else e
        out.append((s, e))
        last_end = e
    return out


class Chunker:
    """Token windows of ``size`` tokens advancing by ``size - overlap``.

    ``tokenizer``: a Hugging Face *fast* tokenizer (needs offsets) or None for the regex tokenizer.
    A window starts only where it adds at least one token the previous window lacks, so a
    document of n <= size tokens is one chunk and no window is a pure repeat.
    """

    def __init__(self, size: int = 200, overlap: int = 40, tokenizer=None):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size must be an int >= 1, got {size!r}")
        if isinstance(overlap, bool) or not isinstance(overlap, int) or not 0 <= overlap < size:
            raise ValueError(f"overlap must be an int in [0, size), got {overlap!r}")
        if tokenizer is not None and not getattr(tokenizer, "is_fast", False):
            tokenizer = None  # slow tokenizers give no offsets; fall back to the regex tokenizer
        self.size, self.overlap, self.tokenizer = size, overlap, tokenizer

    @property
    def kind(self) -> str:
        return "model" if self.tokenizer is not None else "regex"

    def spans(self, text: str) -> list[tuple[int, int]]:
        return _tokenizer_spans(self.tokenizer, text) if self.tokenizer is not None else _regex_spans(text)

    def split(self, doc: Document) -> list[Chunk]:
        if self.tokenizer is not None:
            offsets = _tokenizer_offsets(self.tokenizer, doc.text)
            if len(offsets) <= self.size:
                # at most ``size`` tokens: one chunk from the first token to the last, found without
                # a Python pass over every token (most documents of a large corpus are this short)
                span = _outer_span(offsets)
                if span is not None:
                    a, b = span
                    return [Chunk(doc.doc_id, 0, doc.text[a:b], doc.title, a, b)]
            toks = [(int(a), int(b)) for a, b in offsets if b > a]
        else:
            toks = _regex_spans(doc.text)
        if not toks:  # text of only whitespace/control characters: keep it whole
            return [Chunk(doc.doc_id, 0, doc.text.strip(), doc.title, 0, len(doc.text))]
        out = []
        for pos, (s, e) in enumerate(windows(toks, self.size, self.overlap)):
            a, b = toks[s][0], toks[e - 1][1]
            out.append(Chunk(doc.doc_id, pos, doc.text[a:b], doc.title, a, b))
        return out

    def split_all(self, docs: list[Document]) -> list[Chunk]:
        out: list[Chunk] = []
        for d in docs:
            out.extend(self.split(d))
        return out
