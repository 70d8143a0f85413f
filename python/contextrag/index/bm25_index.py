"""The BM25 index (a ``bm25s.BM25``) computed from term counts, with NumPy, instead of from token lists.

bm25s stores for every (term, item) the final score idf(t) · tf / (k1 (1 − b + b dl/avgdl) + tf)
(Lucene variant, its default), so every entry depends on the corpus size N (idf), the document
frequencies and the mean length: an update changes them all. The counts do not change for an item
that stays, so an update rebuilds the score matrix from the stored counts (lexical/words.py), an O(nnz)
vectorised pass, and tokenises only the text it has not seen. ``bm25s.BM25.index`` does the same
sums per document in Python; this module repeats its arithmetic operation for operation (float64,
then float32), so the scores are the same (tested against bm25s).

Item counts: a chunk's are its stored word counts mapped to BM25 terms; a join/meet item's text is
its source chunks' "title: text" joined by blank lines, whose tokens are exactly the sources' tokens,
so its counts are the sum of theirs (one sparse product); only summaries (LLM text) are tokenised.
"""
from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp

from .layout import without_positions
from .lexical.words import CorpusWords


def word_terms(words: CorpusWords, stemmer: str | None = None) -> tuple:
    """(term id per word (−1: no BM25 term), term strings): the BM25 term of each stored word (its
    Snowball stem with ``stemmer``), cached on ``words`` per stemmer; a cache inherited from an older
    vocabulary (a prefix of this one) is extended into new objects, so the older words stay valid."""
    from .lexical.tokens import bm25_word_terms
    caches = getattr(words, "_terms", None) or {}
    cache = caches.get(stemmer)
    vocab = words.vocab
    if cache is None or cache[0].size > len(vocab):
        cache = (np.zeros(0, np.int32), [], {})
    tid, names, index = cache
    if tid.size < len(vocab):
        new = bm25_word_terms(vocab[tid.size:], stemmer)
        index = dict(index)
        ext = np.fromiter((-1 if t is None else index.setdefault(t, len(index)) for t in new), np.int32, len(new))
        cache = (np.concatenate([tid, ext]), names + list(index)[len(names):], index)
    words._terms = {**caches, stemmer: cache}
    return cache[0], cache[1]


def chunk_counts(words: CorpusWords, stemmer: str | None = None) -> sp.csr_matrix:
    """(chunks × terms) float64 BM25 term counts of the chunks, from the stored word counts (terms
    are Snowball stems with ``stemmer``)."""
    tid, names = word_terms(words, stemmer)
    t = tid[words.bag_words]
    keep = t >= 0
    n = words.n_chunks
    row_keep = np.zeros(words.bag_words.size + 1, np.int64)
    np.cumsum(keep, out=row_keep[1:])
    indptr = row_keep[np.asarray(words.bag_indptr, np.int64)]
    M = sp.csr_matrix((np.asarray(words.bag_counts, np.float64)[keep], t[keep], indptr), shape=(n, len(names)))
    M.sum_duplicates()          # two words with one term (a normalising tokeniser): one count
    return M


def _text_counts(texts: dict, index: dict, stemmer: str | None, offset: int) -> tuple[list, list, list]:
    """(rows, term ids, float64 counts) lists of the texts {item index: text} tokenised as queries are,
    row = item index − ``offset``; a new term gets the next id in ``index`` (extended in place)."""
    from .lexical.tokens import query_tokens
    rows, cols, vals = [], [], []
    for i, text in texts.items():
        toks = query_tokens(text, stemmer)
        if not toks:
            continue
        ids = np.fromiter((index.setdefault(t, len(index)) for t in toks), np.int64, len(toks))
        u, c = np.unique(ids, return_counts=True)
        rows.append(np.full(u.size, int(i) - offset, np.int64))
        cols.append(u)
        vals.append(c.astype(np.float64))
    return rows, cols, vals


