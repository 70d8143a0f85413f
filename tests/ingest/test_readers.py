"""Each reader on real files the test writes: text, title, metadata, pages/sections, and the reasons
unreadable files give. Plus where a chunk sits (index/segments.py) against a brute-force count."""
from __future__ import annotations

import random
import warnings

import pytest

from contextrag.index.segments import check_segments, locate
from contextrag.ingest import KINDS, Unreadable, list_files, read_documents, read_source
from contextrag.ingest.files import Source
from contextrag.ingest.markdown import markdown_to_text
from contextrag.textfile import TextFileWarning

from ingest_files import encrypt_pdf, write_docx, write_html, write_markdown, write_pdf


def _doc(path):
    return read_source(Source(path, path.name, KINDS[path.suffix.lower()]))


def test_markdown_drops_badges_html_and_urls_and_keeps_sections(tmp_path, paras):
    secs = [(paras[0]["title"], paras[0]["text"]), (paras[1]["title"], paras[1]["text"])]
    d = _doc(write_markdown(tmp_path / "README.md", "Widget", secs, front={"date": "2020-02-03", "team": "infra"}))
    text = d["text"]
    for gone in ("http", "shields", "img", "<p", "](", "![", "logo.png", "diagram"):
        assert gone not in text, gone
    assert "See the notes or ." in text and paras[1]["text"] in text
    assert d["title"] == "Widget"
    assert d["metadata"]["date"] == "2020-02-03" and d["metadata"]["year"] == 2020 and d["metadata"]["team"] == "infra"
    assert d["metadata"]["format"] == "markdown" and d["metadata"]["source"] == "README.md"
    segs = d["segments"]["section"]
    assert [v for _, v in segs] == ["Widget", secs[0][0], secs[1][0]]
    for start, v in segs:                       # each section starts at its heading's line
        assert text[start:start + len(v)] == v


def test_markdown_lists_tables_code_and_front_matter_title():
    e = markdown_to_text("---\ntitle: From front matter\n---\n# Heading one\n\n- a\n- b\n\n| x | y |\n|---|---|\n"
                         "| 1 | 2 |\n\n```sh\npip install x\n```\n\n<details>hidden html</details>\n")
    assert e.title == "From front matter"
    assert e.text == "Heading one\n\n- a\n- b\n\nx | y\n1 | 2\n\npip install x"


def test_markdown_wrapped_lines_of_a_paragraph_join_into_one_line():
    e = markdown_to_text("# H\n\nBM25 is divided\nby its maximum.  \nA hard break.\n\nNext paragraph.\n")
    assert e.text == "H\n\nBM25 is divided by its maximum.\nA hard break.\n\nNext paragraph."


def test_pdf_pages_title_and_year(tmp_path, paras):
    pages = [paras[2]["text"], paras[3]["text"], paras[4]["text"]]
    d = _doc(write_pdf(tmp_path / "report.pdf", pages, title="Annual Report", author="Board", created=(2019, 5, 1)))
    assert d["title"] == "Annual Report"
    m = d["metadata"]
    assert (m["pages"], m["year"], m["author"], m["format"]) == (3, 2019, "Board", "pdf")
    starts = [s for s, _ in d["segments"]["page"]]
    assert [v for _, v in d["segments"]["page"]] == [1, 2, 3] and starts[0] == 0
    for (a, n), b in zip(d["segments"]["page"], starts[1:] + [len(d["text"])]):
        # the page's words are where its segment says (pypdf may rewrap lines)
        assert pages[n - 1].split()[:6] == d["text"][a:b].split()[:6]


def test_pdf_without_title_uses_the_file_name_and_skips_blank_pages(tmp_path, paras):
    d = _doc(write_pdf(tmp_path / "board_minutes.pdf", [paras[5]["text"], "", paras[6]["text"]]))
    assert d["title"] == "board minutes"
    assert [v for _, v in d["segments"]["page"]] == [1, 3]


def test_unreadable_pdfs_give_their_reason(tmp_path, paras):
    plain = write_pdf(tmp_path / "plain.pdf", [paras[0]["text"]])
    with pytest.raises(Unreadable, match="encrypted PDF .a password is needed"):
        _doc(encrypt_pdf(plain, tmp_path / "locked.pdf"))
    # an empty user password only restricts printing/copying: readable
    opened = _doc(encrypt_pdf(plain, tmp_path / "restricted.pdf", user_password=""))
    assert paras[0]["text"].split()[:8] == opened["text"].split()[:8]
    (tmp_path / "broken.pdf").write_bytes(plain.read_bytes()[:300])
    with pytest.raises(Unreadable, match="PDF|pages"):
        _doc(tmp_path / "broken.pdf")
    with pytest.raises(Unreadable, match="no extractable text"):
        _doc(write_pdf(tmp_path / "scan.pdf", ["", ""]))


def test_html_main_text_title_sections_and_date(tmp_path, paras):
    secs = [(paras[7]["title"], paras[7]["text"]), (paras[8]["title"], paras[8]["text"])]
    d = _doc(write_html(tmp_path / "news.html", "Quarterly News", secs, date="2021-04-05", author="Jane Roe"))
    assert d["title"] == "Quarterly News"
    assert paras[7]["text"] in d["text"] and paras[8]["text"] in d["text"]
    for noise in ("Archive", "Log in", "newsletter", "All rights reserved"):
        assert noise not in d["text"], noise
    assert d["metadata"]["year"] == 2021 and d["metadata"]["author"] == "Jane Roe"
    assert [v for _, v in d["segments"]["section"]][-2:] == [secs[0][0], secs[1][0]]


