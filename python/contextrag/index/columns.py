"""The index's string tables (document ids, titles and metadata; chunk ids, documents, titles and
texts) as a few flat byte arrays in ``columns.safetensors``, instead of one SQLite row per chunk.

Reading a million rows from SQLite into Python lists and dicts was most of a large index's load
(one Python object per field per row, built by the cursor). Here a column is one UTF-8 buffer:

* short columns (ids, titles, metadata) are the strings joined by NUL ("nul"), decoded and split in
  two C calls; a column with a string that holds a NUL itself (or a non-string) is stored as one
  JSON array instead ("json");
* the chunk texts (most of the bytes) stay in the memory-mapped file: :class:`LazyStrings` decodes
  a text when it is asked for (a hit, an update), so a load reads none of them.
"""
from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from .layout import kept_rows

FILE = "columns.safetensors"
_SEP = "\x00"


def encode(values: list) -> tuple[np.ndarray, str]:
    """(uint8 bytes, encoding) of a list of strings (see the module docstring)."""
    try:
        joined = _SEP.join(values)      # a TypeError names a value that is no string (None, a number)
    except TypeError:
        joined = None
    if joined is not None and joined.count(_SEP) == max(len(values) - 1, 0):
        return np.frombuffer(joined.encode("utf-8"), np.uint8), "nul"
    return np.frombuffer(json.dumps(values, ensure_ascii=False).encode("utf-8"), np.uint8), "json"


def decode(raw: np.ndarray, encoding: str, n: int) -> list:
    """The inverse of :func:`encode` (``n``: the number of strings, checked)."""
    text = str(memoryview(np.ascontiguousarray(raw, np.uint8)), "utf-8")
    if encoding == "nul":
        out = text.split(_SEP) if n else []
    elif encoding == "json":
        out = json.loads(text)
    else:
        raise ValueError(f"unknown column encoding {encoding!r}")
    if not isinstance(out, list) or len(out) != n:
        raise ValueError(f"a column holds {len(out) if isinstance(out, list) else '?'} values, expected {n}")
    return out


def encode_texts(texts) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 UTF-8 bytes of all texts, int64 byte offsets (n + 1,)) for :class:`LazyStrings`."""
    parts = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(np.fromiter((len(p) for p in parts), np.int64, len(parts)), out=offsets[1:])
    return np.frombuffer(b"".join(parts), np.uint8), offsets


class LazyStrings(Sequence):
    """An immutable list of strings kept as UTF-8 bytes and offsets (a memory map), each decoded
    when asked for; ``tail`` holds strings after them (a plain list: the index's virtual items).

    It reads like a list (indexing, slices, iteration, ``len``, ``==`` with a list). It never changes:
    ``+`` (and ``+=``, which rebinds) gives a new one with the added strings in its tail, and
    :meth:`take` one of the chosen strings, so an update neither decodes nor re-encodes the stored
    ones (:meth:`encoded` encodes the tail alone)."""

    __slots__ = ("_buf", "_off", "_n", "_tail")

    def __init__(self, buf: np.ndarray, offsets: np.ndarray, tail: list | None = None):
        offsets = np.asarray(offsets)
        if offsets.ndim != 1 or offsets.size < 1 or offsets.dtype.kind not in "iu":
            raise ValueError("offsets must be a 1-D integer array of n + 1 byte offsets")
        if int(offsets[0]) != 0 or int(offsets[-1]) != buf.size or (offsets.size > 1 and bool((np.diff(offsets) < 0).any())):
            raise ValueError("offsets must rise from 0 to the size of the buffer")
        self._buf, self._off, self._n = buf, offsets, int(offsets.size - 1)
        self._tail = list(tail or [])

    def _one(self, i: int) -> str:
        if i < self._n:
            a, b = int(self._off[i]), int(self._off[i + 1])
            return str(memoryview(self._buf[a:b]), "utf-8")
        return self._tail[i - self._n]

    def __len__(self) -> int:
        return self._n + len(self._tail)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._one(j) for j in range(*i.indices(len(self)))]
        j = int(i)
        if j < 0:
            j += len(self)
        if not 0 <= j < len(self):
            raise IndexError("string index out of range")
        return self._one(j)

    def __iter__(self):
        for i in range(self._n):
            yield self._one(i)
        yield from self._tail

    def with_tail(self, tail: list) -> "LazyStrings":
        """The same stored strings followed by ``tail``."""
        return LazyStrings(self._buf, self._off, tail)

    def __eq__(self, other) -> bool:
        if isinstance(other, (list, tuple, LazyStrings)):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None     # type: ignore[assignment]   (like a list)

    def __add__(self, other) -> "LazyStrings":
        if isinstance(other, str) or not isinstance(other, (list, tuple, LazyStrings)):
            return NotImplemented
        return LazyStrings(self._buf, self._off, self._tail + list(other))

    def take(self, indices) -> "LazyStrings":
        """The strings at ``indices`` (ascending, as a delete keeps them), gathered as bytes."""
        idx = np.asarray(indices, np.int64)
        if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= len(self))):
            raise IndexError("take: indices out of range")
        stored, tail = idx[idx < self._n], idx[idx >= self._n]
        if stored.size > 1 and bool((np.diff(stored) <= 0).any()):
            raise ValueError("take: indices must be ascending and distinct")
        off, buf = kept_rows(np.asarray(self._off, np.int64), np.asarray(self._buf, np.uint8), stored)
        return LazyStrings(np.ascontiguousarray(buf), off, [self._tail[i - self._n] for i in tail])

    def encoded(self) -> tuple[np.ndarray, np.ndarray]:
        """(bytes, offsets) of every string, as :func:`encode_texts` gives them: the stored bytes as
        they are, the tail encoded."""
        if not self._tail:
            return self._buf, self._off
        tb, to = encode_texts(self._tail)
        return (np.concatenate([np.asarray(self._buf, np.uint8), tb]),
                np.concatenate([self._off, self._off[-1] + to[1:]]))

    def __radd__(self, other) -> list:
        return list(other) + list(self)

    def __copy__(self) -> "LazyStrings":
        return self

    def __deepcopy__(self, memo) -> "LazyStrings":
        return self            # immutable: a copy of the index shares it

    def __reduce__(self):
        return (list, (list(self),))

    def __repr__(self) -> str:
        return f"LazyStrings({len(self)} strings)"
