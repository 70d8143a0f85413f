"""Extraction-free lexical attribute families for the fuzzy formal context.

The RQ-KMeans levels describe a chunk's topic; multi-hop questions need what the embedding does not
carry: the *entities* and *rare terms* that link a passage to the next one. Three families are built
here with regular expressions and corpus statistics only (no LLM, no model):

* ``title``  -- every document title is an entity attribute. A chunk has it with degree 1 when it is
  the titled document itself, and with the attribute's weight when its text mentions the title
  (case-insensitive, whole words, a parenthesised disambiguation such as "(film)" dropped).
* ``phrase`` -- entity-like phrases found by regular expression: capitalised n-grams (with inner
  connectors such as "of", "de", "von"), quoted titles, and years.
* ``term``   -- informative single terms (stopwords removed).

Fuzzy incidence: the weight of attribute a is its normalised inverse document frequency
w(a) = log(N / df(a)) / log(N) in [0, 1] (1 for an attribute of one chunk, 0 for one of all chunks),
a parameter-free, saturating scale. Attributes held by a single chunk link nothing and are kept only
for query matching. Each family is a CSR matrix (chunks x attributes).
"""
from __future__ import annotations

import math
import os
import re
from itertools import chain, filterfalse
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .tokens import STOPWORDS, WORD, normalise, normalise_title, sorted_unique, stem_words  # noqa: F401  (re-exported)

FAMILIES = ("title", "phrase", "term")

# A capitalised word: an upper-case letter then word characters, apostrophes, hyphens, dots (initials).
_CAPW = r"(?:[A-Z\u00C0-\u00DE][\w'\u2019\-]*\.?)"
_CONN = r"(?:of|the|de|da|del|della|di|du|des|la|le|van|von|der|den|and|&|for|y|al|bin|el|upon|on)"
_PHRASE = re.compile(rf"{_CAPW}(?:\s+(?:{_CONN}\s+)*{_CAPW})*")
_QUOTED = re.compile(r"[\"\u201C]([^\"\u201D]{2,80})[\"\u201D]")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_WORD = WORD


def entity_phrases(text: str) -> set[str]:
    """Entity-like phrases of a text by regular expression: capitalised n-grams, quoted titles, years.

    Returned normalised (lower-case tokens). A single capitalised word that is a stopword ("The",
    "He", "In" at a sentence start) is not an entity; a phrase's leading "the" is dropped.
    """
    out: set[str] = set()
    for m in _PHRASE.finditer(text):
        p = normalise(m.group(0))
        if p.startswith("the "):
            p = p[4:]
        if not p:
            continue
        if " " not in p and (p in STOPWORDS or len(p) < 2):
            continue
        out.add(p)
    for m in _QUOTED.finditer(text):
        p = normalise(m.group(1))
        if p and p not in STOPWORDS and len(p.split()) <= 8:
            out.add(p)
    for m in _YEAR.finditer(text):
        out.add(m.group(1))
    return out


def terms(text: str) -> set[str]:
    """Informative single terms: lower-case word tokens, stopwords and 1-character tokens removed."""
    return {t for t in _WORD.findall(text.lower()) if len(t) > 1 and t not in STOPWORDS}


def _ngrams(tokens: list[str], max_n: int):
    L = len(tokens)
    for i in range(L):
        for n in range(1, min(max_n, L - i) + 1):
            yield " ".join(tokens[i:i + n])


