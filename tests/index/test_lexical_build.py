"""The map/reduce build of the lexical families and the C-level BM25 tokeniser equal the reference
builders (per-chunk automaton, bm25s's own tokeniser) exactly, on real HotpotQA and MultiHop-RAG text."""
from __future__ import annotations

import json

import numpy as np
import pytest

from contextrag.index import lexical, lexical_map

from shared_data import data_dir, hotpot_file

# Unicode edge cases: dotted capital I (lower-cases to two code points), Greek final sigma, ß, a
# titlecase digraph, underscores, digits, hyphens, 1-character tokens, empty and token-less texts.
ODD = ["İstanbul ΣΑΣ ΌΣΟΣ Straße ǅemal x_y __ 12 ab-cd I a", "", "   ...   ", "Ǆ", "é É 42 Z9"]


@pytest.fixture(scope="module")
def real():
    """(titles, texts) of 1,000 HotpotQA paragraphs and the MultiHop-RAG news articles cut into
    paragraphs (several chunks per document, so titles repeat), plus the odd cases."""
    seen = {}
    for q in json.loads(hotpot_file().read_text()):
        for t, sents in q["context"]:
            seen.setdefault(t, "".join(sents))
    titles, texts = list(seen)[:1000], [seen[t] for t in list(seen)[:1000]]
    news = data_dir() / "multihoprag_small_corpus.json"
    if news.exists():
        for a in json.loads(news.read_text())[:20]:
            for para in a["body"].split("\n\n")[:6]:
                titles.append(a["title"])
                texts.append(para)
    titles += ["Straße (film)", "", "ΣΑΣ", "The", "Z9"]
    return titles, texts + ODD


def _identical(a, b):
    assert a.attributes == b.attributes                 # the same columns in the same order
    np.testing.assert_array_equal(a.df, b.df)
    np.testing.assert_array_equal(a.weight, b.weight)
    A, B = a.incidence, b.incidence
    assert A.shape == B.shape and A.dtype == B.dtype == np.float32
    for part in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(A, part), getattr(B, part))
    assert a.max_n == b.max_n


@pytest.mark.parametrize("kw", [{"workers": 1}, {"workers": 1, "block": 97}, {"workers": 2, "block": 211}])
def test_map_reduce_equals_reference_builders(real, kw):
    titles, texts = real
    ref = {"title": lexical.title_family(titles, texts), "term": lexical.term_family(titles, texts)}
    got = lexical.lexical_families(titles, texts, ["title", "term"], **kw)
    assert list(got.families) == ["title", "term"]
    for name in ref:
        _identical(ref[name], got.families[name])
    assert ref["title"].incidence.nnz > len(texts) and ref["term"].incidence.nnz > 10 * len(texts)


def test_bm25_tokenize_equals_bm25s(real):
    import bm25s
    titles, texts = real
    st = [f"{t}\n{x}" if t else x for t, x in zip(titles, texts)]
    ref = bm25s.tokenize(st, stopwords="en", show_progress=False)
    for block in (16384, 13):
        got = lexical_map.bm25_tokenize(st, block=block)
        assert list(got.vocab.items()) == list(ref.vocab.items())   # same ids, same order
        assert got.ids == ref.ids
    for q in texts[:200] + ODD:
        assert lexical_map.query_tokens(q) == bm25s.tokenize([q], stopwords="en", return_ids=False,
                                                              show_progress=False)[0]


def test_term_family_from_bm25_tokens_equals_reference(real):
    titles, texts = real
    st = [f"{t}\n{x}" if t else x for t, x in zip(titles, texts)] + ["an extra item, not a chunk: zyxwv"]
    tok = lexical_map.bm25_tokenize(st)
    for block in (lexical.BLOCK, 50):
        fam = lexical.term_family_from_tokens(tok.ids, tok.vocab, len(texts), block=block)
        _identical(lexical.term_family(titles, texts), fam)
    assert "zyxwv" not in fam.vocab                       # a token of a non-chunk item is no column


def test_factorize_and_dict_paths_agree(monkeypatch):
    lists = [["b", "a", "b"], [], ["c", "a"], ["ä", "b"]]
    got = lexical_map.first_occurrence_ids(lists, 7)
    import sys
    monkeypatch.setitem(sys.modules, "pandas", None)     # import pandas -> ImportError: the dict path
    ref = lexical_map.first_occurrence_ids(lists, 7)
    assert got[0] == ref[0] == ["b", "a", "c", "ä"]
    np.testing.assert_array_equal(got[2], ref[2])
    np.testing.assert_array_equal(ref[2], [0, 1, 0, 2, 1, 3, 0])


def test_bad_arguments():
    with pytest.raises(ValueError, match="titles has 1 entries, texts has 2"):
        lexical.lexical_families(["a"], ["x", "y"], ["term"])
    with pytest.raises(ValueError, match="unknown lexical family"):
        lexical.lexical_families(["a"], ["x"], ["nope"])
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        lexical.lexical_families(["a"], ["x"], ["term"], workers=0)
    with pytest.raises(ValueError, match="block must be an int >= 1"):
        lexical.lexical_families(["a"], ["x"], ["term"], block=0)
    empty = lexical.lexical_families([], [], ["title", "term"])
    assert [f.incidence.shape for f in empty.families.values()] == [(0, 0), (0, 0)]


def test_map_workers_rule():
    assert lexical.map_workers(None, 3) == 1          # few blocks: no process start-up
    assert lexical.map_workers(None, 4) == min(2, __import__("os").cpu_count() or 1)
    assert lexical.map_workers(5, 2) == 2              # never more processes than blocks
