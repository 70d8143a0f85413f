"""The corpus's words, stored with the index so that an update reads no old text.

Per chunk, the lower-case ``\\w+`` tokens of its BM25 search text "title\\ntext" (every token, of any
length, stopwords included), as ids into one vocabulary kept in order of first occurrence:

* ``seq``: the tokens in text order (CSR: ``indptr``, ``ids``), and ``title_len``, how many of a
  chunk's leading tokens come from its title. The title family's mention matching reads the text part
  of a sequence when a new title appears (:mod:`.incremental`).
* ``bag``: each chunk's distinct words and their counts (CSR: ``bag_indptr``, ``bag_words``,
  ``bag_counts``, words ascending per chunk). BM25 and the "term" family are functions of these counts
  through a per-word map (:func:`.tokens.bm25_word_terms`), so they are recomputed from counts.
* ``title_own``: the column of the chunk's own title in the "title" family, −1 for none.

Storing raw words rather than BM25 terms keeps the snapshot independent of the term definition
(stopwords, any per-token normalisation): the terms are derived from the words when they are needed.
The arrays are written to their own file (:data:`FILE`, safetensors) and memory-mapped on load; the
vocabulary is decoded on first use only (an update), not by a load for queries.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..deferred import DeferredRows

FILE = "tokens.safetensors"
VERSION = 1
KEYS = ("words.vocab", "seq.indptr", "seq.ids", "seq.title_len", "bag.indptr", "bag.words", "bag.counts",
        "title.own")


_ARRAY_FIELDS = ("vocab_utf8", "seq_indptr", "seq_ids", "title_len", "bag_indptr", "bag_words", "bag_counts",
                 "title_own")


@dataclass
class CorpusWords:
    """The stored words of an index's chunks (see the module docstring). Arrays may be memory-mapped
    (read-only): every update builds new arrays rather than writing into them."""
    vocab_utf8: np.ndarray            # uint8: the words, UTF-8, one per line ("\\w+" holds no newline)
    seq_indptr: np.ndarray            # int64 (n + 1,)
    seq_ids: np.ndarray               # int32: word ids of every chunk's tokens, in text order
    title_len: np.ndarray             # int32 (n,): leading tokens of each chunk that are its title's
    bag_indptr: np.ndarray            # int64 (n + 1,)
    bag_words: np.ndarray             # int32: distinct word ids per chunk, ascending
    bag_counts: np.ndarray            # int32: their counts
    title_own: np.ndarray             # int32 (n,): own column in the "title" family, −1 for none
    _vocab: list | None = field(default=None, repr=False)
    _index: dict | None = field(default=None, repr=False)

    def __deepcopy__(self, memo):
        """The arrays are shared, not copied (updates replace them, never write into them), so
        copying an index to change it does not read memory-mapped words into memory."""
        out = CorpusWords(*(getattr(self, k) for k in _ARRAY_FIELDS))
        out._vocab, out._index = self._vocab, self._index
        if getattr(self, "_terms", None) is not None:
            out._terms = self._terms
        memo[id(self)] = out
        return out

    @property
    def n_chunks(self) -> int:
        return int(self.seq_indptr.size - 1)

    @property
    def vocab(self) -> list:
        if self._vocab is None:
            raw = bytes(np.asarray(self.vocab_utf8, np.uint8))
            self._vocab = raw.decode("utf-8").split("\n") if raw else []
        return self._vocab

    @property
    def index(self) -> dict:
        """word -> id (built on first use)."""
        if self._index is None:
            self._index = dict(zip(self.vocab, range(len(self.vocab))))
        return self._index

    def arrays(self) -> dict:
        out = {"words.vocab": self.vocab_utf8, "seq.indptr": self.seq_indptr, "seq.ids": self.seq_ids,
               "seq.title_len": self.title_len, "bag.indptr": self.bag_indptr, "bag.words": self.bag_words,
               "bag.counts": self.bag_counts, "title.own": self.title_own}
        return {k: v if isinstance(v, DeferredRows) else np.ascontiguousarray(v) for k, v in out.items()}

    _DEFERRABLE = ("seq_ids", "bag_words", "bag_counts")     # what an update names instead of copying

    @property
    def deferred(self) -> bool:
        """Whether an update named some arrays as rows of others (index/deferred.py)."""
        return any(isinstance(getattr(self, f), DeferredRows) for f in self._DEFERRABLE)

    def settle(self) -> None:
        """Make the named arrays (no save to write them from their sources)."""
        for f in self._DEFERRABLE:
            a = getattr(self, f)
            if isinstance(a, DeferredRows):
                setattr(self, f, np.asarray(a))

    def mapped_from(self, path) -> "CorpusWords":
        """These words as written to ``path`` (:func:`load`), with the vocabulary and term caches
        already built for them."""
        out = load(path, self.n_chunks)
        out._vocab, out._index = self._vocab, self._index
        if getattr(self, "_terms", None) is not None:
            out._terms = self._terms
        return out

    def check(self, n_chunks: int) -> None:
        """Raise ValueError when the arrays disagree with each other or with ``n_chunks``."""
        n = self.n_chunks
        if n != n_chunks:
            raise ValueError(f"stored words cover {n} chunks, the index has {n_chunks}")
        for name, a, m in (("seq.title_len", self.title_len, n), ("title.own", self.title_own, n),
                           ("bag.indptr", self.bag_indptr, n + 1)):
            if a.shape != (m,):
                raise ValueError(f"{name} has shape {a.shape}, expected ({m},)")
        if int(self.seq_indptr[-1]) != self.seq_ids.size or int(self.bag_indptr[-1]) != self.bag_words.size \
                or self.bag_words.size != self.bag_counts.size:
            raise ValueError("stored word arrays disagree in length")


def empty(n: int = 0) -> CorpusWords:
    z64 = np.zeros(n + 1, np.int64)
    return CorpusWords(np.zeros(0, np.uint8), z64, np.zeros(0, np.int32), np.zeros(n, np.int32), z64.copy(),
                       np.zeros(0, np.int32), np.zeros(0, np.int32), np.full(n, -1, np.int32))


def utf8_lines(words) -> np.ndarray:
    return np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8).copy()


# ---- tokenising chunks --------------------------------------------------------------------------

def tokenize_words(texts) -> tuple:
    """(ids int32, offsets int64 (len(texts) + 1,), vocabulary in order of first occurrence) of every
    lower-case ``\\w+`` token of ``texts``: natively in one pass when the extension loads, else with
    the C-level steps of :mod:`.tokens` (the same result)."""
    from . import tokens as lm
    texts = list(texts)
    C = lm.native_extension()
    if C is not None:
        try:
            ids, offsets, words = _all_words_mapper().token_ids(texts, 1)
            return np.asarray(ids, np.int32), np.asarray(offsets, np.int64), list(words)
        except TypeError:        # an extension built before token_ids took min_chars: the Python path
            pass
    toks = lm.word_tokens(texts)
    lens = np.fromiter(map(len, toks), np.int64, len(toks))
    offsets = np.zeros(len(toks) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    keys, _, ids = lm.first_occurrence_ids(toks, int(offsets[-1]))
    return ids.astype(np.int32), offsets, list(keys)


_MAPPER: list = []


def _all_words_mapper():
    if not _MAPPER:
        from . import tokens as lm
        _MAPPER.append(lm.native_extension().LexicalMapper([], None, 1))
    return _MAPPER[0]


def title_lengths(titles) -> np.ndarray:
    """Tokens of each title (each distinct title counted once)."""
    from .tokens import WORD
    cache: dict = {}
    return np.fromiter((cache[t] if t in cache else cache.setdefault(t, len(WORD.findall((t or "").lower())))
                        for t in titles), np.int32, len(titles))


def search_texts(titles, texts) -> list:
    """The BM25 search text of each chunk (Index.search_texts, chunk rows)."""
    return [f"{ti}\n{tx}" if ti else tx for ti, tx in zip(titles, texts)]


def bags(indptr: np.ndarray, ids: np.ndarray, block_tokens: int = 1 << 24) -> tuple:
    """(indptr, words, counts) of each row's distinct ids and their counts, ascending per row, from
    the row sequences (``indptr``, ``ids``); rows are processed in blocks of about ``block_tokens``."""
    n = indptr.size - 1
    V = int(ids.max()) + 1 if ids.size else 1
    out_w, out_c, per_row = [], [], np.zeros(n, np.int64)
    r = 0
    while r < n:
        e = int(np.searchsorted(indptr, indptr[r] + block_tokens, side="right")) - 1
        e = min(max(e, r + 1), n)
        a, b = int(indptr[r]), int(indptr[e])
        rows = np.repeat(np.arange(r, e, dtype=np.int64), np.diff(indptr[r:e + 1]))
        key = np.sort(rows * V + ids[a:b])
        if key.size:
            first = np.concatenate(([True], key[1:] != key[:-1]))
            starts = np.flatnonzero(first)
            cnt = np.diff(np.append(starts, key.size))
            uk = key[starts]
            out_w.append((uk % V).astype(np.int32))
            out_c.append(cnt.astype(np.int32))
            per_row[r:e] = np.bincount(uk // V - r, minlength=e - r)
        r = e
    bptr = np.zeros(n + 1, np.int64)
    np.cumsum(per_row, out=bptr[1:])
    cat = (lambda xs: np.concatenate(xs) if xs else np.zeros(0, np.int32))
    return bptr, cat(out_w), cat(out_c)


def from_chunks(titles, texts, title_own=None) -> CorpusWords:
    """The stored words of a corpus's chunks, tokenised from their text (a build, or the one-off
    migration of an index whose snapshot predates them). ``title_own``: see :class:`CorpusWords`."""
    titles = [t or "" for t in titles]
    texts = list(texts)
    if len(titles) != len(texts):
        raise ValueError(f"titles has {len(titles)} entries, texts has {len(texts)}")
    ids, offsets, vocab = tokenize_words(search_texts(titles, texts))
    bptr, bw, bc = bags(offsets, ids)
    own = np.full(len(texts), -1, np.int32) if title_own is None else np.asarray(title_own, np.int32)
    return CorpusWords(utf8_lines(vocab), offsets, ids, title_lengths(titles), bptr, bw, bc, own,
                       _vocab=list(vocab))


# ---- the snapshot file --------------------------------------------------------------------------

def save(words: CorpusWords, path) -> None:
    from safetensors.numpy import save_file
    save_file(words.arrays(), str(path), metadata={"version": str(VERSION)})


_DTYPES = {"U8": np.uint8, "I32": np.int32, "I64": np.int64}


def load(path, n_chunks: int) -> CorpusWords:
    """The stored words at ``path``, memory-mapped (read-only); ValueError when the file is malformed."""
    p = Path(path)
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError(f"{p.name}: truncated header")
        (hlen,) = struct.unpack("<Q", head)
        if hlen > 1 << 24:
            raise ValueError(f"{p.name}: header of {hlen} bytes")
        header = json.loads(f.read(hlen))
    meta = header.pop("__metadata__", {}) or {}
    if int(meta.get("version", VERSION)) > VERSION:
        raise ValueError(f"{p.name}: version {meta.get('version')} is newer than this library reads ({VERSION})")
    base = 8 + hlen
    size = p.stat().st_size
    arrs = {}
    for k in KEYS:
        if k not in header:
            raise ValueError(f"{p.name}: no array {k!r}")
        h = header[k]
        dt = _DTYPES.get(h.get("dtype"))
        b, e = (int(x) for x in h["data_offsets"])
        shape = tuple(int(x) for x in h["shape"])
        if dt is None or len(shape) != 1 or e - b != shape[0] * np.dtype(dt).itemsize or base + e > size:
            raise ValueError(f"{p.name}: array {k!r} is malformed")
        arrs[k] = np.zeros(0, dt) if shape[0] == 0 else np.memmap(p, dtype=dt, mode="r", offset=base + b, shape=shape)
    w = CorpusWords(arrs["words.vocab"], arrs["seq.indptr"], arrs["seq.ids"], arrs["seq.title_len"],
                    arrs["bag.indptr"], arrs["bag.words"], arrs["bag.counts"], arrs["title.own"])
    w.check(n_chunks)
    return w
