"""An update's largest arrays as rows of other arrays, gathered only when written.

An add's embeddings are the stored ones followed by the new chunks'; a delete's are the stored ones
it keeps. So are the stored words (index/lexical/words.py: every chunk's word ids and bags of
words), which an update reads where they lie (the old rows in the old arrays, the new chunks' in
their own). Stacking or gathering them made fresh arrays, 1.7 GB at a million chunks, which the save
then wrote and the process kept. :class:`DeferredRows` names those rows instead; the store writes
them to the new snapshot a block of rows at a time (index/store.py) and then maps the files it
wrote, so the update never holds a second copy. On a virtual machine whose host takes back the
guest's free memory, the first touch of a fresh gigabyte took 2.37 s, 2.26 s of it in the kernel
(the 2-core AMX Xeon, bench/bench_fresh_memory.py), more than the copy itself.

Where no save follows (an index without a path), :func:`settle` makes the arrays. Anything else
that reads one gets an ndarray: NumPy's ``np.asarray`` makes it (``__array__``), row indexing gathers
only the rows asked for, and a slice inside one source's run is a view of that source.
"""
from __future__ import annotations

import numpy as np

GATHER_BYTES = 8 << 20      # rows gathered per block when written


class DeferredRows:
    """A 1-D or 2-D array given as row selections of source arrays of one dtype and row shape,
    stacked in order (a 1-D array's rows are its elements). ``parts``: (source, rows) pairs, ``rows``
    None (every row), a slice with step 1, or an ascending 1-D integer array. The sources must not
    change while this object is alive (an update's are the previous snapshot's read-only maps and
    fresh arrays of its own)."""

    def __init__(self, parts):
        self.parts = []
        width = dtype = None
        for src, rows in _flat(parts):
            src = np.asarray(src)
            if src.ndim not in (1, 2):
                raise ValueError(f"parts: each source must be 1-D or 2-D, got shape {src.shape}")
            if width is None:
                width, dtype = src.shape[1:], src.dtype
            elif src.shape[1:] != width or src.dtype != dtype:
                raise ValueError(f"parts: sources must share row shape and dtype, got {src.shape[1:]}/{src.dtype} "
                                 f"after {width}/{dtype}")
            if rows is None:
                rows = slice(0, src.shape[0])
            if isinstance(rows, slice):
                a, b, step = rows.indices(src.shape[0])
                if step != 1:
                    raise ValueError("parts: a slice of rows must have step 1")
                rows = slice(a, max(a, b))
            else:
                rows = np.asarray(rows, dtype=np.int64)
                if rows.ndim != 1 or (rows.size and (rows[0] < 0 or rows[-1] >= src.shape[0]
                                                      or np.any(np.diff(rows) <= 0))):
                    raise ValueError("parts: rows must be ascending indices of the source's rows")
            self.parts.append((src, rows))
        if not self.parts:
            raise ValueError("parts: at least one (source, rows) pair is required")
        self.dtype = np.dtype(dtype)
        counts = [_count(r) for _, r in self.parts]
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.shape = (int(self._starts[-1]), *(int(w) for w in width))
        self.ndim = len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"DeferredRows(shape={self.shape}, dtype={self.dtype}, parts={len(self.parts)})"

    def __array__(self, dtype=None, copy=None):
        if copy is False:
            raise ValueError("DeferredRows cannot be viewed as an array without a copy")
        out = np.empty(self.shape, self.dtype)
        for (src, rows), a in zip(self.parts, self._starts[:-1].tolist()):
            if isinstance(rows, slice):
                out[a:a + rows.stop - rows.start] = src[rows]
            else:
                np.take(src, rows, axis=0, out=out[a:a + rows.size])
        return out if dtype is None else out.astype(dtype, copy=False)

    def _sources_of(self, i: np.ndarray) -> tuple:
        """For global row numbers ``i``: each one's part and its row in that part's source."""
        p = np.searchsorted(self._starts, i, side="right") - 1
        local = i - self._starts[p]
        src_row = np.empty_like(local)
        for k in np.unique(p).tolist():
            m = p == k
            rows = self.parts[k][1]
            src_row[m] = local[m] + rows.start if isinstance(rows, slice) else rows[local[m]]
        return p, src_row

    def __getitem__(self, key):
        n = self.shape[0]
        if isinstance(key, (int, np.integer)):
            i = int(key) + (n if key < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"row {int(key)} out of range for {n} rows")
            p, r = self._sources_of(np.asarray([i]))
            return self.parts[int(p[0])][0][int(r[0])]
        if isinstance(key, slice):
            a, b, step = key.indices(n)
            if step == 1:
                return self.sliced(a, b)
            key = np.arange(a, b, step)
        if isinstance(key, tuple) or isinstance(key, np.ndarray) and key.dtype == bool:
            return np.asarray(self)[key]
        i = np.asarray(key, dtype=np.int64)
        if i.ndim != 1:
            return np.asarray(self)[key]
        i = np.where(i < 0, i + n, i)
        if i.size and (i.min() < 0 or i.max() >= n):
            raise IndexError(f"row indices out of range for {n} rows")
        out = np.empty((i.size, *self.shape[1:]), self.dtype)
        p, r = self._sources_of(i)
        for k in np.unique(p).tolist():
            m = p == k
            out[m] = self.parts[k][0][r[m]]
        return out

    def sliced(self, a: int, b: int) -> "DeferredRows | np.ndarray":
        """Rows a..b-1: a view of the source where they are a slice of one part's source (an add
        reading its old or its new rows), else deferred like these (an empty selection: an empty
        array)."""
        if b <= a:
            return np.empty((0, *self.shape[1:]), self.dtype)
        p = int(np.searchsorted(self._starts, a, side="right") - 1)
        src, rows = self.parts[p]
        if isinstance(rows, slice) and b <= self._starts[p + 1]:
            lo = rows.start + a - int(self._starts[p])
            return src[lo:lo + b - a]
        parts = []
        for (src, rows), s, e in zip(self.parts, self._starts[:-1].tolist(), self._starts[1:].tolist()):
            lo, hi = max(a, s) - s, min(b, e) - s
            if hi > lo:
                parts.append((src, slice(rows.start + lo, rows.start + hi) if isinstance(rows, slice)
                              else rows[lo:hi]))
        return DeferredRows(parts)

    def blocks(self, nbytes: int = GATHER_BYTES):
        """The rows' bytes in order, as contiguous blocks of about ``nbytes`` (a slice of a C-ordered
        source is passed as it lies; scattered rows are gathered into one reused buffer, so each
        block is valid until the next is asked for)."""
        row_bytes = max(1, int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize)
        step = max(1, nbytes // row_bytes)
        buf = None
        for src, rows in self.parts:
            if isinstance(rows, slice):
                for r in range(rows.start, rows.stop, step):
                    block = np.ascontiguousarray(src[r:min(r + step, rows.stop)])
                    yield memoryview(block.reshape(-1).view(np.uint8))
                continue
            if buf is None:
                buf = np.empty((step, *self.shape[1:]), self.dtype)
            for r in range(0, rows.size, step):
                idx = rows[r:r + step]
                out = buf[:idx.size]
                np.take(src, idx, axis=0, out=out)
                yield memoryview(out.reshape(-1).view(np.uint8))

    def product_operands(self, M) -> tuple:
        """(A, B) with ``A @ B == M @ np.asarray(self)`` for a sparse ``M`` (k × n), read from the
        sources. With one part, A is ``M`` with its columns renumbered to the source's rows
        (ascending, so every row's entries keep their order) and B the source: the same operations, in
        the same order, as the product of the made array, so the same bits. Otherwise B is made."""
        import scipy.sparse as sp
        if self.ndim != 2:
            raise ValueError("product_operands needs a 2-D array")
        M = sp.csr_matrix(M)
        if M.shape[1] != self.shape[0]:
            raise ValueError(f"M has {M.shape[1]} columns for {self.shape[0]} rows")
        if len(self.parts) != 1:
            return M, np.asarray(self)
        src, rows = self.parts[0]
        cols = M.indices + rows.start if isinstance(rows, slice) else rows[M.indices]
        return sp.csr_matrix((M.data, cols, M.indptr), shape=(M.shape[0], src.shape[0])), src


def _flat(parts):
    """``parts`` with each deferred source replaced by the parts of its own it selects (an update
    of an update not yet saved: a replace's delete, then its add)."""
    for src, rows in parts:
        if not isinstance(src, DeferredRows):
            yield src, rows
            continue
        if rows is None or isinstance(rows, slice):
            a, b, step = (rows or slice(None)).indices(len(src))
            if step != 1:
                raise ValueError("parts: a slice of rows must have step 1")
            sub = src.sliced(a, b)
            if isinstance(sub, DeferredRows):
                yield from sub.parts
            elif len(sub):
                yield sub, None
            continue
        i = np.asarray(rows, dtype=np.int64)
        if i.ndim != 1 or (i.size and (i[0] < 0 or i[-1] >= len(src) or np.any(np.diff(i) <= 0))):
            raise ValueError("parts: rows must be ascending indices of the source's rows")
        p, r = src._sources_of(i)
        cuts = np.flatnonzero(np.diff(p)) + 1              # ascending rows: each part's run is contiguous
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), i.size]):
            yield src.parts[int(p[lo])][0], r[lo:hi]


def _count(rows) -> int:
    return rows.stop - rows.start if isinstance(rows, slice) else int(rows.size)


def settled(a):
    """``a`` as an ndarray: a :class:`DeferredRows` made, anything else as it is."""
    return np.asarray(a) if isinstance(a, DeferredRows) else a


def settle(ix) -> None:
    """Make every deferred array of ``ix`` (its embeddings, its stored words): an index that no save
    will write and map."""
    ix.embeddings = settled(ix.embeddings)
    words = getattr(ix, "words", None)
    if words is not None and words.deferred:
        words.settle()
