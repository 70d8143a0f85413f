"""Metadata in, metadata out through the Python API: filters (equality, $in, ranges, title, page and
section) map onto the item mask; documents from paths; upserts; sync_folder; concurrent summaries."""
from __future__ import annotations

import dataclasses
import logging
import re
import warnings

import numpy as np
import pytest

from contextrag import ContextRAG
from contextrag.llm.scripted import ScriptedClient
from contextrag.query.filters import ChunkSelection, doc_ids_for, parse_filter

from ingest_files import HashEmbedder, tiny_config, write_markdown, write_pdf


@pytest.fixture
def docs(paras):
    """12 documents with a year, a kind, and (for every third) pages."""
    out = []
    for i, p in enumerate(paras[:12]):
        d = {"id": f"d{i}", "title": p["title"], "text": p["text"],
             "metadata": {"year": 2015 + i, "kind": ("memo", "report", "note")[i % 3]}}
        if i % 3 == 0:
            cut = len(p["text"]) // 2
            d["segments"] = {"page": [[0, 1], [cut, 2]]}
        out.append(d)
    return out


@pytest.fixture
def rag(docs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return ContextRAG.build(docs, config=tiny_config(), embedder=HashEmbedder())


def _docs_of(hits):
    return {d for h in hits for d in h.doc_ids}


def test_filters_equality_in_ranges_and_title(rag, docs):
    meta = {d["id"]: d["metadata"] for d in docs}
    q = "film album football university"
    cases = [({"kind": "memo"}, lambda m, t: m["kind"] == "memo"),
             ({"kind": {"$in": ["memo", "note"]}}, lambda m, t: m["kind"] in ("memo", "note")),
             ({"kind": ["report"]}, lambda m, t: m["kind"] == "report"),
             ({"year": {"$gte": 2020}}, lambda m, t: m["year"] >= 2020),
             ({"year": {"$gt": 2017, "$lte": 2021}, "kind": {"$ne": "note"}},
              lambda m, t: 2017 < m["year"] <= 2021 and m["kind"] != "note"),
             ({"title": docs[4]["title"]}, lambda m, t: t == docs[4]["title"])]
    titles = {d["id"]: d["title"] for d in docs}
    for flt, want in cases:
        allowed = {d for d in meta if want(meta[d], titles[d])}
        assert set(doc_ids_for(rag, None, flt)) == allowed, flt
        hits = rag.retrieve(q, k=50, filter=flt)
        assert _docs_of(hits) <= allowed, flt
        if allowed:
            assert hits, flt
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['missing'\]"):   # a misspelt key says so
        doc_ids_for(rag, None, {"missing": {"$nin": [1]}})
    both = rag.retrieve(q, k=50, filter={"year": {"$gte": 2020}}, doc_ids=["d6", "d0"])
    assert _docs_of(both) == {"d6"}


def test_page_filter_is_per_chunk_and_maps_onto_the_item_mask(rag, docs):
    ix = rag.index
    sel = doc_ids_for(rag, None, {"page": 2})
    assert isinstance(sel, ChunkSelection)
    spans = ix.chunk_spans
    for c, d in enumerate(ix.chunk_doc_ids):
        segs = ix.docs[d].get("segments")
        want = bool(segs) and int(spans[c][1]) > segs["page"][1][0]   # the chunk reaches page 2
        assert sel.chunks[c] == want
    mask = sel.item_mask_for(ix)
    for i in range(ix.n_items):
        src = ix.item_sources[i].indices
        assert mask[i] == (len(src) > 0 and bool(sel.chunks[src].all()))
    hits = rag.retrieve("film album football", k=50, filter={"page": 2, "kind": "memo"})
    assert hits and all(h.metadata["page_end"] == 2 for h in hits if h.kind == "chunk")
    assert _docs_of(hits) <= {"d0", "d3", "d6", "d9"}
    other = ContextRAG.build(docs[:5], config=tiny_config(), embedder=HashEmbedder())
    with pytest.raises(ValueError, match="another index"):
        other.retrieve("a", filter=None, doc_ids=sel)


def test_parse_filter_errors():
    assert parse_filter('{"year": {"$gte": 2020}}') == {"year": {"$gte": 2020}}
    with pytest.raises(ValueError, match="--filter is not valid JSON"):
        parse_filter("{year: 1}", "--filter")
    with pytest.raises(ValueError, match="JSON object"):
        parse_filter("[1]")
    with pytest.raises(ValueError, match="operators"):
        parse_filter('{"year": {"$between": [1, 2]}}')


def test_build_from_paths_add_with_replace_and_sync_folder(tmp_path, paras):
    f = tmp_path / "f"
    f.mkdir()
    write_pdf(f / "a.pdf", [paras[0]["text"], paras[1]["text"]], title="A")
    write_markdown(f / "b.md", "B", [(paras[2]["title"], paras[2]["text"])])
    rag = ContextRAG.build(f, path=tmp_path / "idx", config=tiny_config(), embedder=HashEmbedder())
    assert sorted(rag.index.docs) == ["a.pdf", "b.md"]
    assert rag.index.docs["a.pdf"]["segments"]["page"][1][1] == 2
    hit = next(h for h in rag.retrieve(paras[1]["text"][:60], k=20) if h.doc_id == "a.pdf")
    assert hit.metadata["page_end"] == 2 and hit.title == "A"
    reloaded = ContextRAG.load(tmp_path / "idx", embedder=HashEmbedder())
    assert reloaded.index.docs["a.pdf"]["segments"] == rag.index.docs["a.pdf"]["segments"]

    (tmp_path / "c.txt").write_text(paras[3]["text"])
    with pytest.raises(ValueError, match="replace=True"):
        rag.add([f / "b.md"])
    rag.add([f / "b.md", tmp_path / "c.txt"], replace=True)
    assert sorted(rag.index.docs) == ["a.pdf", "b.md", "c.txt"]
    with pytest.raises(TypeError, match="mixes paths and documents"):
        rag.add([tmp_path / "c.txt", "some text"])

    # sync: c.txt is not from this folder's listing but is a file document: deleted; b.md unchanged
    write_pdf(f / "a.pdf", [paras[4]["text"]], title="A2")
    rep = rag.sync_folder(f)
    assert (rep["added"], rep["changed"], rep["deleted"], rep["unchanged"], rep["written"]) == \
        ([], ["a.pdf"], ["c.txt"], 1, True)
    assert rag.index.docs["a.pdf"]["title"] == "A2" and sorted(rag.index.docs) == ["a.pdf", "b.md"]
    again = rag.sync_folder(f)
    assert (again["added"], again["changed"], again["deleted"], again["written"]) == ([], [], [], False)


def test_summaries_run_concurrently_within_the_clients_limit(docs):
    def script(messages):
        first = re.search(r"\[1\] (.*)", messages[-1]["content"]).group(1)
        return "About: " + " ".join(first.split()[:6])
    llm = ScriptedClient(script, delay=0.05)
    llm.max_concurrency = 3
    cfg = dataclasses.replace(tiny_config(), n_summaries=6)
    rag = ContextRAG.build(docs, config=cfg, llm=llm, embedder=HashEmbedder())
    ix = rag.index
    summaries = np.flatnonzero(ix.item_kinds == 1)
    assert len(summaries) == llm.calls >= 2
    assert 2 <= llm.max_in_flight <= 3
    for i in summaries:   # results kept in order: each summary's words open one of its own source chunks
        words = ix.item_texts[i].removeprefix("About: ")
        assert any(" ".join(f"{ix.chunk_titles[c]}: {ix.chunk_texts[c]}".split()[:6]) == words
                   for c in ix.item_sources[i].indices)


def test_default_build_without_llm_does_not_warn_about_summaries(docs, caplog):
    with warnings.catch_warnings(record=True) as ws, caplog.at_level(logging.INFO, logger="contextrag"):
        warnings.simplefilter("always")
        cfg = dataclasses.replace(tiny_config(), n_summaries=30)     # the default: summaries asked for
        rag = ContextRAG.build(docs[:6], config=cfg, embedder=HashEmbedder())
    assert rag.index.config.n_summaries > 0
    assert not [w for w in ws if "summar" in str(w.message)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "summar" in r.getMessage()]
    assert "no LLM" in rag.index.info["summaries"]
