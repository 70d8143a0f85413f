"""The retrieval features the integrations expose: metadata filters (mapped onto the doc_id mask),
the hit's title / metadata / span, and the explanation of why a passage came."""
from __future__ import annotations

import pytest

from integration_corpus import ANSWER, DOCS, QUESTION

from contextrag.query.filters import doc_ids_for, matches

META = {i: m for i, _, _, m in DOCS}


@pytest.mark.parametrize("flt, expected", [
    ({"topic": "company"}, {"quillon", "halvorsen"}),
    ({"topic": ["company", "person"]}, {"quillon", "halvorsen", "veldt", "pettersen"}),
    ({"year": {"$gte": 2019}}, {"zorblat", "brindle", "hinge"}),
    ({"year": {"$gt": 1900, "$lt": 2000}, "lang": "en"}, {"quillon", "veldt", "pettersen"}),
    ({"lang": {"$ne": "en"}}, {"glass", "boats"}),
    ({"topic": {"$nin": ["place", "product", "person", "company"]}}, {"kettle", "boats"}),
    ({"topic": {"$in": ["event"]}}, {"boats"}),
])
def test_metadata_filter_selects_documents(rag, flt, expected):
    assert set(doc_ids_for(rag, None, flt)) == expected
    hits = rag.retrieve("company phone town", k=50, filter=flt)
    assert {h.doc_id for h in hits if h.kind == "chunk"} <= expected
    if expected:
        assert {h.doc_id for h in hits if h.kind == "chunk"} == expected   # k=50 covers every chunk
    assert all(set(h.doc_ids) <= expected for h in hits)                    # virtual items too


@pytest.mark.parametrize("flt", [{"missing_key": {"$ne": 1}}, {"missing_key": 1}, {"$or": [{"topic": "company"}]}])
def test_a_key_no_document_has_is_an_error_listing_the_known_ones(rag, flt):
    with pytest.raises(ValueError, match=r"unknown key\(s\).*'lang'.*'topic'"):
        rag.retrieve("company", k=5, filter=flt)


def test_filter_and_doc_ids_intersect_and_callable(rag):
    got = doc_ids_for(rag, ["quillon", "veldt", "zorblat"], {"topic": "company"})
    assert got == ["quillon"]
    hits = rag.retrieve(QUESTION, k=5, filter=lambda d, m: m.get("year", 0) < 1990)
    assert hits and all(META[h.doc_id]["year"] < 1990 for h in hits if h.doc_id)
    assert doc_ids_for(rag, ["a"], None) == ["a"] and doc_ids_for(rag, None, {}) is None
    assert rag.retrieve(QUESTION, k=5, filter={"topic": "nothing"}) == []


@pytest.mark.parametrize("bad, err", [
    ({"year": {"$regex": "x"}}, ValueError), ({"year": {}}, ValueError), ("topic=company", TypeError),
    ({"year": {"$in": 2019}}, TypeError), ({3: "x"}, TypeError),
])
def test_bad_filters_are_rejected(rag, bad, err):
    with pytest.raises(err, match="filter"):
        rag.retrieve(QUESTION, k=3, filter=bad)


def test_incomparable_values_do_not_match():
    assert not matches({"year": {"$gt": 5}}, "d", {"year": "old"})
    assert matches({"year": {"$lte": 5}}, "d", {"year": 5})


def test_hits_carry_title_metadata_and_span(rag):
    hits = rag.retrieve(QUESTION, k=12)
    chunks = [h for h in hits if h.kind == "chunk"]
    assert chunks
    for h in chunks:
        doc = dict((d, (t, x)) for d, t, x, _ in DOCS)[h.doc_id]
        assert h.title == doc[0]
        assert h.metadata == META[h.doc_id]
        a, b = h.span
        assert doc[1][a:b] == h.text            # the span locates the chunk in its document
        d = h.to_dict()
        assert d["title"] == doc[0] and d["span"] == [a, b] and d["metadata"] == META[h.doc_id]
    for h in hits:
        if h.kind != "chunk":
            assert h.span is None and h.title == "" and h.metadata == {}


def test_explain_reports_the_path_that_scored_the_bridge_passage(rag):
    hits = rag.retrieve(QUESTION, k=6, explain=True)
    ids = [h.doc_id for h in hits]
    assert "quillon" in ids, ids
    by = {h.doc_id: h for h in hits if h.doc_id}
    q = by["quillon"].explain
    # the founder's passage shares only the company with the best (seed) passage about the phone
    assert by["zorblat"].explain["seed"]
    assert q["via"] in ("seed", "question")
    assert "quillon" in q["attribute"]["name"]
    for h in hits:                              # the reported path gives the hop that was scored
        assert h.explain["hop"] == pytest.approx(h.parts.get("spread", 0.0), abs=1e-5)
        assert 0.0 <= h.explain["relevance"] <= 1.0
    from contextrag.query import neighbourhood
    g = neighbourhood(hits)
    kinds = {n["id"]: n["kind"] for n in g["nodes"]}
    assert kinds["q"] == "question" and "attribute" in kinds.values() and "seed" in kinds.values()
    hop_targets = {e["target"] for e in g["edges"] if e["label"] == "hop"}
    assert "item:" + by["quillon"].id in hop_targets
    assert all(e["source"] in kinds and e["target"] in kinds for e in g["edges"])


def test_explain_without_spreading_and_on_answer_hits(rag, scripted):
    from contextrag import query
    hits = rag.retrieve(QUESTION, k=4, explain=True, w_spread=0.0)
    assert all(h.explain["via"] is None and h.explain["hop"] == 0.0 for h in hits)
    ans = rag.answer(QUESTION, llm=scripted, k=6)
    assert ans.text == ANSWER
    query.explain(rag.index, QUESTION, ans.hits)
    assert all(h.explain is not None for h in ans.hits)
    with pytest.raises(ValueError, match="not in this index"):
        from contextrag.query.hybrid import Hit
        query.explain(rag.index, QUESTION, [Hit("nope", None, "chunk", "x", 1.0)])
