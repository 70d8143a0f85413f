"""The map side of the lexical families' build: tokenise and match one block of chunks.

One ``\\w+`` pass over each lower-cased chunk serves everything: its tokens of 2+ characters are
exactly the tokens of bm25s's default pattern ``\\b\\w\\w+\\b`` (a maximal run of word characters is a
token in both), so the BM25 tokenisation, the "term" family and the normalised text the title matcher
reads all come from it. Every per-token step runs inside C loops (``re.findall``, ``dict.fromkeys``,
``pandas.factorize`` or ``map`` over ``dict.__getitem__``, ``np.sort``); Python code runs per chunk or per
vocabulary entry only.

The native map (``contextrag._C.LexicalMapper``, csrc/cpu/lexical_tokens.cpp) does the same for a
whole block in C++ without the GIL and returns the same arrays (tested equal); :func:`map_block` uses
it when the extension loads, and this module's Python map otherwise (or when asked, ``native=False``).

This module imports NumPy, ``re`` and the matcher only (not the orchestrator, not torch), so the
worker processes of :func:`contextrag.index.lexical.families.lexical_families` start quickly and stay small.
"""
from __future__ import annotations

import functools
import re
from itertools import chain, compress, filterfalse

import numpy as np

WORD = re.compile(r"\w+", re.UNICODE)
PAREN = re.compile(r"\s*\([^()]*\)\s*$")

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had has
have having he her here hers herself him himself his how i if in into is it its itself just me more
most my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves one two three first second new known became become later
including many may might must since though thus us well whose within without yet however among
""".split())


@functools.lru_cache(maxsize=1)
def bm25_stopwords() -> frozenset:
    """The stopwords of the BM25 index (bm25s's English list, ``core.BM25_STOPWORDS = "en"``)."""
    from bm25s.stopwords import STOPWORDS_EN
    return frozenset(STOPWORDS_EN)


def normalise(text: str) -> str:
    """Lower-case word tokens joined by single spaces."""
    return " ".join(WORD.findall(text.lower()))


def normalise_title(title: str) -> str:
    """A title as an entity name: disambiguation in trailing parentheses dropped, normalised."""
    return normalise(PAREN.sub("", title or ""))


def word_tokens(texts) -> list:
    """Lower-case ``\\w+`` tokens of every text (one list per text)."""
    return list(map(WORD.findall, map(str.lower, texts)))


def title_tokens(titles) -> list:
    """:func:`word_tokens` of titles, each distinct title tokenised once (chunks repeat their title)."""
    cache: dict = {}
    return [cache[t] if t in cache else cache.setdefault(t, WORD.findall(t.lower())) for t in titles]


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of an integer array (sort + neighbour test: several times faster
    than ``np.unique`` on millions of int64 keys with NumPy 2.4)."""
    a = np.sort(a)
    if a.size > 1:
        a = a[np.concatenate(([True], a[1:] != a[:-1]))]
    return a


def first_occurrence_ids(lists, n_tokens: int):
    """(vocabulary in order of first occurrence, its index dict, (n_tokens,) int64 ids) of the
    concatenated ``lists``. pandas.factorize (one C hash-table pass) when pandas is installed, else
    ``dict.fromkeys`` and a ``map`` over the dict: the same result."""
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        flat = np.empty(n_tokens, dtype=object)
        flat[:] = list(chain.from_iterable(lists))
        ids, keys = pd.factorize(flat)
        keys = keys.tolist()
        return keys, dict(zip(keys, range(len(keys)))), ids.astype(np.int64, copy=False)
    keys = list(dict.fromkeys(chain.from_iterable(lists)))
    local = dict(zip(keys, range(len(keys))))
    ids = np.fromiter(map(local.__getitem__, chain.from_iterable(lists)), np.int64, n_tokens)
    return keys, local, ids


def _mask_out(keys, local, words, min_len: int) -> np.ndarray:
    """Boolean mask over ``keys``: False for a word in ``words`` or shorter than ``min_len``."""
    ok = np.fromiter(map(len, keys), np.int64, len(keys)) >= min_len
    for w in words:
        j = local.get(w)
        if j is not None:
            ok[j] = False
    return ok


def term_pairs(row0: int, ttoks, xtoks):
    """The "term" map of one block: (attributes in order of first occurrence, rows, columns) of its
    unique (chunk, term) pairs, sorted by row; a term is a token of "title\\ntext" with 2+ characters
    outside :data:`STOPWORDS` and the BM25 stopwords. Columns index the returned attributes."""
    n = len(xtoks)
    lens = np.fromiter(map(len, ttoks), np.int64, n) + np.fromiter(map(len, xtoks), np.int64, n)
    lists = list(chain.from_iterable(zip(ttoks, xtoks)))        # title tokens, then text tokens, per chunk
    keys, local, ids = first_occurrence_ids(lists, int(lens.sum()))
    ok = _mask_out(keys, local, STOPWORDS | bm25_stopwords(), 2)
    V = max(len(keys), 1)
    key = np.repeat(np.arange(n, dtype=np.int64), lens) * V + ids
    key = sorted_unique(key[ok[ids]])
    pos = np.cumsum(ok) - 1                                    # column among the kept attributes
    return (list(compress(keys, ok)), (row0 + key // V).astype(np.int32), pos[key % V].astype(np.int32))


@functools.lru_cache(maxsize=1)
def _bm25_mapper():
    """A native mapper whose stopwords are the BM25 index's (for :func:`bm25_tokenize`), or None."""
    C = native_extension()
    return C.LexicalMapper(sorted(bm25_stopwords()), None, 1) if C is not None else None


def bm25_tokenize(texts, block: int = 16384, native: bool | None = None):
    """What ``bm25s.tokenize(texts, stopwords="en")`` returns (a ``Tokenized``: ids per text and the
    vocabulary, ids in order of first occurrence; tokens of 2+ characters minus the BM25 stopwords).
    Natively in one pass when the extension loads (``native`` not False), else block by block with
    the C-level steps of this module; both tested equal to bm25s."""
    from bm25s.tokenization import Tokenized
    m = _bm25_mapper() if native is not False else None
    if native and m is None:
        raise RuntimeError("native=True needs contextrag._C with the lexical mapper, which failed to import")
    if m is not None:
        ids, offsets, words = m.token_ids(list(texts))
        flat, off = ids.tolist(), offsets.tolist()
        return Tokenized(ids=[flat[a:b] for a, b in zip(off[:-1], off[1:])], vocab=dict(zip(words, range(len(words)))))
    stop = bm25_stopwords()
    vocab: dict = {}
    out: list = []
    texts = list(texts)
    for s in range(0, len(texts), block):
        xt = word_tokens(texts[s:s + block])
        n = len(xt)
        lens = np.fromiter(map(len, xt), np.int64, n)
        keys, local, ids = first_occurrence_ids(xt, int(lens.sum()))
        ok = _mask_out(keys, local, stop, 2)
        kept_keys = list(compress(keys, ok))
        new = list(filterfalse(vocab.__contains__, kept_keys))
        vocab.update(zip(new, range(len(vocab), len(vocab) + len(new))))
        gmap = np.full(len(keys), -1, np.int64)
        gmap[ok] = np.fromiter(map(vocab.__getitem__, kept_keys), np.int64, len(kept_keys))
        g = gmap[ids]
        keep = g >= 0
        kept = np.zeros(g.size + 1, np.int64)
        np.cumsum(keep, out=kept[1:])
        bounds = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=bounds[1:])
        out += [a.tolist() for a in np.split(g[keep], kept[bounds[1:-1]])] if n else []
    return Tokenized(ids=out, vocab=vocab)


