"""Updating the stored words and the lexical families when chunks are added or deleted, from the
changed chunks' tokens only (the old chunks' text is never read again).

Add: the new chunks are tokenised once (:func:`append_chunks`); the "title" family gains the new
titles as columns (kept in sorted order, as a build makes them), finds every title in the new chunks
and the *new* titles in the old chunks by matching their word ids in the stored sequences; the "term"
family appends the new chunks' rows and new terms (in order of first occurrence, as a build). Delete:
rows go; a title no remaining chunk carries goes with its column; term columns are put back in order
of first occurrence among the remaining chunks (only the columns the deleted chunks introduced move).
Every statistic that depends on N (df, w(a) = log(N/df)/log(N), the degrees) is recomputed from the
incidence, not from text. The result equals a build from the new corpus's text (tested).

O(N) steps, all vectorised over arrays (no Python loop over old chunks): concatenating the stored
arrays, recomputing degrees from df (one gather over the incidence), one pass over the stored word
ids for the new titles (add) and one gather over the term incidence (delete).
"""
from __future__ import annotations

from bisect import bisect_left

import numpy as np
import scipy.sparse as sp

from ..deferred import DeferredRows
from ..layout import kept_rows
from .families import STOPWORDS, TITLE_MAX_TOKENS, Family, counted_weights, idf_weight
from .tokens import normalise_title, stem_words
from .words import CorpusWords, bags, search_texts, title_lengths, tokenize_words, utf8_lines


# ---- the stored words ---------------------------------------------------------------------------

def append_chunks(W: CorpusWords, titles, texts) -> tuple:
    """(the words with the chunks ``titles``/``texts`` appended, their token ids in the global
    vocabulary (flat, in text order), offsets): the new chunks are the only text tokenised."""
    titles = [t or "" for t in titles]
    ids, off, local = tokenize_words(search_texts(titles, texts))
    vocab, index = W.vocab, W.index
    n0 = len(vocab)
    new_words = [w for w in local if w not in index]
    if new_words:                      # a new dict: ``W`` (the index before the change) stays valid
        index = dict(index)
        index.update(zip(new_words, range(n0, n0 + len(new_words))))
    gmap = np.fromiter(map(index.__getitem__, local), np.int32, len(local))
    gids = gmap[ids] if ids.size else np.zeros(0, np.int32)
    bptr, bw, bc = bags(off, gids)
    T0, B0 = int(W.seq_indptr[-1]), int(W.bag_indptr[-1])
    vocab_utf8 = W.vocab_utf8
    if new_words:
        sep = [b"\n"] if n0 else []
        vocab_utf8 = np.concatenate([np.asarray(vocab_utf8, np.uint8)] + [np.frombuffer(s, np.uint8) for s in sep]
                                    + [utf8_lines(new_words)])

    def then(old, new):       # the stored array, then the new chunks' (written from both by the save)
        return DeferredRows([(old, None), (np.asarray(new, old.dtype), None)]) if old.dtype == np.int32 \
            else np.concatenate([old, new]).astype(np.int32, copy=False)
    out = CorpusWords(vocab_utf8, np.concatenate([W.seq_indptr, T0 + off[1:]]),
                      then(W.seq_ids, gids),
                      np.concatenate([W.title_len, title_lengths(titles)]).astype(np.int32),
                      np.concatenate([W.bag_indptr, B0 + bptr[1:]]),
                      then(W.bag_words, bw), then(W.bag_counts, bc),
                      np.concatenate([W.title_own, np.full(len(texts), -1, np.int32)]))
    out._vocab, out._index = vocab + new_words, index
    if getattr(W, "_terms", None) is not None:
        out._terms = W._terms                 # extended (copied) on first use, see bm25_index.word_terms
    return out, gids, off