def item_counts(chunks: sp.csr_matrix, item_kinds, item_sources, extra_texts: dict, names: list,
                stemmer: str | None = None) -> tuple:
    """(items × terms) counts of every item and the term strings (``names``, extended by the terms of
    ``extra_texts`` {item index: text}, the items tokenised from their text)."""
    from .core import CHUNK
    n = chunks.shape[0]
    kinds = np.asarray(item_kinds)
    n_items = kinds.size
    index = {t: j for j, t in enumerate(names)}
    names = list(names)
    rows_t, cols_t, vals_t = _text_counts(extra_texts, index, stemmer, 0)
    names += list(index)[len(names):]
    T = len(names)
    virtual = np.flatnonzero(kinds[n:] != CHUNK) + n
    summed = np.setdiff1d(virtual, np.fromiter(extra_texts, np.int64, len(extra_texts)))
    S = sp.csr_matrix(sp.csr_matrix(item_sources)[summed], dtype=np.float64) @ chunks
    S = sp.csr_matrix(S, shape=(summed.size, chunks.shape[1]))
    coo = S.tocoo()
    rows_t.append(summed[coo.row])
    cols_t.append(coo.col.astype(np.int64))
    vals_t.append(coo.data)
    extra = sp.csr_matrix((np.concatenate(vals_t), (np.concatenate(rows_t), np.concatenate(cols_t))),
                          shape=(n_items, T)) if rows_t else sp.csr_matrix((n_items, T))
    indptr = np.concatenate([chunks.indptr, np.full(n_items - n, chunks.indptr[-1], chunks.indptr.dtype)])
    base = sp.csr_matrix((chunks.data, chunks.indices, indptr), shape=(n_items, chunks.shape[1]))
    base.resize((n_items, T))
    return (base + extra).tocsr(), names


def bm25_from_counts(counts: sp.csr_matrix, names: list):
    """A ``bm25s.BM25`` (default parameters) over the items whose term counts are ``counts`` (items ×
    terms, columns named ``names``): the index ``bm25s.BM25().index(tokens)`` builds from the items'
    tokens, up to the order of its vocabulary."""
    import bm25s
    r = bm25s.BM25()
    if r.method != "lucene" or r.idf_method != "lucene":
        raise RuntimeError(f"bm25s defaults changed (method {r.method!r}); the count-based index repeats 'lucene'")
    C = sp.csr_matrix(counts, dtype=np.float64)
    if C.nnz and not (C.data > 0).all():
        C.eliminate_zeros()
    n_items = C.shape[0]
    df = np.bincount(C.indices, minlength=C.shape[1])
    used = np.flatnonzero(df > 0)
    remap = np.full(C.shape[1], -1, np.int64)
    remap[used] = np.arange(used.size)
    dl = np.diff(C.indptr)
    doc_len = np.asarray(C.sum(axis=1)).ravel().astype(np.int64)
    avg = doc_len.mean() if n_items else np.float64(0.0)
    N = n_items
    d = df[used].astype(np.float64)
    idf = np.log(1.0 + (N - d + 0.5) / (d + 0.5)).astype(np.float32)
    k1, b = r.k1, r.b
    denom_row = k1 * ((1 - b) + b * doc_len.astype(np.float64) / avg) if n_items else np.zeros(0)
    tf = C.data
    denom = np.repeat(denom_row, dl)
    cols = remap[C.indices]
    scores = (idf[cols].astype(np.float64) * (tf / (denom + tf))).astype(np.float32)
    M = sp.csr_matrix((scores, cols, C.indptr), shape=(n_items, used.size)).tocsc()
    M.sort_indices()
    ptr_type = np.int32 if M.indptr[-1] < 2 ** 31 else np.int64
    r.scores = {"data": M.data.astype(np.float32, copy=False), "indices": M.indices.astype(np.int32, copy=False),
                "indptr": M.indptr.astype(ptr_type, copy=False), "num_docs": n_items}
    vocab = {names[j]: k for k, j in enumerate(used)}
    vocab[""] = used.size
    r.vocab_dict = vocab
    r.unique_token_ids_set = set(vocab.values())
    r.nonoccurrence_array = None
    return r


# ---- BM25 scored at query time from stored counts -------------------------------------------------

COUNTS_FILE = "counts.safetensors"     # in the snapshot's bm25/ folder (bm25s's own files before)
TERMS_FILE = "terms.json"
K1, B = 1.5, 0.75                      # bm25s.BM25()'s defaults (checked in :func:`from_counts`)


