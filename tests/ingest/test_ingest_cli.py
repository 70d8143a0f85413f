"""The whole flow through the CLI on a folder of real files: index (one warning for the one broken
file), query with metadata filters (JSON shows title, metadata, span), add/delete, sync twice."""
from __future__ import annotations

import json
import logging
import shutil
import sys

import pytest

from contextrag.cli import main
from contextrag.index import store

from ingest_files import HashEmbedder, encrypt_pdf, write_docx, write_html, write_markdown, write_pdf


@pytest.fixture
def folder(tmp_path, paras):
    """reports/: two PDFs (2019 and 2022), an HTML page (2021), a README, a DOCX memo, an encrypted
    PDF (the broken file), an image (ignored)."""
    f = tmp_path / "reports"
    (f / "web").mkdir(parents=True)
    write_pdf(f / "annual_2019.pdf", [paras[0]["text"], paras[1]["text"]], title="Annual Report 2019",
              created=(2019, 3, 1))
    write_pdf(f / "annual_2022.pdf", [paras[2]["text"], paras[3]["text"], paras[4]["text"]],
              title="Annual Report 2022", created=(2022, 3, 1))
    write_html(f / "web" / "news.html", "Company News", [(paras[5]["title"], paras[5]["text"]),
                                                         (paras[6]["title"], paras[6]["text"])], date="2021-07-09")
    write_markdown(f / "README.md", "Handbook", [(paras[7]["title"], paras[7]["text"]),
                                                 (paras[8]["title"], paras[8]["text"])])
    write_docx(f / "memo.docx", "Budget Memo", [(paras[9]["title"], paras[9]["text"])])
    encrypt_pdf(f / "annual_2019.pdf", f / "web" / "locked.pdf")
    (f / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    return f


def _index(folder, out, cfg_file, *extra):
    return main(["index", str(folder), "--out", str(out), "--config", cfg_file, *extra])


def _query(capsys, idx, question, *extra):
    capsys.readouterr()
    assert main(["query", str(idx), question, "--no-llm", "--json", "-k", "40", *extra]) == 0
    return json.loads(capsys.readouterr().out)["hits"]


def test_mixed_folder_indexes_with_one_warning_and_filters_by_metadata(folder, tmp_path, paras, cfg_file,
                                                                      hash_embedder, capsys):
    idx = tmp_path / "idx"
    assert _index(folder, idx, cfg_file) == 0
    cap = capsys.readouterr()
    warn = [ln for ln in cap.err.splitlines() if ln.startswith("contextrag: warning:")]
    assert warn == ["contextrag: warning: corpus: 1 of 6 files unreadable — web/locked.pdf: skipped, it is an "
                    "encrypted PDF (a password is needed)"]
    assert "contextrag: read 5 documents from 6 files; 1 skipped (unreadable, see the warnings); " \
           "1 file of other types ignored" in cap.err
    assert "skipped 1 unreadable files: web/locked.pdf" in cap.out
    ix = store.load(idx, embedder=HashEmbedder())
    assert sorted(ix.docs) == ["README.md", "annual_2019.pdf", "annual_2022.pdf", "memo.docx", "web/news.html"]
    assert ix.docs["web/news.html"]["title"] == "Company News"
    assert ix.docs["annual_2022.pdf"]["metadata"]["year"] == 2022

    # every hit carries its document's title and metadata, and a chunk span into the document's text
    hits = _query(capsys, idx, paras[3]["text"][:80])
    chunk_hits = [h for h in hits if h["kind"] == "chunk"]
    assert chunk_hits and all(h["title"] and h["metadata"]["source"] == h["doc_id"] for h in chunk_hits)
    assert all(h["span"][1] - h["span"][0] == len(h["text"]) for h in chunk_hits)
    pdf = [h for h in chunk_hits if h["doc_id"] == "annual_2022.pdf"]
    assert pdf and all(1 <= h["metadata"]["page"] <= h["metadata"]["page_end"] <= 3 for h in pdf)
    assert any(h["metadata"]["page"] == 2 for h in pdf)          # the question's paragraph is page 2
    md = [h for h in chunk_hits if h["doc_id"] == "README.md"]
    assert md and all(h["metadata"].get("section") in ("Handbook", paras[7]["title"], paras[8]["title"]) for h in md)

    # metadata filters: equality, $in, a numeric range, the title, and a page range
    for flt, allowed in [({"format": "pdf"}, {"annual_2019.pdf", "annual_2022.pdf"}),
                         ({"year": {"$gte": 2021}}, {"annual_2022.pdf", "web/news.html", "memo.docx"}),
                         ({"year": {"$gte": 2020, "$lt": 2022}}, {"web/news.html", "memo.docx"}),
                         ({"source": {"$in": ["README.md", "memo.docx"]}}, {"README.md", "memo.docx"}),
                         ({"title": "Company News"}, {"web/news.html"})]:
        got = _query(capsys, idx, "annual report company", "--filter", json.dumps(flt))
        assert got, flt
        assert {d for h in got for d in h["doc_ids"]} <= allowed, (flt, {d for h in got for d in h["doc_ids"]})
    got = _query(capsys, idx, paras[3]["text"][:80], "--filter", json.dumps({"source": "annual_2022.pdf",
                                                                             "page": {"$gte": 3}}))
    assert got and all(h["doc_ids"] == ["annual_2022.pdf"] for h in got)
    assert all(h["metadata"]["page_end"] >= 3 for h in got if h["kind"] == "chunk")   # reaches page 3
    assert main(["query", str(idx), "q", "--no-llm", "--filter", "{year: 2020}"]) == 2
    assert "--filter is not valid JSON" in capsys.readouterr().err


def test_strict_makes_the_broken_file_an_error(folder, tmp_path, cfg_file, hash_embedder, capsys):
    assert _index(folder, tmp_path / "idx", cfg_file, "--strict") == 2
    err = capsys.readouterr().err
    assert "web/locked.pdf is unreadable: it is an encrypted PDF" in err and "--strict" in err
    assert not (tmp_path / "idx").exists()


def test_nothing_readable_is_an_error(tmp_path, cfg_file, hash_embedder, capsys):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.txt").write_bytes(b"\x00\x01")
    assert _index(tmp_path / "c", tmp_path / "idx", cfg_file) == 2
    assert "nothing readable" in capsys.readouterr().err


def _doc_text(ix, doc_id):
    """A document's text put back together from its chunks' spans (chunks overlap)."""
    chars = {}
    for d, t, (a, _) in zip(ix.chunk_doc_ids, ix.chunk_texts, ix.chunk_spans):
        if d == doc_id:
            chars.update((int(a) + i, ch) for i, ch in enumerate(t))
    return "".join(chars[i] for i in sorted(chars))


def _current(idx):
    return (idx / "CURRENT").read_text()


def test_sync_twice_reports_zero_changes_the_second_time(folder, tmp_path, paras, cfg_file, hash_embedder, capsys):
    idx = tmp_path / "idx"
    assert _index(folder, idx, cfg_file, "-q") == 0
    capsys.readouterr()
    # change one file, add one, remove one
    write_markdown(folder / "README.md", "Handbook", [(paras[7]["title"], paras[7]["text"]),
                                                      (paras[12]["title"], paras[12]["text"])])
    (folder / "notes").mkdir()
    (folder / "notes" / "new.txt").write_text(paras[13]["text"])
    (folder / "memo.docx").unlink()
    assert main(["sync", str(idx), str(folder), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["added"], rep["changed"], rep["deleted"], rep["unchanged"], rep["changes"]) == \
        (["notes/new.txt"], ["README.md"], ["memo.docx"], 3, 3)
    assert rep["skipped"] == [["web/locked.pdf", "it is an encrypted PDF (a password is needed)"]]
    ix = store.load(idx, embedder=HashEmbedder())
    assert sorted(ix.docs) == ["README.md", "annual_2019.pdf", "annual_2022.pdf", "notes/new.txt", "web/news.html"]
    readme = _doc_text(ix, "README.md")
    assert paras[12]["text"][:100] in readme and paras[8]["text"][:100] not in readme
    assert sorted(set(ix.chunk_doc_ids)) == sorted(ix.docs)

    snap = _current(idx)
    (folder / "annual_2019.pdf").touch()                 # a new mtime, the same bytes: unchanged
    assert main(["sync", str(idx), str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("0 changes: 0 added, 0 changed, 0 deleted; 5 unchanged") and "left as it was" in out
    assert _current(idx) == snap                          # no new snapshot written


def test_sync_replacing_every_document_rebuilds(tmp_path, paras, cfg_file, hash_embedder, capsys):
    f = tmp_path / "f"
    f.mkdir()
    (f / "a.txt").write_text(paras[0]["text"])
    idx = tmp_path / "idx"
    assert _index(f, idx, cfg_file, "-q") == 0
    (f / "a.txt").write_text(paras[1]["text"])
    (f / "b.txt").write_text(paras[2]["text"])
    capsys.readouterr()
    assert main(["sync", str(idx), str(f), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert (rep["changed"], rep["added"]) == (["a.txt"], ["b.txt"])
    ix = store.load(idx, embedder=HashEmbedder())
    assert sorted(ix.docs) == ["a.txt", "b.txt"] and paras[1]["text"][:50] in " ".join(ix.chunk_texts)


def test_add_upserts_or_refuses_and_delete(folder, tmp_path, paras, cfg_file, hash_embedder, capsys):
    idx = tmp_path / "idx"
    assert _index(folder, idx, cfg_file, "-q") == 0
    extra = tmp_path / "extra"
    extra.mkdir()
    write_docx(extra / "memo.docx", "Budget Memo v2", [(paras[14]["title"], paras[14]["text"])])
    (extra / "fresh.md").write_text(f"# Fresh\n\n{paras[15]['text']}\n")
    capsys.readouterr()
    snap = _current(idx)
    assert main(["add", str(idx), str(extra / "memo.docx"), "--no-replace"]) == 2
    assert "already in the index (memo.docx)" in capsys.readouterr().err and _current(idx) == snap
    assert main(["add", str(idx), str(extra), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert (res["added"], res["replaced"], res["docs_in_index"]) == (["fresh.md"], ["memo.docx"], 6)
    ix = store.load(idx, embedder=HashEmbedder())
    assert ix.docs["memo.docx"]["title"] == "Budget Memo v2"
    assert list(ix.chunk_doc_ids).count("memo.docx") == len([c for c in ix.chunk_ids if c.startswith("memo.docx#")])
    assert len(set(ix.chunk_ids)) == ix.n_chunks       # no duplicate chunks
    assert main(["delete", str(idx), "memo.docx", "nope.txt"]) == 2
    assert "not in the index: nope.txt" in capsys.readouterr().err
    assert main(["delete", str(idx), "memo.docx", "fresh.md"]) == 0
    assert sorted(store.load(idx, embedder=HashEmbedder()).docs) == \
        ["README.md", "annual_2019.pdf", "annual_2022.pdf", "web/news.html"]


def test_log_levels_and_inspect_out(folder, tmp_path, cfg_file, hash_embedder, capsys):
    logger = logging.getLogger("contextrag")
    before = (logger.level, logger.propagate, list(logger.handlers))
    idx = tmp_path / "idx"
    assert main(["-q", "index", str(folder), "--out", str(idx), "--config", cfg_file]) == 0
    err = capsys.readouterr().err
    assert "web/locked.pdf: skipped" in err and "contextrag: read 5 documents" not in err
    assert (logger.level, logger.propagate, list(logger.handlers)) == before      # put back after main()
    shutil.rmtree(idx)
    cfg = json.loads(open(cfg_file).read())
    cfg.pop("n_summaries")                               # the default asks for summaries; no LLM is given
    (tmp_path / "cfg2.json").write_text(json.dumps(cfg))
    assert main(["index", str(folder), "--out", str(idx), "--config", str(tmp_path / "cfg2.json"), "--verbose"]) == 0
    err = capsys.readouterr().err
    assert "contextrag: read 5 documents" in err and "contextrag: debug: building without cluster summaries" in err
    assert "summar" not in err.replace("debug: building without cluster summaries", "")  # no summaries warning
    before_files = sorted(p.name for p in idx.rglob("*"))
    pic = tmp_path / "pics" / "graph.png"
    pic.parent.mkdir()
    assert main(["inspect", str(idx), "--out", str(pic)]) == 0
    assert pic.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in idx.rglob("*")) == before_files                  # nothing in the index dir
    assert main(["inspect", str(idx)]) == 0
    assert "--out graph.png" in capsys.readouterr().out and sorted(p.name for p in idx.rglob("*")) == before_files


@pytest.mark.parametrize("module,suffix", [("pypdf", "annual_2019.pdf"), ("trafilatura", "web/news.html"),
                                           ("docx", "memo.docx")])
def test_a_missing_reader_names_the_extra(folder, tmp_path, cfg_file, hash_embedder, capsys, monkeypatch,
                                          module, suffix):
    monkeypatch.setitem(sys.modules, module, None)          # import -> ModuleNotFoundError
    # that format alone: nothing readable, and the error names the extra
    assert main(["index", str(folder / suffix), "--out", str(tmp_path / "idx"), "--config", cfg_file]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("contextrag index: error: nothing readable") and \
        "needs the 'docs' extra: pip install 'contextrag[docs]'" in err[-1]
    # in the folder: the other formats are indexed, the missing one is said once
    assert main(["index", str(folder), "--out", str(tmp_path / "idx"), "--config", cfg_file]) == 0
    warn = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("contextrag: warning:")]
    assert len(warn) == 1 and suffix in warn[0] and "skipped, reading" in warn[0] and "contextrag[docs]" in warn[0]
    assert suffix not in store.load(tmp_path / "idx", embedder=HashEmbedder()).docs
