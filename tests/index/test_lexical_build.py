"""The map/reduce build of the lexical families and the C-level BM25 tokeniser equal the reference
builders (per-chunk automaton, bm25s's own tokeniser) exactly, on real HotpotQA and MultiHop-RAG text."""
from __future__ import annotations

import json

import numpy as np
import pytest

from contextrag.index.lexical import families as lexical, tokens as lexical_map

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
    ultra = data_dir() / "ultradomain_mix_contexts.json"
    if ultra.exists():                                    # long documents: a few cut into chunks
        for k, doc in enumerate(json.loads(ultra.read_text())[:5]):
            for s in range(0, min(len(doc), 12000), 3000):
                titles.append(f"Document {k}")
                texts.append(doc[s:s + 3000])
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


needs_native = pytest.mark.skipif(lexical_map.native_extension() is None, reason="contextrag._C is not built")

# What the native tokeniser must get right beyond plain ASCII words: texts of stopwords only, 1-char
# tokens, digits and underscores, U+0130 and U+03A3 (str.lower() special cases), astral letters and
# digits, combining marks, curly quotes and dashes, Latin-1 and UCS-2 texts, and titles that are names.
EDGE = ["the of and a an", "a b c d e 1 2 3 _ x", "__init__ x_1 1_000 42nd 3.14 007", "İİ ıI İstanbul'un",
        "ΣΑΣ ΌΣΟΣ Σ σΣ ςΣς", "𝐀𝐁𝐂 𝟏𝟐 😀😀 𐐀𐐨 ab😀cd", "e\u0301te ﬁne Ａｂｃ ǅǆǄ", "“Quoted” — dash – ‘x’",
        "Caf\xe9 na\xefve \xc6SIR \xdf", "ΑΒΓ δεζ ΣΊΣΥΦΟΣ", "Straße Ǆemal zzz", "title mention: Arthur's Magazine"]


@needs_native
def test_native_tokens_equal_python_regex_on_every_code_point():
    import re
    word = re.compile(r"\w+")
    m = lexical_map.Matcher(None, 1, native=True).native
    every = [chr(c) for c in range(0x110000)]
    for text in (" ".join(every), "x" + "Y ".join(every), "".join(every[:0x3000])):
        assert m.tokens(text) == word.findall(text.lower())
    for text in ODD + EDGE:
        assert m.tokens(text) == word.findall(text.lower())


@needs_native
@pytest.mark.parametrize("block", [lexical.BLOCK, 37])
def test_native_map_block_equals_python_map(real, block):
    titles, texts = real
    extra = EDGE + ["", "   "]
    titles, texts = titles + (["", "The"] + EDGE)[:len(extra)], texts + extra
    names, own_col, _ = lexical.title_columns(titles)
    py_m = lexical_map.Matcher(names, lexical.TITLE_MAX_TOKENS, native=False)
    c_m = lexical_map.Matcher(names, lexical.TITLE_MAX_TOKENS, native=True)
    assert c_m.native is not None and py_m.native is None
    for want in (("term", "title"), ("term",), ("title",)):
        for s in range(0, len(texts), block):
            job = (s, titles[s:s + block], texts[s:s + block], own_col[s:s + block], want)
            a, b = lexical_map.map_block(*job, matcher=py_m), lexical_map.map_block(*job, matcher=c_m)
            assert list(a) == list(b) == list(want)
            if "term" in want:
                assert a["term"][0] == b["term"][0]            # the block's attributes, same order
            for name in want:
                for x, y in zip(a[name][-2:], b[name][-2:]):
                    assert x.dtype == y.dtype == np.int32
                    np.testing.assert_array_equal(x, y)


@needs_native
def test_native_map_bad_input():
    m = lexical_map.Matcher(["alpha"], 3, native=True).native
    with pytest.raises(TypeError, match="texts must hold str"):
        m.map_block(["t"], [b"bytes"], None, 0, True, False)
    with pytest.raises(ValueError, match="own_cols must be"):
        m.map_block(["t", "u"], ["x", "y"], np.zeros(3, np.int64), 0, False, True)
    with pytest.raises(ValueError, match="own_cols holds a column"):
        m.map_block(["t"], ["x"], np.array([5]), 0, False, True)
    with pytest.raises(ValueError, match="same length"):
        m.map_block(["t"], ["x", "y"], None, 0, True, False)
    with pytest.raises(ValueError, match="no title names"):
        lexical_map.Matcher(None, 1, native=True).native.map_block([""], ["x"], None, 0, False, True)


@pytest.mark.parametrize("kw", [{"workers": 1}, {"workers": 1, "block": 97}, {"workers": 2, "block": 211},
                                {"workers": 1, "native": False}, {"workers": 2, "block": 211, "native": False},
                                {"workers": 2, "block": 500, "mp_context": "fork"}])
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
    for block, native in ((16384, False), (13, False), (16384, None)):
        if native is None and lexical_map.native_extension() is None:
            continue
        got = lexical_map.bm25_tokenize(st, block=block, native=native)
        assert list(got.vocab.items()) == list(ref.vocab.items())   # same ids, same order
        assert got.ids == ref.ids
    for q in texts[:200] + ODD:
        assert lexical_map.query_tokens(q) == bm25s.tokenize([q], stopwords="en", return_ids=False,
                                                              show_progress=False)[0]


@needs_native
def test_native_bm25_tokenize_equals_bm25s_on_edge_cases():
    import bm25s
    texts = ODD + EDGE + ["", "the", "a b", "İİ ΣΣ"]
    ref = bm25s.tokenize(texts, stopwords="en", show_progress=False)
    got = lexical_map.bm25_tokenize(texts, native=True)
    assert list(got.vocab.items()) == list(ref.vocab.items()) and got.ids == ref.ids
    assert lexical_map.bm25_tokenize([], native=True).ids == []


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
    assert lexical.map_threads(None, 1) == 1           # native map: one thread per CPU, at most one per block
    assert lexical.map_threads(None, 64) == min(__import__("os").cpu_count() or 1, 64)
    assert lexical.map_threads(3, 2) == 2
    with pytest.raises(ValueError, match="workers must be an int >= 1"):
        lexical.map_threads(0, 4)