class CountBM25:
    """BM25 (bm25s's Lucene variant, its default k1 and b) scored at query time from term counts.

    bm25s stores each (term, item) entry's final score, and every one of them depends on N, the df
    and the mean length, so an update had to recompute all of them (O(nnz), 14 s of a 100-document
    add at a million chunks). Here the index stores the raw counts by term (CSC: a term's items and
    their term frequencies), with each item's length; a query reads its own terms' postings only and
    computes idf(t) · tf / (tf + k1 (1 − b + b dl/avgdl)) there, with the idf of every term and the
    length norm of every item kept as vectors (O(terms) and O(items) to refresh, once per index).
    The arithmetic is :func:`bm25_from_counts`'s operation for operation (float64, the score rounded
    to float32, summed per query token in float32 as bm25s sums), so the scores are bm25s's (tested).

    Two blocks of postings: the chunks' (rows = chunk index) and the virtual items' (rows = item
    index − n_chunks). Chunks keep their counts across updates, so an add appends the new chunks'
    entries to their terms' postings and a delete drops and renumbers rows: one pass over the arrays,
    no sort and no score. Virtual items (joins, meets, summaries: rebuilt by every update) have their
    block rebuilt from their sources' counts. Term ids are the order of :attr:`names`, which only
    grows (a term no item holds any more keeps its id and an empty posting list)."""

    def __init__(self, names, c_indptr, c_rows, c_tf, v_indptr, v_rows, v_tf, doc_len, n_chunks: int):
        self.names = list(names)
        T = len(self.names)
        self.c_indptr, self.c_rows, self.c_tf = (np.asarray(c_indptr, np.int64), np.asarray(c_rows, np.int32),
                                                 np.asarray(c_tf, np.int32))
        self.v_indptr, self.v_rows, self.v_tf = (np.asarray(v_indptr, np.int64), np.asarray(v_rows, np.int32),
                                                 np.asarray(v_tf, np.int32))
        self.doc_len = np.asarray(doc_len, np.int64)
        self.n_chunks = int(n_chunks)
        if self.c_indptr.shape != (T + 1,) or self.v_indptr.shape != (T + 1,):
            raise ValueError(f"BM25 postings: indptr of {self.c_indptr.size} and {self.v_indptr.size} entries "
                             f"for {T} terms")
        if int(self.c_indptr[-1]) != self.c_rows.size or self.c_rows.size != self.c_tf.size \
                or int(self.v_indptr[-1]) != self.v_rows.size or self.v_rows.size != self.v_tf.size:
            raise ValueError("BM25 postings: arrays disagree in length")
        if not 0 <= self.n_chunks <= self.doc_len.size:
            raise ValueError(f"BM25: {self.n_chunks} chunks for {self.doc_len.size} items")
        self._vocab = None
        self._stats_got = None

    # -- queries
    @property
    def n_items(self) -> int:
        return int(self.doc_len.size)

    @property
    def vocab_dict(self) -> dict:
        if self._vocab is None:
            self._vocab = dict(zip(self.names, range(len(self.names))))
        return self._vocab

    def _stats(self):
        """(idf (T,) float32, the item lengths in the smallest unsigned type that holds them, the mean
        length), as bm25_from_counts computes them. The length norm k1 (1 − b + b dl/avgdl) is
        computed per posting from the gathered length (the same float64 operations): gathering 2-byte
        lengths rather than 8-byte norms keeps the query's random reads in cache (3× less time at 1M).
        Computed by the first query and kept whole, in one assignment: concurrent first queries
        compute them each or read them complete, never half set."""
        got = self._stats_got
        if got is None:
            N = self.n_items
            d = (np.diff(self.c_indptr) + np.diff(self.v_indptr)).astype(np.float64)
            idf = np.log(1.0 + (N - d + 0.5) / (d + 0.5)).astype(np.float32)
            top = int(self.doc_len.max()) if N else 0
            dt = np.uint16 if top < 1 << 16 else np.uint32 if top < 1 << 32 else np.int64
            got = self._stats_got = (idf, (self.doc_len.astype(dt), self.doc_len.mean() if N else np.float64(0.0)))
        return got

    def postings(self, j: int) -> tuple:
        """(item rows, term frequencies float64) of term ``j``: chunks first, then virtual items."""
        a, b = int(self.c_indptr[j]), int(self.c_indptr[j + 1])
        c, d = int(self.v_indptr[j]), int(self.v_indptr[j + 1])
        if c == d:
            return self.c_rows[a:b], self.c_tf[a:b].astype(np.float64)
        return (np.concatenate([np.asarray(self.c_rows[a:b], np.int64), self.n_chunks + np.asarray(self.v_rows[c:d], np.int64)]),
                np.concatenate([self.c_tf[a:b], self.v_tf[c:d]]).astype(np.float64))

    def get_scores(self, query_tokens: list) -> np.ndarray:
        """(n_items,) float32 BM25 scores of a tokenised query (tokens not in the index add nothing,
        a repeated token counts each time: bm25s.BM25.get_scores)."""
        out = np.zeros(self.n_items, np.float32)
        vocab = self.vocab_dict
        ids = [vocab[t] for t in query_tokens if t in vocab]
        if not ids:
            return out
        idf, (dl, avg) = self._stats()
        from ..ops._backend import cpu_native
        C = cpu_native("bm25_accumulate")
        if C is not None:       # the same operations on the postings where they lie (csrc/cpu/bm25.cpp)
            blocks = ((self.c_indptr, self.c_rows, self.c_tf, 0),
                      (self.v_indptr, self.v_rows, self.v_tf, self.n_chunks))
            for j in ids:
                for ptr, rows, tf, row0 in blocks:
                    a, b = int(ptr[j]), int(ptr[j + 1])
                    if b > a:
                        C.bm25_accumulate(out, rows[a:b], tf[a:b], dl, row0, float(idf[j]), float(avg), K1, B)
            return out
        for j in ids:
            rows, tf = self.postings(j)
            if rows.size:
                d = K1 * ((1 - B) + B * dl.take(rows).astype(np.float64) / avg)     # the length norms
                d += tf
                np.divide(tf, d, out=d)                  # tf / (norm + tf)
                d *= idf[j].astype(np.float64)
                np.add.at(out, rows, d.astype(np.float32))   # (numpy's fast path; a fancy-index += is 4× slower)
        return out

    # -- updates (each returns a new object; this one stays valid for the index before the change)
    def _term_ids(self, names: list) -> tuple:
        """(this index's term id of each of ``names`` (int64), the extended term list)."""
        vocab = dict(self.vocab_dict)
        ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in names), np.int64, len(names))
        return ids, self.names + list(vocab)[len(self.names):]

    def with_chunks_added(self, new: sp.csr_matrix, new_names: list) -> "CountBM25":
        """The chunk block with the rows ``new`` (k × len(new_names) counts) appended as chunks
        n_chunks … n_chunks + k − 1; the virtual block is left empty (:meth:`with_virtual` sets it)."""
        new = sp.csr_matrix(new)
        col_ids, names = self._term_ids(new_names)
        T = len(names)
        coo = new.tocoo()
        keep = coo.data > 0
        nc, nr, nt = col_ids[coo.col[keep]], self.n_chunks + coo.row[keep].astype(np.int64), coo.data[keep]
        order = np.lexsort((nr, nc))
        nc, nr, nt = nc[order], nr[order], nt[order]
        ip, ptr = _merge_appended(_pad(self.c_indptr, T), nc, (self.c_rows, nr), (self.c_tf, nt))
        rows, tf = ptr
        k = new.shape[0]
        dl_new = np.asarray(new.sum(axis=1)).ravel().astype(np.int64)
        return CountBM25(names, ip, rows, tf, np.zeros(T + 1, np.int64), np.zeros(0, np.int32),
                         np.zeros(0, np.int32), np.concatenate([self.doc_len[:self.n_chunks], dl_new]),
                         self.n_chunks + k)

    def with_chunks_kept(self, keep: np.ndarray) -> "CountBM25":
        """The chunk block of the chunks ``keep`` (ascending), renumbered; the virtual block empty."""
        keep = np.asarray(keep, np.int64)
        n = self.n_chunks
        remap = np.full(n, -1, np.int32)
        remap[keep] = np.arange(keep.size, dtype=np.int32)
        r = remap[self.c_rows]                 # one gather over the chunk postings
        gone = np.flatnonzero(r < 0)
        col_of = np.searchsorted(self.c_indptr, gone, side="right") - 1
        lost = np.zeros(self.c_indptr.size, np.int64)
        np.cumsum(np.bincount(col_of, minlength=self.c_indptr.size - 1), out=lost[1:])
        tf = np.asarray(self.c_tf)[r >= 0]
        T = len(self.names)
        return CountBM25(self.names, self.c_indptr - lost, without_positions(r, gone), tf,
                         np.zeros(T + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32),
                         self.doc_len[:n][keep], keep.size)

    def with_virtual(self, counts: sp.csr_matrix, names: list) -> "CountBM25":
        """These chunks with the virtual items whose counts are ``counts`` (rows: items n_chunks …,
        columns ``names``)."""
        counts = sp.csr_matrix(counts)
        col_ids, all_names = self._term_ids(names)
        T = len(all_names)
        coo = counts.tocoo()
        keep = coo.data > 0
        M = sp.csc_matrix((coo.data[keep].astype(np.int32), (coo.row[keep], col_ids[coo.col[keep]])),
                          shape=(counts.shape[0], T))
        M.sum_duplicates()
        M.sort_indices()
        dl = np.asarray(counts.sum(axis=1)).ravel().astype(np.int64)
        return CountBM25(all_names, _pad(self.c_indptr, T), self.c_rows, self.c_tf, M.indptr.astype(np.int64),
                         M.indices.astype(np.int32), M.data.astype(np.int32),
                         np.concatenate([self.doc_len[:self.n_chunks], dl]), self.n_chunks)

    # -- the snapshot's files
    def to_arrays(self) -> tuple:
        """(arrays, metadata) of :data:`COUNTS_FILE`."""
        arrays = {"chunk.indptr": self.c_indptr, "chunk.rows": self.c_rows, "chunk.tf": self.c_tf,
                  "virtual.indptr": self.v_indptr, "virtual.rows": self.v_rows, "virtual.tf": self.v_tf,
                  "doc_len": self.doc_len}
        return ({k: np.ascontiguousarray(v) for k, v in arrays.items()},
                {"n_chunks": str(self.n_chunks), "k1": str(K1), "b": str(B), "method": "lucene"})

    def save(self, save_dir, allow_pickle: bool = False, arrays: bool = True) -> None:
        """Write :data:`COUNTS_FILE` (unless ``arrays`` is False: the index store writes it itself)
        and :data:`TERMS_FILE` into ``save_dir``."""
        from pathlib import Path
        d = Path(save_dir)
        d.mkdir(parents=True, exist_ok=True)
        if arrays:
            from safetensors.numpy import save_file
            arrs, meta = self.to_arrays()
            save_file(arrs, str(d / COUNTS_FILE), metadata=meta)
        (d / TERMS_FILE).write_text(json.dumps(self.names, ensure_ascii=False), encoding="utf-8")