def keep_chunks(W: CorpusWords, keep: np.ndarray) -> CorpusWords:
    """The words of the chunks ``keep`` (ascending indices); the vocabulary stays."""
    keep = np.asarray(keep, np.int64)
    # the kept runs of the word arrays are named, not copied: the save writes them from the old ones
    # and maps what it wrote (index/deferred.py); nothing in an update reads the kept rows' words
    sptr, sids = kept_rows(W.seq_indptr, W.seq_ids, keep, deferred=True)
    bptr, bw = kept_rows(W.bag_indptr, W.bag_words, keep, deferred=True)
    _, bc = kept_rows(W.bag_indptr, W.bag_counts, keep, deferred=True)
    out = CorpusWords(W.vocab_utf8, sptr, sids, np.asarray(W.title_len)[keep], bptr, bw, bc,
                      np.asarray(W.title_own)[keep])
    out._vocab, out._index = W._vocab, W._index
    if getattr(W, "_terms", None) is not None:
        out._terms = W._terms
    return out


# ---- shared ---------------------------------------------------------------------------------------

def _degrees(name: str, I: sp.csr_matrix, n: int, own: np.ndarray | None, names: list, max_n: int,
             vocab: dict | None = None, df: np.ndarray | None = None, counted: np.ndarray | None = None) -> Family:
    """The family over the incidence pattern ``I`` (rows = chunks, sorted columns per row): df by
    column counts (``df`` when the caller has them), w(a) from df and N, or over the rows
    ``counted`` only (bool, the chunks of new text: index/distinct.py), degree w(a), 1 for a chunk's
    own title (``own[i]``); ``I``'s values are not read."""
    if df is None:
        df = np.bincount(I.indices, minlength=I.shape[1]).astype(np.int64)
    w = idf_weight(df, n) if counted is None else counted_weights(I, counted, name)
    data = w.astype(np.float32)[I.indices]
    if own is not None and I.nnz:
        row = np.repeat(np.arange(n, dtype=np.int64), np.diff(I.indptr))
        data[own[row] == I.indices] = 1.0
    M = sp.csr_matrix((data, I.indices.astype(np.int32, copy=False), I.indptr.astype(np.int64, copy=False)),
                      shape=(n, len(names)))
    return Family(name=name, vocab=vocab if vocab is not None else dict(zip(names, range(len(names)))), df=df,
                  weight=w.astype(np.float32), incidence=M, max_n=max_n)


def _pairs_csr(rows, cols, n: int, m: int) -> sp.csr_matrix:
    """A boolean-pattern CSR from (row, col) pairs, duplicates merged, columns sorted per row."""
    rows = np.asarray(rows, np.int64)
    cols = np.asarray(cols, np.int64)
    key = np.unique(rows * max(m, 1) + cols)
    r, c = key // max(m, 1), key % max(m, 1)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=indptr[1:])
    return sp.csr_matrix((np.ones(c.size, np.float32), c.astype(np.int32), indptr), shape=(n, m))


def _stack_rows(A: sp.csr_matrix, B: sp.csr_matrix) -> sp.csr_matrix:
    indptr = np.concatenate([A.indptr.astype(np.int64), A.indptr[-1] + B.indptr[1:].astype(np.int64)])
    return sp.csr_matrix((np.concatenate([A.data, B.data]), np.concatenate([A.indices, B.indices]).astype(np.int32),
                          indptr), shape=(A.shape[0] + B.shape[0], A.shape[1]))


def _valid_name(t: str) -> bool:
    return bool(t) and t not in STOPWORDS and len(t) > 1


def _max_n(names) -> int:
    return min(max([len(t.split()) for t in names] + [1]), TITLE_MAX_TOKENS)


# ---- the "title" family --------------------------------------------------------------------------

def _find_sequences(W: CorpusWords, rows_end: int, seqs: list) -> tuple:
    """(rows, sequence indices) of every occurrence of the word-id sequences ``seqs`` inside the text
    part (after the title's tokens) of chunks 0 .. rows_end − 1, one pass over the stored ids."""
    T = int(W.seq_indptr[rows_end])
    if not seqs or T == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ids = W.seq_ids[:T]
    # anchor each sequence at its longest word (long words are rarer), found in one gather
    anchors = [max(range(len(s)), key=lambda j: (len(W.vocab[s[j]]), -j)) for s in seqs]
    V = len(W.vocab)
    is_anchor = np.zeros(V, bool)
    is_anchor[[s[a] for s, a in zip(seqs, anchors)]] = True
    cand = np.flatnonzero(is_anchor[ids])
    cw = ids[cand]
    out_r, out_k = [], []
    indptr = np.asarray(W.seq_indptr[:rows_end + 1], np.int64)
    for k, (s, a) in enumerate(zip(seqs, anchors)):
        start = cand[cw == s[a]] - a
        L = len(s)
        start = start[(start >= 0) & (start + L <= T)]
        for j, wid in enumerate(s):
            if j != a and start.size:
                start = start[ids[start + j] == wid]
        if not start.size:
            continue
        row = np.searchsorted(indptr, start, side="right") - 1
        ok = (start >= indptr[row] + np.asarray(W.title_len)[row]) & (start + L <= indptr[row + 1])
        out_r.append(row[ok])
        out_k.append(np.full(int(ok.sum()), k, np.int64))
    if not out_r:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(out_r), np.concatenate(out_k)


