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

import numpy as np
import scipy.sparse as sp

from .lexical.words import CorpusWords


def word_terms(words: CorpusWords) -> tuple:
    """(term id per word (−1: no BM25 term), term strings): the BM25 term of each stored word, cached
    on ``words`` and extended when its vocabulary grows."""
    from .lexical.tokens import bm25_word_terms
    cache = getattr(words, "_terms", None)
    vocab = words.vocab
    if cache is None or cache[0].size > len(vocab):
        cache = (np.zeros(0, np.int32), [], {})
    tid, names, index = cache
    if tid.size < len(vocab):
        new = bm25_word_terms(vocab[tid.size:])
        ext = np.fromiter((-1 if t is None else index.setdefault(t, len(index)) for t in new), np.int32, len(new))
        names = names + list(index)[len(names):]
        tid = np.concatenate([tid, ext])
        cache = (tid, names, index)
        words._terms = cache
    return cache[0], cache[1]


def chunk_counts(words: CorpusWords) -> sp.csr_matrix:
    """(chunks × terms) float64 BM25 term counts of the chunks, from the stored word counts."""
    tid, names = word_terms(words)
    t = tid[words.bag_words]
    keep = t >= 0
    n = words.n_chunks
    row_keep = np.zeros(words.bag_words.size + 1, np.int64)
    np.cumsum(keep, out=row_keep[1:])
    indptr = row_keep[np.asarray(words.bag_indptr, np.int64)]
    M = sp.csr_matrix((np.asarray(words.bag_counts, np.float64)[keep], t[keep], indptr), shape=(n, len(names)))
    M.sum_duplicates()          # two words with one term (a normalising tokeniser): one count
    return M


def item_counts(chunks: sp.csr_matrix, item_kinds, item_sources, extra_texts: dict, names: list) -> tuple:
    """(items × terms) counts of every item and the term strings (``names``, extended by the terms of
    ``extra_texts`` {item index: text}, the items tokenised from their text)."""
    from .core import CHUNK
    from .lexical.tokens import query_tokens
    n = chunks.shape[0]
    kinds = np.asarray(item_kinds)
    n_items = kinds.size
    index = {t: j for j, t in enumerate(names)}
    names = list(names)
    rows_t, cols_t, vals_t = [], [], []
    for i, text in extra_texts.items():
        toks = query_tokens(text)
        if not toks:
            continue
        ids = np.fromiter((index.setdefault(t, len(index)) for t in toks), np.int64, len(toks))
        u, c = np.unique(ids, return_counts=True)
        rows_t.append(np.full(u.size, i, np.int64))
        cols_t.append(u)
        vals_t.append(c.astype(np.float64))
    names += list(index)[len(names):]
    T = len(names)
    virtual = np.flatnonzero(kinds[n:] != CHUNK) + n
    summed = np.setdiff1d(virtual, np.fromiter(extra_texts, np.int64, len(extra_texts)))
    S = sp.csr_matrix(item_sources, dtype=np.float64)[summed] @ chunks
    S = sp.csr_matrix(S, shape=(summed.size, chunks.shape[1]))
    coo = S.tocoo()
    rows_t.append(summed[coo.row])
    cols_t.append(coo.col.astype(np.int64))
    vals_t.append(coo.data)
    extra = sp.csr_matrix((np.concatenate(vals_t), (np.concatenate(rows_t), np.concatenate(cols_t))),
                          shape=(n_items, T)) if rows_t else sp.csr_matrix((n_items, T))
    base = sp.csr_matrix((chunks.data, chunks.indices, np.concatenate(
        [chunks.indptr, np.full(n_items - n, chunks.indptr[-1], chunks.indptr.dtype)])), shape=(n_items, chunks.shape[1]))
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
    r.scores = {"data": M.data.astype(np.float32), "indices": M.indices.astype(np.int32),
                "indptr": M.indptr.astype(np.int32 if M.indptr[-1] < 2 ** 31 else np.int64), "num_docs": n_items}
    vocab = {names[j]: k for k, j in enumerate(used)}
    vocab[""] = used.size
    r.vocab_dict = vocab
    r.unique_token_ids_set = set(vocab.values())
    r.nonoccurrence_array = None
    return r