def _pad(indptr: np.ndarray, T: int) -> np.ndarray:
    """``indptr`` of a CSC extended to T columns (the new columns empty)."""
    if indptr.size == T + 1:
        return np.asarray(indptr, np.int64)
    return np.concatenate([indptr, np.full(T + 1 - indptr.size, indptr[-1], np.int64)])


def _merge_appended(indptr: np.ndarray, cols: np.ndarray, *pairs) -> tuple:
    """(indptr, [merged arrays]) of a CSC with entries appended at the end of their columns:
    ``cols`` ascending (the new entries' columns), each pair (old array, new values in ``cols``'
    order). The old entries are copied run by run between the columns that grow: O(nnz) memory
    traffic, no sort."""
    T = indptr.size - 1
    add = np.bincount(cols, minlength=T)
    out_ptr = indptr + np.concatenate([[0], np.cumsum(add)])
    touched, first = np.unique(cols, return_index=True)
    last = np.append(first[1:], cols.size)
    outs = [np.empty(int(out_ptr[-1]), np.asarray(old).dtype) for old, _ in pairs]
    prev = 0
    for c, a, b in zip(touched.tolist() + [T - 1], first.tolist() + [cols.size], last.tolist() + [cols.size]):
        o0, o1 = int(indptr[prev]), int(indptr[c + 1])
        d0 = int(out_ptr[prev])
        d1 = d0 + (o1 - o0)
        for out, (old, new) in zip(outs, pairs):
            out[d0:d1] = old[o0:o1]
            out[d1:d1 + (b - a)] = new[a:b]
        prev = c + 1
        if prev > T - 1:
            break
    return out_ptr, outs