def bm25_word_terms(words) -> list:
    """The BM25 term of each lower-case ``\\w+`` word, None for a word BM25 drops (1 character, or a
    BM25 stopword): what :func:`bm25_tokenize` keeps, word by word. The index derives its BM25 counts
    from its stored word counts with this map (index/bm25_index.py)."""
    stop = bm25_stopwords()
    return [w if len(w) > 1 and w not in stop else None for w in words]


def query_tokens(text: str) -> list:
    """``bm25s.tokenize([text], stopwords="en", return_ids=False)[0]``: a question's BM25 tokens."""
    stop = bm25_stopwords()
    return [t for t in WORD.findall(text.lower()) if len(t) > 1 and t not in stop]


# ---- title mentions ----------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def native_extension():
    """``contextrag._C`` when it loads and has the lexical mapper, else None (the Python map runs).
    A CONTEXTRAG_ISA this CPU cannot run raises ValueError (``contextrag.ops.native``)."""
    from contextrag.ops import native
    C = native()
    return C if hasattr(C, "LexicalMapper") else None


class Matcher:
    """The map's per-process state for the title names (``names``: the full, sorted name list, or None
    when only "term" is built): with the native extension, a ``LexicalMapper`` (names as a token
    trie, the term stopwords); without it (or ``native=False``), an Aho–Corasick automaton over
    " name " for every title name of at most ``max_n`` tokens, whose values are columns of ``names``.
    Space padding makes every match in a space-padded normalised text a whole-word match."""

    def __init__(self, names, max_n: int, native: bool | None = None):
        self.n_names = len(names) if names is not None else 0
        self.automaton = self.native = None
        C = native_extension() if native is not False else None
        if native and C is None:
            raise RuntimeError("the native lexical map needs contextrag._C, which failed to import")
        if C is not None:
            self.native = C.LexicalMapper(sorted(STOPWORDS | bm25_stopwords()), names, max_n)
            return
        cols = [j for j, t in enumerate(names) if len(t.split()) <= max_n] if names is not None else []
        if cols:
            import ahocorasick
            A = ahocorasick.Automaton()
            for j in cols:
                A.add_word(f" {names[j]} ", j)
            A.make_automaton()
            self.automaton = A


