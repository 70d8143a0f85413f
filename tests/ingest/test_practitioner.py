"""What a RAG practitioner meets in the first hour: a format whose reader cannot be imported skips
its files with one warning; ids relative to the index's source folder; page/section filters over
a chunk's whole range; unknown filter keys; JSON Lines from `query --stream --json`; LangChain's
search_kwargs; the inspect picture's chunk links."""
from __future__ import annotations

import json
import threading
import warnings

import pytest

from contextrag import ContextRAG
from contextrag.cli import main
from contextrag.index import store
from contextrag.ingest import read_documents
from contextrag.query.filters import ChunkSelection, doc_ids_for
from contextrag.textfile import TextFileWarning

from ingest_files import HashEmbedder, tiny_config, write_docx, write_html, write_markdown, write_pdf


def _lxml_clean_missing():
    raise ImportError("lxml.html.clean module is now a separate project lxml_html_clean")


@pytest.fixture
def mixed(tmp_path, paras):
    f = tmp_path / "corpus"
    (f / "web").mkdir(parents=True)
    (f / "products").mkdir()
    write_pdf(f / "report.pdf", [paras[0]["text"], paras[1]["text"]], title="Report")
    write_html(f / "web" / "a.html", "Page A", [(paras[2]["title"], paras[2]["text"])])
    write_html(f / "web" / "b.html", "Page B", [(paras[3]["title"], paras[3]["text"])])
    write_markdown(f / "products" / "gannet.md", "Gannet", [(paras[4]["title"], paras[4]["text"])])
    write_docx(f / "memo.docx", "Memo", [(paras[5]["title"], paras[5]["text"])])
    (f / "notes.txt").write_text(paras[6]["text"])
    return f


def test_a_format_whose_reader_fails_to_import_skips_its_files_with_one_warning(mixed, monkeypatch):
    from contextrag.ingest import html
    monkeypatch.setattr(html, "_trafilatura", _lxml_clean_missing)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        got = read_documents(mixed)
    said = [str(w.message) for w in ws if issubclass(w.category, TextFileWarning)]
    assert len(said) == 1, said
    assert "web/a.html, web/b.html: skipped, reading HTML files needs the 'docs' extra: " \
           "pip install 'contextrag[docs]'" in said[0] and "lxml_html_clean" in said[0]
    assert sorted(d["id"] for d in got.docs) == ["memo.docx", "notes.txt", "products/gannet.md", "report.pdf"]
    assert [s[0] for s in got.skipped] == ["web/a.html", "web/b.html"]


def test_index_of_a_folder_with_a_broken_reader_does_not_abort(mixed, tmp_path, cfg_file, hash_embedder,
                                                               capsys, monkeypatch):
    from contextrag.ingest import html
    monkeypatch.setattr(html, "_trafilatura", _lxml_clean_missing)
    assert main(["index", str(mixed), "--out", str(tmp_path / "idx"), "--config", cfg_file]) == 0
    err = capsys.readouterr().err
    warn = [ln for ln in err.splitlines() if ln.startswith("contextrag: warning:")]
    assert len(warn) == 1 and "pip install 'contextrag[docs]'" in warn[0]
    assert sorted(store.load(tmp_path / "idx", embedder=HashEmbedder()).docs) == \
        ["memo.docx", "notes.txt", "products/gannet.md", "report.pdf"]
    # only files of the missing format: nothing readable, and the error says which extra
    assert main(["index", str(mixed / "web"), "--out", str(tmp_path / "idx2"), "--config", cfg_file]) == 2
    assert "pip install 'contextrag[docs]'" in capsys.readouterr().err