def test_html_without_a_date_gets_no_invented_year(tmp_path, paras):
    d = _doc(write_html(tmp_path / "page.html", "Undated", [(paras[9]["title"], paras[9]["text"])]))
    assert "year" not in d["metadata"] and "date" not in d["metadata"]


def test_docx_headings_tables_and_properties(tmp_path, paras):
    secs = [(paras[10]["title"], paras[10]["text"]), (paras[11]["title"], paras[11]["text"])]
    d = _doc(write_docx(tmp_path / "memo.docx", "Budget Memo", secs))
    assert d["title"] == "Budget Memo" and d["metadata"]["year"] == 2021 and d["metadata"]["author"] == "Ada Writer"
    assert paras[11]["text"] in d["text"] and d["text"].endswith("item | count\nanvils | 12")
    assert [v for _, v in d["segments"]["section"]][1:] == [secs[0][0], secs[1][0]]
    (tmp_path / "fake.docx").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(Unreadable, match="DOCX"):
        _doc(tmp_path / "fake.docx")


def test_ids_relative_to_folder_root_or_file_name(tmp_path):
    (tmp_path / "a" / "sub").mkdir(parents=True)
    (tmp_path / "a" / "sub" / "x.md").write_text("# X\n\nbody")
    (tmp_path / "a" / ".git").mkdir()
    (tmp_path / "a" / ".git" / "notes.txt").write_text("hidden")
    (tmp_path / "a" / "data.json").write_text("[]")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.md").write_text("other")
    got = list_files([tmp_path / "a"])
    assert [s.doc_id for s in got.sources] == ["sub/x.md"] and got.ignored == 1   # data.json ignored, .git unseen
    assert [s.doc_id for s in list_files(tmp_path / "b" / "x.md").sources] == ["x.md"]
    both = list_files([tmp_path / "a" / "sub" / "x.md", tmp_path / "b" / "x.md"], root=tmp_path)
    assert [s.doc_id for s in both.sources] == ["a/sub/x.md", "b/x.md"]
    with pytest.raises(ValueError, match="share the document id 'x.md'"):
        list_files([tmp_path / "a" / "sub" / "x.md", tmp_path / "b" / "x.md"])
    (tmp_path / "data.csv").write_text("x")
    with pytest.raises(ValueError, match="not a supported file"):
        list_files(tmp_path / "data.csv")
    with pytest.raises(FileNotFoundError):
        list_files(tmp_path / "nope")


def test_strict_and_nothing_readable(tmp_path, paras):
    (tmp_path / "ok.txt").write_text(paras[0]["text"])
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01binary")
    with pytest.raises(ValueError, match="bin.txt is unreadable: it is a binary file"):
        read_documents(tmp_path, strict=True)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        got = read_documents(tmp_path)
    assert [d["id"] for d in got.docs] == ["ok.txt"] and got.skipped == [("bin.txt", "it is a binary file")]
    assert [str(w.message) for w in ws if issubclass(w.category, TextFileWarning)] == \
        ["corpus: 1 of 2 files unreadable — bin.txt: skipped, it is a binary file"]
    assert got.summary() == "read 1 document from 2 files; 1 skipped (unreadable, see the warnings)"
    (tmp_path / "ok.txt").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="nothing readable .*bin.txt: it is a binary file"):
            read_documents(tmp_path)


def _brute(segs, a, b):
    """The location by counting characters one by one."""
    out = {}
    for key, rows in segs.items():
        ends = [s for s, _ in rows[1:]] + [10**9]
        at = lambda i: next(v for (s, v), e in zip(rows, ends) if s <= i < e)  # noqa: E731
        if key == "page":
            if at(a) is not None:
                out["page"], out["page_end"] = at(a), at(max(a, b - 1))
        else:
            counts: dict = {}
            for i in range(a, b):
                counts[at(i)] = counts.get(at(i), 0) + 1
            best = max(counts.items(), key=lambda kv: (kv[1], -[v for _, v in rows].index(kv[0])))[0] \
                if counts else at(a)
            if best is not None:
                out[key] = best
            touched = list(dict.fromkeys(at(i) for i in range(a, max(b, a + 1)) if at(i) is not None))
            if touched:
                out[f"{key}s"] = touched
    return out


def test_locate_matches_a_character_count():
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(5, 120)
        starts = sorted(rng.sample(range(1, n), rng.randint(0, min(6, n - 1))))
        segs = check_segments({"page": [[0, 1]] + [[s, i + 2] for i, s in enumerate(starts)],
                               "section": [[s, f"s{i}"] for i, s in enumerate([0] + starts)][1:] or [[0, "s"]]},
                              n, "segments")
        a = rng.randrange(n)
        b = rng.randint(a + 1, n)
        assert locate(segs, a, b) == _brute(segs, a, b), (segs, a, b)


def test_check_segments_rejects_bad_input():
    with pytest.raises(ValueError, match="ascend"):
        check_segments({"page": [[0, 1], [0, 2]]}, 10, "s")
    with pytest.raises(ValueError, match="ascend"):
        check_segments({"page": [[0, 1], [11, 2]]}, 10, "s")
    with pytest.raises(TypeError, match="start_char"):
        check_segments({"page": [["0", 1]]}, 10, "s")
    assert check_segments({"section": [[3, "b"]]}, 10, "s") == {"section": [[0, None], [3, "b"]]}