def mention_pairs(row0: int, xtoks, own_cols, matcher: Matcher):
    """The "title" map of one block: unique (row, name column) pairs, sorted by row, of the names each
    chunk's normalised text mentions and of its own title (``own_cols[i]``, −1 for none)."""
    n = len(xtoks)
    rows = [np.flatnonzero(np.asarray(own_cols) >= 0)]
    cols = [np.asarray(own_cols, np.int64)[rows[0]]]
    if matcher.automaton is not None and n:
        parts = list(map(" ".join, xtoks))
        plen = np.fromiter(map(len, parts), np.int64, n)
        starts = np.zeros(n, np.int64)
        starts[1:] = np.cumsum(plen + 3)[:-1]
        starts += 1                                   # " part0 \n part1 \n ... partN "
        hits = np.fromiter(chain.from_iterable(matcher.automaton.iter(" " + " \n ".join(parts) + " ")), np.int64)
        rows.append(np.searchsorted(starts, hits[0::2], side="right") - 1)
        cols.append(hits[1::2])
    V = max(matcher.n_names, 1)
    key = sorted_unique(np.concatenate(rows) * V + np.concatenate(cols))
    return (row0 + key // V).astype(np.int32), (key % V).astype(np.int32)


# ---- one block, in this process or a worker ------------------------------------------------------

_WORKER: dict = {}


def init_worker(names, max_n: int, native: bool | None = None) -> None:
    """Worker initialiser: the map's state (:class:`Matcher`), built once per process."""
    _WORKER["matcher"] = Matcher(names, max_n, native)


def map_block(row0: int, titles, texts, own_cols, want: tuple, matcher: Matcher | None = None) -> dict:
    """Tokenise one block of chunks once and produce the pairs of the families in ``want``:
    "term": (attributes in order of first occurrence, rows, columns), "title": (rows, columns), int32
    pairs unique and sorted by row, then column. ``matcher``: this process's :class:`Matcher` (else the
    worker's); natively when it holds the native mapper."""
    m = matcher if matcher is not None else _WORKER.get("matcher")
    if m is None:
        if "title" in want:
            raise ValueError("map_block: the title family needs a Matcher over the title names")
        m = _WORKER.get("term_only") or _WORKER.setdefault("term_only", Matcher(None, 1))
    if m.native is not None:
        attrs, tr, tc, mr, mc = m.native.map_block(list(titles), list(texts), own_cols, int(row0),
                                                   "term" in want, "title" in want)
        out = {}
        if "term" in want:
            out["term"] = (attrs, tr, tc)
        if "title" in want:
            out["title"] = (mr, mc)
        return out
    xt = word_tokens(texts)
    out = {}
    if "term" in want:
        out["term"] = term_pairs(row0, title_tokens(titles), xt)
    if "title" in want:
        out["title"] = mention_pairs(row0, xt, own_cols, m)
    return out