def test_add_makes_ids_relative_to_the_source_folder_and_sync_then_changes_nothing(
        mixed, tmp_path, paras, cfg_file, hash_embedder, capsys, monkeypatch):
    idx = tmp_path / "idx"
    monkeypatch.chdir(tmp_path)
    assert main(["index", str(mixed), "--out", str(idx), "--config", cfg_file, "-q"]) == 0
    assert store.load(idx, embedder=HashEmbedder()).info["source_root"] == str(mixed.resolve())
    tern = mixed / "products" / "tern.md"
    tern.write_text("# Tern\n\nThe tern is a seabird of the family Laridae, found worldwide.\n")
    capsys.readouterr()
    assert main(["add", str(idx), str(tern), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert (res["added"], res["replaced"]) == (["products/tern.md"], [])
    assert main(["sync", str(idx), "--json"]) == 0                        # the remembered folder
    rep = json.loads(capsys.readouterr().out)
    assert rep["changes"] == 0 and rep["unchanged"] == 7
    assert main(["add", str(idx), str(tern), "--root", str(mixed / "products"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["added"] == ["tern.md"]       # --root overrides
    (tmp_path / "elsewhere.txt").write_text(paras[9]["text"])
    assert main(["add", str(idx), str(tmp_path / "elsewhere.txt"), "--root", str(mixed)]) == 2
    assert "is not inside" in capsys.readouterr().err


def test_same_named_files_of_two_folders_added_concurrently_stay_two_documents(tmp_path, paras, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, p in (("fa", paras[7]), ("fb", paras[8])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.txt").write_text(p["text"])
    base = [{"id": f"d{i}", "text": p["text"]} for i, p in enumerate(paras[10:16])]
    ContextRAG.build(base, path=tmp_path / "idx", config=tiny_config(), embedder=HashEmbedder())
    results, errors = {}, []

    def add(key, paths):
        try:
            rag = ContextRAG.load(tmp_path / "idx", embedder=HashEmbedder())
            results[key] = rag.add(paths, replace=True)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    from pathlib import Path
    ts = [threading.Thread(target=add, args=(k, [Path(k) / "notes.txt"])) for k in ("fa", "fb")]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errors, errors
    assert results["fa"]["added_ids"] == ["fa/notes.txt"] and results["fb"]["added_ids"] == ["fb/notes.txt"]
    assert results["fa"]["replaced_ids"] == results["fb"]["replaced_ids"] == []
    docs = ContextRAG.load(tmp_path / "idx", embedder=HashEmbedder()).index.docs
    assert {"fa/notes.txt", "fb/notes.txt"} <= set(docs)
    # a new file added twice at once: one write adds it, the other then replaces it, and each says so
    (tmp_path / "fc").mkdir()
    (tmp_path / "fc" / "new.txt").write_text(paras[9]["text"])
    results.clear()
    ts = [threading.Thread(target=add, args=(k, [Path("fc") / "new.txt"])) for k in ("x", "y")]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errors, errors
    assert sorted((r["added_ids"], r["replaced_ids"]) for r in results.values()) == \
        [([], ["fc/new.txt"]), (["fc/new.txt"], [])]


@pytest.fixture
def located(paras):
    """One document of three pages and three sections; chunks of 60 tokens cross both kinds of border."""
    text = "\n\n".join(p["text"] for p in paras[:3])
    a = len(paras[0]["text"]) + 2
    b = a + len(paras[1]["text"]) + 2
    docs = [{"id": "paged", "title": "Paged", "text": text, "metadata": {"year": 2020},
             "segments": {"page": [[0, 1], [a, 2], [b, 3]],
                          "section": [[0, "Introduction"], [a, "Background"], [b, "Results"]]}},
            {"id": "plain", "title": "Plain", "text": paras[3]["text"], "metadata": {"year": 2021}}]
    cfg = tiny_config()
    import dataclasses
    cfg = dataclasses.replace(cfg, chunk_tokens=400, chunk_overlap=10)   # one chunk spans all three pages
    return ContextRAG.build(docs, config=cfg, embedder=HashEmbedder())


def test_page_and_section_filters_match_a_chunk_over_its_whole_range(located):
    ix = located.index
    spans = [c for c, d in enumerate(ix.chunk_doc_ids) if d == "paged"]
    assert spans
    sel = doc_ids_for(located, None, {"page": 2})
    assert isinstance(sel, ChunkSelection) and sel.chunks[spans].all()     # pages 1..3 cover page 2
    assert not doc_ids_for(located, None, {"page": 5}).chunks.any()
    assert doc_ids_for(located, None, {"page": {"$gte": 3}}).chunks[spans[-1]]
    assert not doc_ids_for(located, None, {"page": {"$ne": 2}}).chunks[spans].any()
    sec = doc_ids_for(located, None, {"section": "Background"})
    assert sec.chunks[spans].all() and list(sec) == ["paged"]              # first section: Introduction
    hit = next(h for h in located.retrieve("film", k=20, filter={"section": "Results"}) if h.doc_id == "paged")
    assert hit.metadata["sections"] == ["Introduction", "Background", "Results"]
    assert hit.metadata["page"] == 1 and hit.metadata["page_end"] == 3


def test_unknown_filter_keys_are_an_error_listing_the_known_ones(located):
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['yr'\].*'page'.*'year'"):
        doc_ids_for(located, None, {"yr": 2020})
    with pytest.raises(ValueError, match=r"top-level operators are not supported"):
        located.retrieve("film", filter={"$or": [{"year": 2020}]})
    assert sorted(doc_ids_for(located, None, {"year": 2021})) == ["plain"]


def test_query_stream_json_is_json_lines(tmp_path, paras, cfg_file, hash_embedder, capsys):
    f = tmp_path / "c"
    f.mkdir()
    for i, p in enumerate(paras[:6]):
        (f / f"p{i}.txt").write_text(p["text"])
    assert main(["index", str(f), "--out", str(tmp_path / "idx"), "--config", cfg_file, "-q"]) == 0
    for extra in (["--llm", "none", "--style", "extractive"], ["--no-llm"]):
        capsys.readouterr()
        assert main(["query", str(tmp_path / "idx"), paras[2]["title"], "--stream", "--json", *extra]) == 0
        lines = capsys.readouterr().out.splitlines()
        objs = [json.loads(ln) for ln in lines]                       # every line one JSON object
        assert objs and "hits" in objs[-1]


def test_langchain_search_kwargs(tmp_path, paras):
    pytest.importorskip("langchain_core")
    from contextrag.integrations.langchain import ContextRAGRetriever
    rag = ContextRAG.build([{"id": f"d{i}", "text": p["text"]} for i, p in enumerate(paras[:10])],
                           config=tiny_config(), embedder=HashEmbedder())
    assert len(ContextRAGRetriever(index=rag, search_kwargs={"k": 2}).invoke("film")) == 2
    with pytest.raises(ValueError, match=r"search_kwargs: unknown key\(s\) \['fetch_k'\]"):
        ContextRAGRetriever(index=rag, search_kwargs={"fetch_k": 20})
    with pytest.raises(ValueError, match="contradicts k=3"):
        ContextRAGRetriever(index=rag, k=3, search_kwargs={"k": 2})


def test_inspect_picture_draws_labelled_chunk_links(mixed, tmp_path, hash_embedder):
    pytest.importorskip("matplotlib")
    from contextrag.index.picture import chunk_links, draw
    rag = ContextRAG.build(mixed, config=tiny_config(), embedder=HashEmbedder())
    sample = chunk_links(rag.index)
    assert sample["links"] and sample["linking"] >= len(sample["links"])
    for label, family, members in sample["links"]:
        assert label and family in ("title", "term", "phrase")
        assert len({rag.index.chunk_doc_ids[c] for c in members}) >= 2        # a cross-document link
    out = draw(rag.index, tmp_path / "g.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size < 300_000
