"""An absolute relevance in [0, 1] beside every hit's rank score: how much of the question an item
answers, on a scale that does not move with the other results, so one cutoff separates a question the
corpus is about from one it is not (the rank score cannot: its BM25 term is divided by the per-query
maximum, so the best item of any question, however unrelated, gets the full BM25 weight).

    relevance = ½ · coverage + ½ · max(cos, 0)

* ``coverage``: the share of the question's information the item contains — the IDF-weighted
  fraction of the question's terms (the BM25 tokenizer's, stopwords removed) that occur in it,
  ``Σ_{t ∈ q ∩ item} idf(t) / Σ_{t ∈ q} idf(t)`` with BM25's idf, ``log(1 + (N − df + 0.5) / (df + 0.5))``
  over the N items of the index. A question term the corpus never uses gets the largest idf and
  counts against every item: a question about zebras asked of a corpus without the word scores low
  however well its other words match.
* ``cos``: the cosine between the question and the item in the embedder's space (already in [−1, 1],
  the same for every question), clipped at 0.

Both are absolute (no division by a per-query maximum) and free of fitted parameters; the equal
weights say only that lexical and semantic evidence count alike. Items scored without the cosine
(``w_cos = 0``) use the coverage alone. tests/query/test_demo_answer.py checks the separation (ROC
AUC) of questions about the demo corpus from questions about nothing in it (docs/QUERY.md).
"""
from __future__ import annotations

import math

import numpy as np

from ._select import in_sorted


def question_terms(question: str) -> list[str]:
    """The question's distinct BM25 terms, in order (the index's tokenizer)."""
    from ..index.lexical.tokens import query_tokens

    return list(dict.fromkeys(query_tokens(question)))


def _postings(view):
    """(index, its BM25) when the index's BM25 covers the view's items, so a term's items are its
    postings: :class:`~contextrag.index.bm25_index.CountBM25`'s, or a column of bm25s's by-term score
    matrix (a snapshot stored before the counts); else None."""
    from ..index.bm25_index import CountBM25
    src = getattr(view, "source", None)
    ix = src() if callable(src) else None
    bm = getattr(ix, "bm25", None)
    if ix is None or not callable(getattr(ix, "bm25_scores", None)):
        return None
    if isinstance(bm, CountBM25):
        return (ix, bm) if bm.n_items == view.n else None
    sc = getattr(bm, "scores", None)
    if (not isinstance(sc, dict) or sc.get("num_docs") != view.n
            or getattr(bm, "nonoccurrence_array", None) is not None
            or not isinstance(getattr(bm, "vocab_dict", None), dict)):
        return None
    return ix, bm


def _holders(got, term: str) -> np.ndarray:
    """The items whose BM25 score for ``term`` is > 0 (in the postings of one of its tokens), sorted
    and unique: a term's few postings, not an (n,) mask (a million items at scale)."""
    from ..index.bm25_index import CountBM25
    from ..index.core import bm25_tokenize, index_stemmer
    ix, bm = got
    vocab = bm.vocab_dict
    lists = []
    for t in bm25_tokenize([term], index_stemmer(ix.config))[0]:
        j = vocab.get(t)
        if j is None:
            continue
        if isinstance(bm, CountBM25):
            lists.append(bm.postings(j)[0])
        elif 0 <= j < len(bm.scores["indptr"]) - 1:
            ptr, ind = bm.scores["indptr"], bm.scores["indices"]
            lists.append(ind[ptr[j]:ptr[j + 1]])
    if len(lists) == 1:      # one token: one column's rows, unique and (checked) ascending
        rows = np.asarray(lists[0], np.int64)
        return rows if rows.size < 2 or bool((rows[1:] > rows[:-1]).all()) else np.unique(rows)
    return np.unique(np.concatenate(lists).astype(np.int64)) if lists else np.zeros(0, np.int64)


def coverage(view, question: str, idx) -> np.ndarray:
    """(len(idx),) the IDF-weighted share of the question's terms each item ``idx`` contains."""
    idx = np.asarray(idx, dtype=np.int64)
    terms = question_terms(question)
    if not terms or idx.size == 0:
        return np.zeros(idx.size, dtype=np.float64)
    n = max(int(view.n), 1)
    got = np.zeros(idx.size, dtype=np.float64)
    total = 0.0
    post = _postings(view)
    for t in terms:
        if post is not None:     # the term's postings: no pass over all n items (a million at scale)
            h = _holders(post, t)
            df = int(h.size)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            total += idf
            got += idf * in_sorted(h, idx)
            continue
        present = np.asarray(view.bm25_raw(t), dtype=np.float64) > 0      # items that contain t
        df = int(present.sum())
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        total += idf
        got += idf * present[idx]
    return got / total if total > 0 else got


def relevance(view, question: str, idx, cos=None) -> np.ndarray:
    """(len(idx),) the absolute relevance of items ``idx`` (module docstring); ``cos``: their cosines
    to the question, or None when the cosine was not computed."""
    cov = coverage(view, question, idx)
    if cos is None:
        return np.clip(cov, 0.0, 1.0)
    c = np.clip(np.asarray(cos, dtype=np.float64), 0.0, 1.0)
    return np.clip(0.5 * cov + 0.5 * c, 0.0, 1.0)


def annotate(view, question: str, hits, idx, cfg) -> list:
    """Set ``Hit.relevance`` on ``hits`` (items ``idx`` of ``view``, for ``question``); return them."""
    if not len(hits):
        return hits
    cos = [h.parts.get("cos", 0.0) for h in hits] if cfg.w_cos != 0 else None
    for h, r in zip(hits, relevance(view, question, idx, cos)):
        h.relevance = float(r)
    return hits