def _mentions_in(text_words: list, lookup, max_n: int) -> list:
    """The columns ``lookup`` gives for the word n-grams (n <= max_n) of one chunk's text words."""
    out = []
    L = len(text_words)
    for i in range(L):
        for m in range(1, min(max_n, L - i) + 1):
            c = lookup(" ".join(text_words[i:i + m]))
            if c is not None:
                out.append(c)
    return out


def title_after_add(fam: Family, W: CorpusWords, n_old: int, new_titles, counted=None) -> tuple:
    """(the "title" family after chunks with ``new_titles`` were appended to ``W`` (rows n_old ..),
    own column per chunk). ``counted``: the rows the weights count (:func:`_degrees`)."""
    n = W.n_chunks
    old_names = fam.attributes                       # sorted, as a build makes them
    own_new_names = []
    cache: dict = {}
    for t in new_titles:
        nm = cache[t] if t in cache else cache.setdefault(t, normalise_title(t))
        own_new_names.append(nm if _valid_name(nm) else None)
    added = sorted({nm for nm in own_new_names if nm is not None and nm not in fam.vocab})
    ins = np.asarray([bisect_left(old_names, nm) for nm in added], np.int64)
    M_old, M = len(old_names), len(old_names) + len(added)
    old_to_new = np.arange(M_old, dtype=np.int64) + np.searchsorted(ins, np.arange(M_old), side="right")
    added_cols = ins + np.arange(ins.size)
    names = [""] * M
    for j, nm in zip(old_to_new.tolist(), old_names):
        names[j] = nm
    for j, nm in zip(added_cols.tolist(), added):
        names[j] = nm
    new_index = dict(zip(added, added_cols.tolist()))
    max_n = min(max(fam.max_n, _max_n(added)), TITLE_MAX_TOKENS) if added else fam.max_n

    def col_of(s):
        c = fam.vocab.get(s)
        return int(old_to_new[c]) if c is not None else new_index.get(s)
    # the new chunks: their own title and every title their text mentions
    rows, cols = [], []
    own = np.concatenate([np.asarray(W.title_own[:n_old], np.int64), np.full(n - n_old, -1, np.int64)])
    has = np.asarray(W.title_own[:n_old]) >= 0
    own[:n_old][has] = old_to_new[np.asarray(W.title_own[:n_old])[has]]
    vocab = W.vocab
    for i in range(n_old, n):
        nm = own_new_names[i - n_old]
        if nm is not None:
            own[i] = col_of(nm)
            rows.append(i)
            cols.append(own[i])
        a, b = int(W.seq_indptr[i]) + int(W.title_len[i]), int(W.seq_indptr[i + 1])
        hits = _mentions_in([vocab[j] for j in W.seq_ids[a:b]], col_of, max_n)
        rows += [i] * len(hits)
        cols += hits
    # the old chunks: mentions of the added titles only (the others were found when they came)
    index = W.index
    seqs, seq_cols = [], []
    for nm, c in zip(added, added_cols.tolist()):
        toks = nm.split(" ")
        if len(toks) <= TITLE_MAX_TOKENS and all(t in index for t in toks):
            seqs.append([index[t] for t in toks])
            seq_cols.append(c)
    r_old, k_old = _find_sequences(W, n_old, seqs)
    I = fam.incidence.tocsr()
    # the old pairs, columns renumbered (an increasing map: each row stays sorted), plus the new ones
    Old = sp.csr_matrix((np.ones(I.nnz, np.float32), old_to_new[I.indices].astype(np.int32), I.indptr),
                        shape=(n_old, M))
    Old.resize((n, M))
    New = _pairs_csr(np.concatenate([r_old, np.asarray(rows, np.int64)]),
                     np.concatenate([np.asarray(seq_cols, np.int64)[k_old], np.asarray(cols, np.int64)]), n, M)
    P = (Old + New).tocsr()
    P.sort_indices()
    return _degrees("title", P, n, own, names, max_n, counted=counted), own.astype(np.int32)


