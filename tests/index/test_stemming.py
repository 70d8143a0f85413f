"""Config.stemmer: BM25 and the "term" family over Snowball stems, queries stemmed alike."""
from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("Stemmer")

from contextrag.config import Config  # noqa: E402
from contextrag.index.lexical import families as lexical, tokens as lexical_map  # noqa: E402

from shared_data import data_dir  # noqa: E402

EDGE = ["Reports reporting reported REPORT", "the of and a an", "İstanbul'un ΣΑΣ Straße ﬁne", "", "studies studied"]


@pytest.fixture(scope="module")
def news():
    path = data_dir() / "multihoprag_small_corpus.json"
    texts = [p for a in json.loads(path.read_text())[:15] for p in a["body"].split("\n\n")[:4]] if path.exists() else []
    return texts + EDGE


def _strings(tok):
    inv = {j: t for t, j in tok.vocab.items()}
    return [[inv[i] for i in ids] for ids in tok.ids]


def test_stemmed_tokens_equal_bm25s_with_pystemmer(news):
    import bm25s
    import Stemmer
    ref = bm25s.tokenize(news, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)
    for native in (False, None):
        if native is None and lexical_map.native_extension() is None:
            continue
        got = lexical_map.bm25_tokenize(news, native=native, stemmer="english")
        assert _strings(got) == _strings(ref)                 # token for token
        assert sorted(got.vocab.values()) == list(range(len(got.vocab)))
    for q in news[:40]:
        assert lexical_map.query_tokens(q, "english") == bm25s.tokenize(
            [q], stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False)[0]


def test_inflections_match():
    assert lexical_map.stem_words(["report", "reports", "reporting"], "english") == ["report"] * 3
    assert lexical_map.stem_words(["reports"], None) == ["reports"]   # no stemmer: words as they are
    stems, ids = lexical_map.stem_ids(["reports", "x", "report"], np.array([0, 1, 2, 0]), "english")
    assert stems == ["report", "x"] and ids.tolist() == [0, 1, 0, 0]


def test_term_family_matches_an_inflected_query():
    titles = ["A", "B", "C"]
    texts = ["The annual reports of the bank.", "A river flows.", "Mountains rise."]
    plain = lexical.lexical_families(titles, texts, ["term"])
    stemmed = lexical.lexical_families(titles, texts, ["term"], stemmer="english")
    fam, fam0 = stemmed.families["term"], plain.families["term"]
    assert fam.stemmer == "english" and fam0.stemmer is None
    assert "report" in fam.vocab and "reports" not in fam.vocab
    cols, _ = fam.query_columns("Which report did the bank publish?")
    assert fam.vocab["report"] in cols.tolist()
    cols0, _ = fam0.query_columns("Which report did the bank publish?")
    assert "reports" in fam0.vocab and fam0.vocab["reports"] not in cols0.tolist()
    # stems of stopwords are not terms ("including" is a stopword, "includ" its stem)
    t2 = lexical.lexical_families(["D"], ["including rivers"], ["term"], stemmer="english").families["term"]
    assert "includ" not in t2.vocab and "river" in t2.vocab


def test_stemmer_survives_save_and_load():
    ctx = lexical.lexical_families(["A", "B"], ["reports here", "other reports"], ["title", "term"], stemmer="english")
    back = lexical.lexical_from_arrays(lexical.lexical_arrays(ctx), json.loads(json.dumps(lexical.lexical_meta(ctx))))
    assert back.families["term"].stemmer == "english" and back.families["title"].stemmer is None


def test_index_stems_bm25_and_the_term_family(tmp_path, embedder):
    from contextrag import ContextRAG
    docs = [{"id": "a", "title": "Bank", "text": "The bank published several reports on lending."},
            {"id": "b", "title": "River", "text": "A river flows through the valley."},
            {"id": "c", "title": "Hill", "text": "Hills rise above the plain."}]
    for stem, expect in (("english", True), (None, False)):
        cfg = Config(stemmer=stem, rq_sizes=(2,), n_join=0, n_meet=0, n_summaries=0, seed=0)
        ContextRAG.build(docs, path=tmp_path / f"ix_{stem}", config=cfg, embedder=embedder)
        ix = ContextRAG.load(tmp_path / f"ix_{stem}", embedder=embedder).index
        assert ix.config.stemmer == stem
        assert (ix.bm25_scores("report")[0] > 0) == expect    # "report" finds "reports" through its stem
        assert ix.lexical.families["term"].stemmer == stem
        assert ("report" in ix.lexical.families["term"].vocab) == expect


def test_an_index_saved_without_the_field_is_unstemmed():
    from contextrag.index.store import _config_dict
    d = Config().to_dict()
    del d["stemmer"]
    assert Config.from_dict(_config_dict(d)).stemmer is None


def test_stemmer_is_validated():
    with pytest.raises(ValueError, match="stemmer"):
        Config(stemmer="")
    with pytest.raises(ValueError, match="Snowball"):
        lexical_map.stem_words(["x"], "klingon")


def test_stemmed_map_family_equals_the_stemmed_tokens(news):
    """The map's word family with its vocabulary stemmed (what the Ray shards and worker processes
    build) equals the family over stemmed BM25 tokens: same columns in the same order, same degrees."""
    from contextrag.index.lexical.families import lexical_families, term_family_from_tokens
    from contextrag.index.lexical.tokens import bm25_tokenize
    texts = list(news)
    titles = [("Reported studies", "", "The Having")[i % 3] for i in range(len(texts))]
    tok = bm25_tokenize([f"{t}\n{x}" if t else x for t, x in zip(titles, texts)], stemmer="english")
    want = term_family_from_tokens(tok.ids, tok.vocab, len(texts), stemmer="english")
    got = lexical_families(titles, texts, ["term"], stemmer="english", block=7).families["term"]
    assert got.attributes == want.attributes and got.stemmer == "english"
    np.testing.assert_array_equal(got.df, want.df)
    assert (got.incidence != want.incidence).nnz == 0