def from_counts(counts: sp.csr_matrix, names: list, n_chunks: int) -> CountBM25:
    """The :class:`CountBM25` of the items whose counts are ``counts`` (items × terms, the first
    ``n_chunks`` rows chunks); a fresh build."""
    import bm25s
    r = bm25s.BM25()
    if (r.method, r.idf_method, r.k1, r.b) != ("lucene", "lucene", K1, B):
        raise RuntimeError(f"bm25s defaults changed (method {r.method!r}, k1 {r.k1}, b {r.b}); the count-based "
                           "index repeats 'lucene' with k1 1.5, b 0.75")
    C = sp.csr_matrix(counts, dtype=np.float64)
    chunks = C[:n_chunks]
    M = sp.csc_matrix(chunks)
    M.eliminate_zeros()
    M.sum_duplicates()
    M.sort_indices()
    base = CountBM25(names, M.indptr.astype(np.int64), M.indices.astype(np.int32), M.data.astype(np.int32),
                     np.zeros(len(names) + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32),
                     np.asarray(chunks.sum(axis=1)).ravel().astype(np.int64), n_chunks)
    return base.with_virtual(C[n_chunks:], names)


def rows_counts(words: CorpusWords, rows: np.ndarray, stemmer: str | None = None) -> sp.csr_matrix:
    """(len(rows) × terms) float64 BM25 term counts of the chunks ``rows``, from the stored word
    counts (:func:`chunk_counts` for those rows only); columns are ``word_terms(words, stemmer)[1]``."""
    tid, names = word_terms(words, stemmer)
    rows = np.asarray(rows, np.int64)
    bp = np.asarray(words.bag_indptr, np.int64)
    starts, lens = bp[rows], bp[rows + 1] - bp[rows]
    ptr = np.zeros(rows.size + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    pos = np.arange(int(ptr[-1]), dtype=np.int64) - np.repeat(ptr[:-1] - starts, lens)
    t = tid[words.bag_words[pos]]             # (gathers the rows' entries: deferred arrays too)
    keep = t >= 0
    row_keep = np.zeros(pos.size + 1, np.int64)
    np.cumsum(keep, out=row_keep[1:])
    M = sp.csr_matrix((np.asarray(words.bag_counts[pos])[keep].astype(np.float64), t[keep], row_keep[ptr]),
                      shape=(rows.size, len(names)))
    M.sum_duplicates()
    return M


def virtual_counts(words: CorpusWords, item_kinds, item_sources, extra_texts: dict, n_chunks: int,
                   stemmer: str | None = None) -> tuple:
    """((virtual items × terms) float64 counts, term names) of the items after the ``n_chunks``
    chunks: :func:`item_counts`'s rows for them (their sources' summed counts, or the tokens of
    ``extra_texts`` {item index: text}, the summaries), reading only the source chunks' words."""
    from .core import CHUNK
    names = list(word_terms(words, stemmer)[1])
    kinds = np.asarray(item_kinds)[n_chunks:]
    S = sp.csr_matrix(sp.csr_matrix(item_sources)[n_chunks:], dtype=np.float64)
    n_v = S.shape[0]
    summed = np.flatnonzero(kinds != CHUNK)
    summed = np.setdiff1d(summed, np.fromiter((int(i) - n_chunks for i in extra_texts), np.int64, len(extra_texts)))
    pick = np.zeros(n_v, np.float64)
    pick[summed] = 1.0
    S = sp.csr_matrix(sp.diags(pick) @ S)
    S.eliminate_zeros()
    src = np.unique(S.indices)
    sub = rows_counts(words, src, stemmer)
    S_loc = sp.csr_matrix((S.data, np.searchsorted(src, S.indices), S.indptr), shape=(n_v, src.size))
    A = sp.csr_matrix(S_loc @ sub, shape=(n_v, len(names)))
    index = {t: j for j, t in enumerate(names)}
    rows, cols, vals = _text_counts(extra_texts, index, stemmer, n_chunks)
    names += list(index)[len(names):]
    A.resize((n_v, len(names)))
    if rows:
        A = A + sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                              shape=(n_v, len(names)))
    return sp.csr_matrix(A), names


