"""Lexical attribute extraction on real HotpotQA text."""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from contextrag.index.lexical.families import (LexicalContext, entity_phrases, idf_weight, normalise_title,
                                      term_family, terms, title_family)

from shared_data import hotpot_file


@pytest.fixture(scope="module")
def corpus():
    data = json.loads(hotpot_file().read_text())[:20]
    seen = {}
    for q in data:
        for t, sents in q["context"]:
            seen.setdefault(t, "".join(sents))
    return data, list(seen), [seen[t] for t in seen]


def test_normalise_title_drops_disambiguation():
    assert normalise_title("Black Book (film)") == "black book"
    assert normalise_title("Neil Smith (writer)") == "neil smith"
    assert normalise_title("Moscow State University") == "moscow state university"


def test_entity_phrases_on_real_paragraph(corpus):
    _, titles, texts = corpus
    i = titles.index("Sergei Aleksandrovich Tokarev")
    ph = entity_phrases(texts[i])
    assert "moscow state university" in ph          # the bridge entity of question 1
    assert "sergei aleksandrovich tokarev" in ph
    assert any(p.isdigit() and len(p) == 4 for p in ph)   # years
    assert "the" not in ph and "he" not in ph


def test_terms_drop_stopwords():
    t = terms("In what year was the university where he was a professor founded?")
    assert "university" in t and "professor" in t and "founded" in t
    assert not {"in", "what", "was", "the", "where", "he", "a"} & t


def test_title_family_incidence(corpus):
    _, titles, texts = corpus
    fam = title_family(titles, texts)
    I = fam.incidence
    assert sp.isspmatrix_csr(I) and I.shape == (len(titles), len(fam.vocab))
    assert I.data.min() > 0 and I.data.max() <= 1
    i = titles.index("Sergei Aleksandrovich Tokarev")
    j_own = fam.vocab["sergei aleksandrovich tokarev"]
    j_msu = fam.vocab["moscow state university"]
    assert I[i, j_own] == 1.0                        # its own title: degree 1
    assert 0 < I[i, j_msu] < 1                       # a mention: the attribute's normalised IDF
    assert I[titles.index("Moscow State University"), j_msu] == 1.0
    assert I[i, j_msu] == pytest.approx(fam.weight[j_msu])


def test_query_activation_finds_mentioned_title(corpus):
    data, titles, texts = corpus
    ctx = LexicalContext.build(titles, texts, families=("title", "term"))
    mu = ctx.query_activation(data[0]["question"])
    names = ctx.families["title"].attributes + ctx.families["term"].attributes
    active = {names[j] for j in mu.indices}
    assert "sergei aleksandrovich tokarev" in active
    assert "university" in active and "what" not in active
    assert mu.shape[1] == ctx.incidence().shape[1]


def test_idf_weight_bounds():
    w = idf_weight(np.array([1, 10, 100]), 100)
    assert w[0] == 1.0 and w[2] == 0.0 and 0 < w[1] < 1


def test_family_weights_scale_and_drop(corpus):
    _, titles, texts = corpus
    ctx = LexicalContext.build(titles, texts, families=("title", "term"))
    full = ctx.incidence({"title": 1.0, "term": 1.0})
    half = ctx.incidence({"title": 0.5, "term": 0.0})
    assert half.shape[1] == len(ctx.families["title"].vocab)
    assert np.allclose(half.data, 0.5 * ctx.families["title"].incidence.data)
    assert full.shape[1] == half.shape[1] + len(ctx.families["term"].vocab)


def test_registered_with_the_index_context(corpus):
    from contextrag.index.context import FAMILIES, ChunkView
    _, titles, texts = corpus
    assert {"title", "term", "phrase"} <= set(FAMILIES)
    view = ChunkView(texts[:30], titles[:30], titles[:30], np.zeros(30, np.int32))
    res = FAMILIES["title"].fit(view, None, None)
    assert res.matrix.shape[0] == 30 and len(res.names) == res.matrix.shape[1]
    assert res.members.dtype == bool


def test_term_family_on_real_text(corpus):
    _, titles, texts = corpus
    fam = term_family(titles, texts)
    assert "university" in fam.vocab and "the" not in fam.vocab


def _by_name(fam):
    """{(row, attribute string): degree} of a family."""
    I = fam.incidence.tocoo()
    names = fam.attributes
    return {(int(r), names[c]): float(v) for r, c, v in zip(I.row, I.col, I.data)}


def test_title_mentions_by_automaton_equal_ngram_lookup(corpus):
    """The Aho–Corasick matcher finds exactly the title n-grams (<= 10 tokens) of each normalised text."""
    from contextrag.index.lexical.families import STOPWORDS, normalise
    _, titles, texts = corpus
    texts = texts + ["Mentions of moscow state university, and Moscow-State University twice."]
    titles = titles + ["Moscow State University"]
    fam = title_family(titles, texts)
    own = [normalise_title(t) for t in titles]
    names = {t for t in own if t and t not in STOPWORDS and len(t) > 1}
    expect = {}
    for i, (x, o) in enumerate(zip(texts, own)):
        toks = normalise(x).split()
        grams = {" ".join(toks[a:a + k]) for a in range(len(toks)) for k in range(1, 11) if a + k <= len(toks)}
        for g in grams & names:
            expect[(i, g)] = None
        if o in names:
            expect[(i, o)] = None
    got = _by_name(fam)
    assert set(got) == set(expect)
    n = len(texts)
    for (i, a), v in got.items():
        df = fam.df[fam.vocab[a]]
        want = 1.0 if a == own[i] else min(max(np.log(n / df) / np.log(n), 0.0), 1.0)
        assert v == pytest.approx(want, abs=1e-6)


def test_term_family_blocks_and_bm25_tokens_agree(corpus):
    from contextrag.index.core import bm25_tokenize_ids
    from contextrag.index.lexical.families import term_family_from_tokens
    _, titles, texts = corpus
    whole = _by_name(term_family(titles, texts))
    assert whole == _by_name(term_family(titles, texts, block=7))      # blocks of 7 chunks, one vocabulary
    ids, vocab = bm25_tokenize_ids([f"{t}\n{x}" for t, x in zip(titles, texts)] + ["an extra item, not a chunk"])
    assert whole == _by_name(term_family_from_tokens(ids, vocab, len(texts)))
    # the family is "word tokens of 2+ characters minus STOPWORDS" of title + text
    expect = {(i, t) for i, (ti, x) in enumerate(zip(titles, texts)) for t in terms(f"{ti} {x}")}
    assert set(whole) == expect