def idf_weight(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Normalised IDF log(N/df)/log(N), clipped to [0, 1]; 1 when N <= 1."""
    df = np.maximum(np.asarray(df, dtype=np.float64), 1.0)
    if n_docs <= 1:
        return np.ones_like(df)
    return np.clip(np.log(n_docs / df) / math.log(n_docs), 0.0, 1.0)


@dataclass
class Family:
    """One attribute family: vocabulary, document frequencies and the CSR incidence (chunks x attrs)."""
    name: str
    vocab: dict                       # attribute string -> column
    df: np.ndarray                    # chunks holding each attribute
    weight: np.ndarray                # normalised IDF per attribute, in [0, 1]
    incidence: sp.csr_matrix          # (n_chunks, n_attrs) float32 in [0, 1]
    max_n: int = 1                    # longest attribute in tokens (for query matching)
    stemmer: str | None = None        # "term": attributes are Snowball stems of this language

    @property
    def attributes(self) -> list[str]:
        out = [""] * len(self.vocab)
        for a, j in self.vocab.items():
            out[j] = a
        return out

    def query_activation(self, query: str) -> sp.csr_matrix:
        """μ(q, a): the weight of every attribute of this family that the query mentions, (1, M) CSR."""
        cols, vals = self.query_columns(query)
        return sp.csr_matrix((vals, (np.zeros(len(cols), int), cols)), shape=(1, len(self.vocab)))

    def query_columns(self, query: str):
        """(columns, μ values) of the attributes the query mentions."""
        if self.name == "title":
            keys = set(_ngrams(normalise(query).split(), self.max_n))
        elif self.name == "phrase":
            keys = entity_phrases(query) | set(_ngrams(normalise(query).split(), min(self.max_n, 4)))
        else:
            keys = terms(query)
            if self.stemmer:
                keys = set(stem_words(keys, self.stemmer))
        cols = np.asarray(sorted({self.vocab[k] for k in keys if k in self.vocab}), dtype=np.int64)
        vals = self.weight[cols].astype(np.float32) if cols.size else np.zeros(0, np.float32)
        return cols, vals


def _family_from_sets(name, sets, own=None, max_n=1, min_df=1):
    """CSR family from per-chunk attribute sets; `own[i]` (optional) is an attribute chunk i holds with degree 1."""
    n = len(sets)
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for i, s in enumerate(sets):
        for a in s:
            j = vocab.setdefault(a, len(vocab))
            rows.append(i)
            cols.append(j)
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    df = np.bincount(cols, minlength=len(vocab)) if len(cols) else np.zeros(len(vocab), np.int64)
    if min_df > 1 and len(vocab):
        keep = np.flatnonzero(df >= min_df)
        remap = -np.ones(len(vocab), np.int64)
        remap[keep] = np.arange(len(keep))
        m = remap[cols] >= 0
        rows, cols = rows[m], remap[cols[m]]
        inv = {j: a for a, j in vocab.items()}
        vocab = {inv[j]: k for k, j in enumerate(keep)}
        df = df[keep]
    w = idf_weight(df, n)
    vals = w[cols].astype(np.float32)
    if own is not None and len(rows):
        own_col = np.array([vocab.get(a, -1) if a else -1 for a in own], dtype=np.int64)
        vals[own_col[rows] == cols] = 1.0
    I = sp.csr_matrix((vals, (rows, cols)), shape=(n, len(vocab)), dtype=np.float32)
    I.sum_duplicates()
    I.data = np.minimum(I.data, 1.0)
    return Family(name=name, vocab=vocab, df=df.astype(np.int64), weight=w.astype(np.float32),
                  incidence=I, max_n=max_n)


TITLE_MAX_TOKENS = 10   # longest title (in tokens) matched as a mention; longer ones only tag their own chunk


BLOCK = 8192           # chunks per block: bounds the transient Python token lists (about 0.2 GB) at any corpus size
NATIVE_BLOCK = 32768   # the same for the native map (no token lists: about 40 MB of pairs per block); bigger
                       # blocks mean fewer block vocabularies to re-learn and merge


def _mention_automaton(names):
    """An Aho–Corasick automaton over " name " for every name (padded with spaces, so a match in a
    space-padded normalised text is a whole-word match); the value is the name's column."""
    import ahocorasick
    A = ahocorasick.Automaton()
    for j, t in enumerate(names):
        A.add_word(f" {t} ", j)
    A.make_automaton()
    return A


def _family_from_pairs(name, rows, cols, names, n, own_col=None, max_n=1, unique=False) -> Family:
    """CSR family from (row, column) pairs over the columns ``names``; unused columns are dropped.
    Degree w(a) = normalised IDF; ``own_col[i]`` (optional, −1 for none) is a column chunk i holds with
    degree 1. ``unique``: the pairs are already unique and grouped by ascending row (no sort needed)."""
    V = len(names)
    if not unique:
        rows = np.asarray(rows, np.int64)
        cols = np.asarray(cols, np.int64)
        if rows.size:
            key = np.unique(rows * max(V, 1) + cols)
            rows, cols = key // max(V, 1), key % max(V, 1)
    df = np.bincount(cols, minlength=V).astype(np.int64)
    keep = np.flatnonzero(df > 0)
    remap = np.full(V, -1, np.int32)
    remap[keep] = np.arange(keep.size, dtype=np.int32)
    df = df[keep]
    w = idf_weight(df, n)
    cols = remap[cols]
    vals = w.astype(np.float32)[cols]
    if own_col is not None and rows.size:
        own = np.asarray(own_col, np.int64)[rows]
        vals[(own >= 0) & (remap[np.maximum(own, 0)] == cols)] = 1.0
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    I = sp.csr_matrix((vals, cols, indptr), shape=(n, keep.size))
    I.has_sorted_indices = False
    I.sort_indices()
    return Family(name=name, vocab={names[j]: k for k, j in enumerate(keep)}, df=df,
                  weight=w.astype(np.float32), incidence=I, max_n=max_n)


def title_family(titles, texts, max_n: int = TITLE_MAX_TOKENS) -> Family:
    """Document titles as entity attributes: degree 1 for the titled chunk, w(a) for chunks that mention it.

    Mentions are found in one linear pass per chunk by an Aho–Corasick automaton over all titles of at
    most ``max_n`` tokens, run on the normalised text (lower-case word tokens joined by single spaces):
    the same whole-word matches as looking up every n-gram of the text, in time linear in the text."""
    own = [normalise_title(t) for t in titles]
    names = sorted({t for t in own if t and t not in STOPWORDS and len(t) > 1})
    col = {t: j for j, t in enumerate(names)}
    own_col = np.fromiter((col.get(o, -1) for o in own), dtype=np.int64, count=len(own))
    A = _mention_automaton([t for t in names if len(t.split()) <= max_n]) if names else None
    # the automaton's values index the matchable subset: map them back to columns of `names`
    matchable = np.asarray([j for j, t in enumerate(names) if len(t.split()) <= max_n], np.int64)
    rows, cols = [], []
    if A is not None:
        for i, x in enumerate(texts):
            hits = [v for _, v in A.iter(f" {normalise(x)} ")]
            if hits:
                rows.append(np.full(len(hits), i, np.int64))
                cols.append(matchable[hits])
    has = np.flatnonzero(own_col >= 0)
    rows.append(has)
    cols.append(own_col[has])
    n_max = min(max([len(t.split()) for t in names] + [1]), max_n)
    return _family_from_pairs("title", np.concatenate(rows), np.concatenate(cols), names, len(texts),
                              own_col=own_col, max_n=n_max)


def phrase_family(titles, texts) -> Family:
    sets = [entity_phrases(f"{t}. {x}" if t else x) for t, x in zip(titles, texts)]
    max_n = max([len(a.split()) for s in sets for a in s] + [1])
    return _family_from_sets("phrase", sets, max_n=max_n)


class TermPairs:
    """Accumulates the unique (chunk, term) pairs from BM25 token ids block by block, over one global
    vocabulary; stopwords (here and in BM25) and 1-character tokens are dropped per block."""

    def __init__(self):
        self.vocab: dict[str, int] = {}
        self.rows: list = []
        self.cols: list = []

    def add(self, ids, local_vocab: dict, row0: int) -> None:
        inv = [""] * len(local_vocab)
        for t, j in local_vocab.items():
            inv[j] = t
        ok = np.fromiter((len(t) > 1 and t not in STOPWORDS for t in inv), dtype=bool, count=len(inv))
        g = self.vocab
        lmap = np.fromiter((g.setdefault(t, len(g)) if k else -1 for t, k in zip(inv, ok)), dtype=np.int64,
                           count=len(inv))
        lens = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        if not lens.sum():
            return
        flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lens.sum()))
        V = max(len(inv), 1)
        key = np.repeat(np.arange(len(ids), dtype=np.int64), lens) * V + flat
        key = np.unique(key[ok[flat]])          # sorted by (row, local id): unique, grouped by row
        self.rows.append((row0 + key // V).astype(np.int32))
        self.cols.append(lmap[key % V].astype(np.int32))

    def family(self, n: int) -> Family:
        names = [""] * len(self.vocab)
        for t, j in self.vocab.items():
            names[j] = t
        rows = np.concatenate(self.rows) if self.rows else np.zeros(0, np.int32)
        cols = np.concatenate(self.cols) if self.cols else np.zeros(0, np.int32)
        self.rows, self.cols = [], []
        return _family_from_pairs("term", rows, cols, names, n, unique=True)


def term_family(titles, texts, block: int = BLOCK) -> Family:
    """Informative terms of "title\\ntext", tokenised like the BM25 index, block by block."""
    from .tokens import bm25_tokenize
    acc = TermPairs()
    texts = list(texts)
    for s in range(0, len(texts), block):
        ids, vocab = bm25_tokenize([f"{t}\n{x}" if t else x for t, x in zip(titles[s:s + block], texts[s:s + block])])
        acc.add(ids, vocab, s)
    return acc.family(len(texts))


def term_family_from_tokens(ids, vocab: dict, n: int, block: int = BLOCK, stemmer: str | None = None) -> Family:
    """The term family from the BM25 index's own tokenisation of the chunks (``ids[:n]``, ``vocab``):
    lower-case \\w\\w+ tokens minus the BM25 stopwords, and minus :data:`STOPWORDS` here, so the family
    is "word tokens of 2+ characters minus STOPWORDS", the same as :func:`term_family` builds.
    Columns in the vocabulary's order (first occurrence), block by block with NumPy. ``stemmer``: the
    tokens are stems of that language (``bm25_tokenize(..., stemmer=)``); the stems of STOPWORDS are
    dropped, and queries are stemmed alike (:meth:`Family.query_columns`)."""
    inv = [""] * len(vocab)
    for t, j in vocab.items():
        inv[j] = t
    ok = np.fromiter(map(len, inv), np.int64, len(inv)) > 1
    for w in (set(stem_words(sorted(STOPWORDS), stemmer)) if stemmer else STOPWORDS):
        j = vocab.get(w)
        if j is not None:
            ok[j] = False
    col = (np.cumsum(ok) - 1).astype(np.int32)
    red = FamilyReducer("term", n, names=[t for t, k in zip(inv, ok) if k])
    V = max(len(inv), 1)
    for s in range(0, n, block):
        part = ids[s:min(s + block, n)]
        lens = np.fromiter(map(len, part), np.int64, len(part))
        flat = np.fromiter(chain.from_iterable(part), np.int64, int(lens.sum()))
        key = np.repeat(np.arange(len(part), dtype=np.int64), lens) * V + flat
        key = sorted_unique(key[ok[flat]])
        red.add(s, len(part), (s + key // V).astype(np.int32), col[key % V])
    fam = red.family()
    fam.stemmer = stemmer or None
    return fam


def stem_term_family(fam: Family, stemmer: str) -> Family:
    """The "term" family over Snowball stems from the family over words (``fam``, columns in order
    of first occurrence, as every builder makes them): the words of one stem become one column, in
    order of their first column, and the stems of STOPWORDS (and 1-character stems) go. Equal to
    :func:`term_family_from_tokens` over stemmed tokens (tested), without tokenising again: the map
    (one process, worker processes or Ray shards) tokenises once, and only the vocabulary is stemmed."""
    stems = stem_words(fam.attributes, stemmer)
    stop = set(stem_words(sorted(STOPWORDS), stemmer))
    index: dict = {}
    col = np.fromiter((-1 if len(t) <= 1 or t in stop else index.setdefault(t, len(index)) for t in stems),
                      np.int64, len(stems))
    I = fam.incidence.tocoo()
    c = col[I.col]
    keep = c >= 0
    out = _family_from_pairs("term", I.row[keep], c[keep], list(index), fam.incidence.shape[0])
    out.stemmer = stemmer
    return out


BUILDERS = {"title": title_family, "phrase": phrase_family, "term": term_family}


def _scaled(M: sp.csr_matrix, w: float) -> sp.csr_matrix:
    """w · M, or M itself for w = 1 (the default weight; hstack copies it anyway: a product by 1 would
    copy its 43 million entries once more at a million chunks)."""
    return M if float(w) == 1.0 else M * float(w)


@dataclass
class LexicalContext:
    """The lexical part of the fuzzy formal context: one CSR family per name. ``distinct``: the N the
    weights were counted over when they count the chunks of new text only (:func:`counted_over`),
    None when they count every chunk."""
    families: dict = field(default_factory=dict)
    distinct: int | None = None

    @classmethod
    def build(cls, titles, texts, families=("title", "phrase")) -> "LexicalContext":
        titles = [t or "" for t in titles]
        return cls({name: BUILDERS[name](titles, texts) for name in families})

    def names(self, weights: dict | None = None) -> list[str]:
        """Families taking part for these per-family weights (weight > 0), in build order."""
        return [f for f in self.families if weights is None or weights.get(f, 0.0) > 0]

    def incidence(self, weights: dict | None = None) -> sp.csr_matrix:
        """The union of the families as one CSR (chunks x attributes), family f scaled by weights[f] (<= 1)."""
        mats = [_scaled(self.families[f].incidence, 1.0 if weights is None else min(1.0, weights[f]))
                for f in self.names(weights)]
        if not mats:
            n = next(iter(self.families.values())).incidence.shape[0] if self.families else 0
            return sp.csr_matrix((n, 0), dtype=np.float32)
        if all(sp.isspmatrix_csr(M) for M in mats):
            from ..layout import hstack_rows
            return hstack_rows(mats)
        return sp.hstack(mats, format="csr", dtype=np.float32)

    def query_activation_dense(self, query: str, weights: dict | None = None) -> np.ndarray:
        """μ(q, ·) as a dense float32 vector over the columns of :meth:`incidence` (faster per query)."""
        names = self.names(weights)
        sizes = [len(self.families[f].vocab) for f in names]
        out = np.zeros(int(sum(sizes)), dtype=np.float32)
        off = 0
        for f, n in zip(names, sizes):
            cols, vals = self.families[f].query_columns(query)
            w = 1.0 if weights is None else min(1.0, float(weights[f]))
            out[off + cols] = vals * w
            off += n
        return out

    def query_activation(self, query: str, weights: dict | None = None) -> sp.csr_matrix:
        """μ(q, ·) over the same columns as :meth:`incidence`, (1, M) CSR."""
        mats = [self.families[f].query_activation(query) * float(1.0 if weights is None else min(1.0, weights[f]))
                for f in self.names(weights)]
        if not mats:
            return sp.csr_matrix((1, 0), dtype=np.float32)
        return sp.hstack(mats, format="csr", dtype=np.float32)


def counted_over(ctx: LexicalContext, rows: np.ndarray) -> LexicalContext:
    """``ctx`` with every weight w(a) = log(N/df)/log(N) counted over the chunks ``rows`` (bool, one
    per chunk) only: N = their number, df(a) = those of them holding a (index/distinct.py: the chunks
    of new text). Each degree becomes the new w(a); a titled chunk's own degree 1 stays (a degree of
    1 is either that or w(a) = 1, df <= 1, which the counted df cannot raise). ``Family.df`` stays
    the count over every chunk (which attributes exist, which link at all)."""
    rows = np.asarray(rows, bool)
    fams = {}
    for name, f in ctx.families.items():
        I = f.incidence.tocsr()
        w = counted_weights(I, rows, name)
        own = np.asarray(I.data) >= 1.0
        data = w[I.indices]
        data[own] = 1.0
        M = sp.csr_matrix((data, I.indices, I.indptr), shape=I.shape)
        M.has_sorted_indices = I.has_sorted_indices
        fams[name] = Family(name=f.name, vocab=f.vocab, df=f.df, weight=w, incidence=M, max_n=f.max_n,
                            stemmer=f.stemmer)
    return LexicalContext(fams, distinct=int(rows.sum()))


def counted_weights(I: sp.csr_matrix, rows: np.ndarray, name: str = "") -> np.ndarray:
    """float32 (attributes,): w(a) = log(N/df)/log(N) with N = the chunks ``rows`` (bool, one per row of
    the incidence pattern ``I``) and df(a) = those of them holding a; ``I``'s values are not read."""
    rows = np.asarray(rows, bool)
    if I.shape[0] != rows.size:
        raise ValueError(f"lexical family {name!r} has {I.shape[0]} rows, the mask {rows.size}")
    held = np.repeat(rows, np.diff(I.indptr))
    df = np.bincount(np.asarray(I.indices)[held], minlength=I.shape[1])
    return idf_weight(df, int(rows.sum())).astype(np.float32)


# ---- index families: built with the index, stored in its snapshot -----------------------------

def lexical_families(titles, texts, names, *, tokens=None, workers: int | None = None,
                     block: int | None = None, mp_context=None, map_fn=None, native: bool | None = None,
                     stemmer: str | None = None) -> LexicalContext:
    """The families ``names`` over the chunks, built by map/reduce over blocks of ``block`` chunks.

    Map (per block, in a thread or a worker process): tokenise each chunk once and find its title
    mentions and term pairs (:mod:`.tokens`; natively, csrc/cpu/lexical_tokens.cpp, when
    ``native`` is not False and the extension loads). Reduce (here): the global term vocabulary in
    order of first occurrence, the document frequencies and the CSR incidence, assembled with NumPy.
    Equal to :func:`title_family` and :func:`term_family` (tested). ``workers``: threads for the
    native map (None: one per CPU), or processes for the Python map or with ``mp_context`` (None: up
    to 2 per CPU pair when there are at least 4 blocks, else in this process); 1: in this thread.
    ``tokens``: the BM25 tokenisation (``Tokenized`` with ``ids`` and ``vocab``) of a list whose
    first ``len(texts)`` entries are "title\\ntext" of the chunks: "term" then reuses it.
    ``map_fn``: runs the map elsewhere (see :func:`map_reduce_families`; the Ray build's shards).
    ``block``: chunks per block (None: :data:`NATIVE_BLOCK` for the native map, else :data:`BLOCK`).
    ``stemmer``: "term" over Snowball stems of that language (``tokens``, when given, must be stemmed
    alike; without them the map's word family is stemmed, :func:`stem_term_family`)."""
    titles = [t or "" for t in titles]
    texts = list(texts)
    if len(titles) != len(texts):
        raise ValueError(f"titles has {len(titles)} entries, texts has {len(texts)}")
    for name in names:
        if name not in BUILDERS:
            raise ValueError(f"unknown lexical family {name!r} (have {sorted(BUILDERS)})")
    if block is not None and (not isinstance(block, int) or block < 1):
        raise ValueError(f"block must be an int >= 1, got {block!r}")
    want = tuple(x for x in ("title", "term") if x in names and not (x == "term" and tokens is not None))
    fams = map_reduce_families(titles, texts, want, workers=workers, block=block, mp_context=mp_context,
                               map_fn=map_fn, native=native) if want else {}
    for name in names:
        if name == "term" and tokens is not None:
            fams[name] = term_family_from_tokens(tokens.ids, tokens.vocab, len(texts), stemmer=stemmer)
        elif name == "term" and stemmer:
            fams[name] = stem_term_family(fams[name], stemmer)
        elif name == "phrase":
            fams[name] = phrase_family(titles, texts)
    return LexicalContext({name: fams[name] for name in names})


def map_workers(workers: int | None, n_blocks: int) -> int:
    """Processes for the map: ``workers`` if given, else min(2, CPUs) from 4 blocks on (a process
    costs about a second to start; below that the map runs here)."""
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an int >= 1 or None, got {workers!r}")
        return min(workers, max(n_blocks, 1))
    return min(2, os.cpu_count() or 1) if n_blocks >= 4 else 1


def title_columns(titles, max_n: int = TITLE_MAX_TOKENS):
    """(sorted title names, own column per chunk (−1 for none), longest name matched in tokens)."""
    cache: dict = {}
    own = [cache[t] if t in cache else cache.setdefault(t, normalise_title(t)) for t in titles]
    names = sorted({t for t in cache.values() if t and t not in STOPWORDS and len(t) > 1})
    col = dict(zip(names, range(len(names))))
    own_col = np.fromiter(map(col.get, own, [-1] * len(own)), np.int64, len(own))
    n_max = min(max([len(t.split()) for t in names] + [1]), max_n)
    return names, own_col, n_max


def _drain(parts: list, dtype) -> np.ndarray:
    """Concatenate ``parts`` while emptying the list, so at most one part exists twice at a time."""
    out = np.empty(sum(p.size for p in parts), dtype)
    o = 0
    parts.reverse()
    while parts:
        p = parts.pop()
        out[o:o + p.size] = p
        o += p.size
    return out


class FamilyReducer:
    """Reduce side of the map: collects one family's per-block pairs (rows sorted per block, blocks in
    order) and assembles the CSR family: document frequencies by ``bincount``, degrees w(a) from them.
    ``names=None``: the block attributes are merged into one vocabulary in order of first occurrence."""

    def __init__(self, name: str, n: int, names=None, own_col=None, max_n: int = 1):
        self.name, self.n, self.max_n, self.own_col = name, n, max_n, own_col
        self.vocab = None if names is None else names
        self._index = {} if names is None else None
        self.counts, self.cols, self.own = [], [], []
        self.df = np.zeros(0 if names is None else len(names), np.int64)   # summed per block

    def add(self, row0: int, n_rows: int, rows, cols, attributes=None) -> None:
        if self._index is not None:            # block-local attribute columns -> global columns
            g = self._index
            new = list(filterfalse(g.__contains__, attributes))
            g.update(zip(new, range(len(g), len(g) + len(new))))
            cols = np.fromiter(map(g.__getitem__, attributes), np.int32, len(attributes))[cols]
        self.counts.append(np.bincount(rows - row0, minlength=n_rows))
        self.cols.append(np.asarray(cols, np.int32))
        df = np.bincount(self.cols[-1], minlength=self.df.size)   # per block: no nnz-sized int64 copy
        if df.size > self.df.size:
            df[:self.df.size] += self.df
            self.df = df
        else:
            self.df += df
        if self.own_col is not None:
            self.own.append(self.own_col[rows] == cols)

    def family(self) -> Family:
        names = list(self._index) if self._index is not None else self.vocab
        V, n = len(names), self.n
        indices = _drain(self.cols, np.int32)
        indptr = np.zeros(n + 1, np.int64)
        if self.counts:
            np.cumsum(np.concatenate(self.counts), out=indptr[1:])
        df = np.zeros(V, np.int64)
        df[:self.df.size] = self.df
        keep = np.flatnonzero(df > 0)
        if keep.size < V:                      # titles nobody mentions and no chunk holds
            remap = np.full(V, -1, np.int32)
            remap[keep] = np.arange(keep.size, dtype=np.int32)
            indices = remap[indices]
            df = df[keep]
            names = [names[j] for j in keep]
        w = idf_weight(df, n)
        data = w.astype(np.float32)[indices]
        if self.own:
            data[_drain(self.own, bool)] = 1.0
        I = sp.csr_matrix((data, indices, indptr), shape=(n, keep.size))
        I.has_sorted_indices = False
        I.sort_indices()
        return Family(name=self.name, vocab=dict(zip(names, range(len(names)))), df=df,
                      weight=w.astype(np.float32), incidence=I, max_n=self.max_n)


def map_reduce_families(titles, texts, want, *, workers=None, block: int | None = None, mp_context=None,
                        map_fn=None, native: bool | None = None) -> dict:
    """The "title" and/or "term" families (``want``) by map/reduce over blocks of chunks.
    ``map_fn(jobs, names, max_n)``, optional, runs the map elsewhere (e.g. on Ray tasks): it gets the
    jobs (argument tuples of :func:`.tokens.map_block`) and the title matcher's inputs, and
    returns the block results in order. ``native``: the C++ map (None: when the extension loads).

    Where the map runs: with the native map, in threads of this process (it holds no GIL while it
    tokenises and matches, so threads share the texts: no copies to worker processes); with the
    Python map, or when ``mp_context`` is given, in worker processes."""
    from . import tokens as lm
    use_native = native is not False and lm.native_extension() is not None
    if native and not use_native:
        raise RuntimeError("native=True needs contextrag._C with the lexical mapper, which failed to import")
    block = block or (NATIVE_BLOCK if use_native else BLOCK)
    n = len(texts)
    names = own_col = None
    n_max = 1
    red = {}
    if "title" in want:
        names, own_col, n_max = title_columns(titles)
        red["title"] = FamilyReducer("title", n, names=names, own_col=own_col, max_n=n_max)
    if "term" in want:
        red["term"] = FamilyReducer("term", n)
    jobs = [(s, titles[s:s + block], texts[s:s + block],
             own_col[s:s + block] if own_col is not None else None, tuple(want)) for s in range(0, n, block)]

    def reduce(results):
        for (row0, _, tx, _, _), r in zip(jobs, results):
            if "term" in r:
                attrs, rows, cols = r["term"]
                red["term"].add(row0, len(tx), rows, cols, attrs)
            if "title" in r:
                red["title"].add(row0, len(tx), *r["title"])

    if map_fn is not None:
        reduce(map_fn(jobs, names, TITLE_MAX_TOKENS))
    elif use_native and mp_context is None:
        matcher = lm.Matcher(names, TITLE_MAX_TOKENS, native=True)
        k = map_threads(workers, len(jobs))
        if k <= 1:
            reduce(lm.map_block(*j, matcher=matcher) for j in jobs)
        else:
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(k) as ex:
                reduce(ex.map(lambda j: lm.map_block(*j, matcher=matcher), jobs))
    elif map_workers(workers, len(jobs)) <= 1:
        matcher = lm.Matcher(names, TITLE_MAX_TOKENS, native=use_native)
        reduce(lm.map_block(*j, matcher=matcher) for j in jobs)
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        ctx = mp.get_context(mp_context) if isinstance(mp_context, str) or mp_context is None else mp_context
        with ProcessPoolExecutor(map_workers(workers, len(jobs)), mp_context=ctx, initializer=lm.init_worker,
                                 initargs=(names, TITLE_MAX_TOKENS, use_native)) as ex:
            reduce(ex.map(lm.map_block, *zip(*jobs)))
    return {k: r.family() for k, r in red.items()}


def map_threads(workers: int | None, n_blocks: int) -> int:
    """Threads for the native map: ``workers`` if given, else one per CPU (a thread starts in
    microseconds, so from 2 blocks on); never more than blocks."""
    if workers is not None:
        return map_workers(workers, n_blocks)
    return max(1, min(os.cpu_count() or 1, n_blocks))


def _utf8(names) -> np.ndarray:
    return np.frombuffer("\n".join(names).encode("utf-8"), dtype=np.uint8).copy()


def lexical_arrays(ctx: LexicalContext) -> dict:
    """The arrays of a lexical context for the snapshot: per family its CSR incidence, document
    frequencies and vocabulary (UTF-8, one attribute per line: normalised attributes hold no newline).
    The weights w(a) are recomputed from df on load, unless they count the distinct text only
    (``LexicalContext.distinct``): then they are stored."""
    arrs = {}
    for name, f in ctx.families.items():
        I = f.incidence.tocsr()
        arrs[f"lex.{name}.indptr"] = I.indptr.astype(np.int64, copy=False)
        arrs[f"lex.{name}.indices"] = I.indices.astype(np.int32, copy=False)
        arrs[f"lex.{name}.data"] = I.data.astype(np.float32, copy=False)
        arrs[f"lex.{name}.df"] = f.df.astype(np.int64, copy=False)
        if ctx.distinct is not None:           # weights not from df and the chunk count: stored as they are
            arrs[f"lex.{name}.weight"] = np.asarray(f.weight, np.float32)
        arrs[f"lex.{name}.vocab"] = _utf8(f.attributes)
    return arrs


def lexical_meta(ctx: LexicalContext) -> dict:
    """The JSON-able description stored beside :func:`lexical_arrays` (read back by :func:`lexical_from_arrays`)."""
    return {"families": [{"name": name, "chunks": int(f.incidence.shape[0]), "attributes": int(f.incidence.shape[1]),
                          "nnz": int(f.incidence.nnz), "max_n": int(f.max_n), "stemmer": f.stemmer,
                          "linking_attributes": int((f.df >= 2).sum())} for name, f in ctx.families.items()],
            "distinct_chunks": ctx.distinct}


def lexical_from_arrays(arrs: dict, meta: dict) -> LexicalContext:
    """The inverse of :func:`lexical_arrays`."""
    fams = {}
    for m in meta["families"]:
        name, n, M = m["name"], int(m["chunks"]), int(m["attributes"])
        raw = bytes(np.asarray(arrs[f"lex.{name}.vocab"], dtype=np.uint8))
        names = raw.decode("utf-8").split("\n") if M else []
        if len(names) != M:
            raise ValueError(f"lexical family {name!r}: {len(names)} vocabulary entries for {M} attributes")
        I = sp.csr_matrix((arrs[f"lex.{name}.data"], arrs[f"lex.{name}.indices"], arrs[f"lex.{name}.indptr"]),
                          shape=(n, M))
        df = np.asarray(arrs[f"lex.{name}.df"], np.int64)
        w = arrs.get(f"lex.{name}.weight")
        w = idf_weight(df, n).astype(np.float32) if w is None else np.asarray(w, np.float32)
        if w.shape != (M,):
            raise ValueError(f"lexical family {name!r}: {w.shape[0]} weights for {M} attributes")
        fams[name] = Family(name=name, vocab=dict(zip(names, range(M))), df=df, weight=w, incidence=I,
                            max_n=int(m["max_n"]), stemmer=m.get("stemmer") or None)
    return LexicalContext(fams, distinct=meta.get("distinct_chunks"))


def lexical_stats(ctx: LexicalContext | None) -> list[dict]:
    """Per family: attributes, non-zeros, linking attributes (df >= 2), density, bytes in memory."""
    out = []
    for name, f in (ctx.families.items() if ctx is not None else ()):
        I = f.incidence
        out.append({"name": name, "chunks": int(I.shape[0]), "attributes": int(I.shape[1]), "nnz": int(I.nnz),
                    "linking_attributes": int((f.df >= 2).sum()),
                    "density": float(I.nnz / max(I.shape[0] * I.shape[1], 1)),
                    "bytes": int(I.data.nbytes + I.indices.nbytes + I.indptr.nbytes + f.df.nbytes)})
    return out


MEMBER_DEGREE = 0.5   # crisp support of a lexical attribute: chunks holding it with degree >= 0.5


def family_state(fam: Family) -> dict:
    return {"weight": fam.weight.astype(np.float32), "df": fam.df.astype(np.int64),
            "max_n": np.asarray([fam.max_n], dtype=np.int64)}


def family_from_arrays(name: str, names, matrix, state: dict | None = None) -> Family:
    """A :class:`Family` from stored pieces (attribute names, CSR incidence, optional state)."""
    I = sp.csr_matrix(matrix, dtype=np.float32)
    vocab = {str(a): j for j, a in enumerate(names)}
    n = I.shape[0]
    if state and "df" in state:
        df = np.asarray(state["df"], dtype=np.int64)
    else:
        df = np.diff(I.tocsc().indptr).astype(np.int64)
    w = np.asarray(state["weight"], np.float32) if state and "weight" in state else idf_weight(df, n).astype(np.float32)
    max_n = int(np.asarray(state["max_n"]).ravel()[0]) if state and "max_n" in state else \
        max([len(a.split()) for a in vocab] + [1])
    return Family(name=name, vocab=vocab, df=df, weight=w, incidence=I, max_n=max_n)