def load(save_dir):
    """The BM25 index stored in ``save_dir`` (a snapshot's bm25/ folder): a :class:`CountBM25`,
    memory-mapped, or, in a snapshot written before the counts were stored, bm25s's own index
    (scored as before; the next update replaces it by counts, from the stored words)."""
    from pathlib import Path
    d = Path(save_dir)
    if not (d / COUNTS_FILE).is_file():
        import bm25s
        return bm25s.BM25.load(str(d), allow_pickle=False, mmap=True)
    from .store import map_arrays
    a = map_arrays(d / COUNTS_FILE)
    names = json.loads((d / TERMS_FILE).read_text(encoding="utf-8"))
    if not isinstance(names, list) or not all(isinstance(t, str) for t in names):
        raise ValueError(f"{TERMS_FILE} is not a list of terms")
    with open(d / COUNTS_FILE, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n)).get("__metadata__") or {}
    if meta.get("method") != "lucene" or float(meta.get("k1", "nan")) != K1 or float(meta.get("b", "nan")) != B:
        raise ValueError(f"{COUNTS_FILE}: BM25 parameters {meta} are not the ones this library scores with")
    return CountBM25(names, a["chunk.indptr"], a["chunk.rows"], a["chunk.tf"], a["virtual.indptr"],
                     a["virtual.rows"], a["virtual.tf"], a["doc_len"], int(meta["n_chunks"]))