def title_after_delete(fam: Family, own: np.ndarray, keep: np.ndarray, n: int, counted=None) -> tuple:
    """(the "title" family of the rows ``keep``, their own columns): a title no kept chunk carries
    leaves with its column."""
    own_k = np.asarray(own, np.int64)[keep]
    used = np.unique(own_k[own_k >= 0])
    I = fam.incidence.tocsr()[keep][:, used]
    I.sort_indices()
    remap = np.full(max(len(fam.vocab), 1), -1, np.int64)
    remap[used] = np.arange(used.size)
    attrs = fam.attributes
    names = [attrs[j] for j in used]
    own_n = np.where(own_k >= 0, remap[np.maximum(own_k, 0)], -1)
    return _degrees("title", I, keep.size, own_n, names, _max_n(names), counted=counted), own_n.astype(np.int32)


# ---- the "term" family ---------------------------------------------------------------------------

def _term_of_words(W: CorpusWords, stemmer: str | None = None) -> tuple:
    """(term attribute string or None per word id): a word's BM25 term (its stem with ``stemmer``)
    when it is a "term" attribute (2+ characters, outside the term stopwords, or their stems), as
    the build's term family takes it."""
    from ..bm25_index import word_terms
    tid, names = word_terms(W, stemmer)
    stop = set(stem_words(sorted(STOPWORDS), stemmer)) if stemmer else STOPWORDS
    ok = np.fromiter((len(t) > 1 and t not in stop for t in names), bool, len(names))
    return tid, names, ok


def term_after_add(fam: Family, W: CorpusWords, n_old: int, new_ids: np.ndarray, new_off: np.ndarray,
                   counted=None) -> Family:
    """The "term" family after the chunks of ``new_ids`` (global word ids, flat, ``new_off``) were
    appended to ``W`` at rows n_old ..: new terms get columns in order of first occurrence."""
    n = W.n_chunks
    tid, tnames, ok = _term_of_words(W, fam.stemmer)
    vocab = dict(fam.vocab)
    names = fam.attributes
    # new attributes in order of first occurrence in the new chunks' text
    t = tid[new_ids] if new_ids.size else np.zeros(0, np.int32)
    t = t[t >= 0]
    t = t[ok[t]]
    if t.size:
        u, first = np.unique(t, return_index=True)
        for j in u[np.argsort(first, kind="stable")]:
            s = tnames[j]
            if s not in vocab:
                vocab[s] = len(names)
                names.append(s)
    col = np.full(len(tnames), -1, np.int64)
    for j in np.unique(t):
        col[j] = vocab[tnames[j]]
    bw = np.asarray(W.bag_words[int(W.bag_indptr[n_old]):])
    rows = np.repeat(np.arange(n_old, n, dtype=np.int64), np.diff(np.asarray(W.bag_indptr[n_old:], np.int64)))
    tw = tid[bw]
    keep = tw >= 0
    keep[keep] = ok[tw[keep]]
    New = _pairs_csr(rows[keep] - n_old, col[tw[keep]], n - n_old, len(names))
    Old = fam.incidence.tocsr()
    # the old rows' pattern as it is (no copy of its values: every degree is recomputed), and df as
    # the old df plus the new rows' column counts
    df = np.zeros(len(names), np.int64)
    df[:len(fam.df)] = fam.df
    df += np.bincount(New.indices, minlength=len(names))
    P = sp.csr_matrix((np.empty(Old.indices.size + New.indices.size, np.float32),
                       np.concatenate([Old.indices, New.indices]).astype(np.int32, copy=False),
                       np.concatenate([np.asarray(Old.indptr, np.int64), Old.indptr[-1] + New.indptr[1:].astype(np.int64)])),
                      shape=(n, len(names)))
    out = _degrees("term", P, n, None, names, fam.max_n, vocab, df=df, counted=counted)
    out.stemmer = fam.stemmer
    return out


def term_after_delete(fam: Family, W_old: CorpusWords, keep: np.ndarray, counted=None) -> Family:
    """The "term" family of the rows ``keep`` of ``W_old``, columns in order of first occurrence
    among them (a build's order): only the columns first met in a deleted chunk move."""
    I = fam.incidence.tocsr()
    n_old = I.shape[0]
    # the kept rows' pattern only (its degrees are recomputed), copied run by run
    k_ptr, k_idx = kept_rows(I.indptr, I.indices, keep)
    Ik = sp.csr_matrix((np.empty(k_idx.size, np.float32), k_idx, k_ptr), shape=(keep.size, I.shape[1]))
    Ik.sort_indices()                                  # one checking pass when I's rows are sorted
    df = np.bincount(Ik.indices, minlength=I.shape[1])
    used = df > 0
    # the row that introduced each column (columns are in order of first occurrence, so a row
    # introduces the columns between the running maxima of the columns seen before and through it)
    rmax = np.full(n_old, -1, np.int64)
    nz = np.flatnonzero(np.diff(I.indptr))
    if nz.size:
        rmax[nz] = np.maximum.reduceat(I.indices, I.indptr[nz])     # (in the indices' own dtype: no copy)
    run = np.maximum.accumulate(rmax)
    intro = np.searchsorted(run, np.arange(I.shape[1]), side="left")    # introducing row per column
    dropped = np.ones(n_old, bool)
    dropped[keep] = False
    movers = np.flatnonzero(dropped[intro] & used)
    new_row_of = np.full(n_old, -1, np.int64)
    new_row_of[keep] = np.arange(keep.size)
    key_row = new_row_of[intro]                        # -1 for movers, fixed below
    rank = np.arange(I.shape[1], dtype=np.int64)       # within a row: the old order stands
    if movers.size:
        is_mover = np.zeros(I.shape[1], bool)
        is_mover[movers] = True
        hit = np.flatnonzero(is_mover[Ik.indices])
        hit_row = np.searchsorted(Ik.indptr, hit, side="right") - 1
        hit_col = Ik.indices[hit].astype(np.int64)
        u, first = np.unique(hit_col, return_index=True)
        key_row[u] = hit_row[first]
        # rows that now introduce a mover: order all the columns they introduce by first position
        tid, tnames, ok = _term_of_words(W_old, fam.stemmer)
        vocab = fam.vocab
        for r in np.unique(key_row[u]).tolist():
            old_r = int(keep[r])
            seq = W_old.seq_ids[int(W_old.seq_indptr[old_r]):int(W_old.seq_indptr[old_r + 1])]
            t = tid[seq]
            t = t[t >= 0]
            t = t[ok[t]]
            tu, tf = np.unique(t, return_index=True)
            pos = {vocab[tnames[j]]: int(p) for j, p in zip(tu.tolist(), tf.tolist()) if tnames[j] in vocab}
            cols_r = np.flatnonzero((key_row == r) & used)
            for c in cols_r.tolist():
                rank[c] = pos[c]
    order = np.flatnonzero(used)
    order = order[np.lexsort((rank[order], key_row[order]))]
    attrs = fam.attributes
    names = [attrs[j] for j in order]
    remap = np.full(I.shape[1], -1, np.int32)
    remap[order] = np.arange(order.size, dtype=np.int32)
    cols = Ik.indices                                  # ours (copied run by run above): renumbered in place,
    for b in range(0, cols.size, 1 << 20):             # a block at a time (no second 0.15 GB array at 1M)
        cols[b:b + (1 << 20)] = remap[cols[b:b + (1 << 20)]]
    P = sp.csr_matrix((Ik.data, cols, Ik.indptr), shape=(keep.size, order.size))
    if np.all(order[1:] > order[:-1]):
        P.has_sorted_indices = True                    # the columns keep their order: rows stay sorted
    P.sort_indices()
    out = _degrees("term", P, keep.size, None, names, fam.max_n, counted=counted)
    out.stemmer = fam.stemmer
    return out
