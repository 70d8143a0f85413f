"""One bad entry in a folder never aborts or hangs the folder: it is skipped with a warning naming it
(a safe form of its name), and every good file is read. Run in a child process with a time and a
memory limit: a FIFO that is opened blocks for ever, a link to /dev/zero that is read has no end."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import pytest

READ = """
import json, resource, sys, warnings
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from contextrag.ingest import read_documents
with warnings.catch_warnings(record=True) as ws:
    warnings.simplefilter("always")
    got = read_documents(sys.argv[1])
print(json.dumps({"docs": sorted(d["id"] for d in got.docs), "skipped": got.skipped,
                  "warnings": [str(w.message) for w in ws]}))
"""

SYNC = """
import json, resource, sys, warnings
sys.path.insert(0, sys.argv[3])
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
from hash_embedder import HashEmbedder
from contextrag import ContextRAG
rag = ContextRAG.load(sys.argv[2], embedder=HashEmbedder())
with warnings.catch_warnings(record=True) as ws:
    warnings.simplefilter("always")
    rep = rag.sync_folder(sys.argv[1])
print(json.dumps({"added": rep["added"], "skipped": rep["skipped"], "warnings": [str(w.message) for w in ws]}))
"""


def _bomb_pdf(path, mib: int = 100) -> None:
    """A one-page PDF whose content stream inflates to ``mib`` MiB (pypdf refuses past its limit)."""
    pypdf = pytest.importorskip("pypdf")
    from pypdf.generic import DecodedStreamObject, NameObject, StreamObject
    w = pypdf.PdfWriter()
    page = w.add_blank_page(100, 100)
    content = StreamObject()
    content[NameObject("/Filter")] = NameObject("/FlateDecode")
    comp = zlib.compressobj(9)
    block = b" " * (1 << 20)
    content._data = b"".join([comp.compress(block) for _ in range(mib)] + [comp.flush()])
    page[NameObject("/Contents")] = w._add_object(content)
    assert DecodedStreamObject    # (imported to fail early on a pypdf without the generic objects)
    with open(path, "wb") as f:
        w.write(f)


@pytest.fixture
def bad_folder(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "good.txt").write_text("The Glass River runs through the harbour city of Varn.")
    (d / "also_good.md").write_text("# Notes\n\nVarn's harbour was rebuilt after the flood.")
    os.symlink("loop_b.txt", d / "loop_a.txt")         # a symlink loop
    os.symlink("loop_a.txt", d / "loop_b.txt")
    os.mkfifo(d / "pipe.txt")                           # opening it would block until a writer comes
    os.symlink("/dev/zero", d / "zero.txt")             # reading it never ends
    with open(os.path.join(os.fsencode(d), b"bad\xffname.txt"), "wb") as f:   # not UTF-8
        f.write(b"A file whose name is not UTF-8.")
    (d / "zw.txt").write_text("\u200b\u200c \u2060\ufeff\n")           # zero-width characters only
    _bomb_pdf(d / "bomb.pdf")
    return d


def _run(code, *args, timeout=120):
    run = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                         timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_bad_entries_are_skipped_by_name(bad_folder):
    out = _run(READ, bad_folder)
    assert out["docs"] == ["also_good.md", "good.txt"]
    skipped = dict(out["skipped"])
    assert set(skipped) == {"loop_a.txt", "loop_b.txt", "pipe.txt", "zero.txt", "bad\\xffname.txt", "zw.txt",
                            "bomb.pdf"}
    assert "FIFO" in skipped["pipe.txt"] and "character device" in skipped["zero.txt"]
    assert "symbolic links" in skipped["loop_a.txt"]
    assert "not valid UTF-8" in skipped["bad\\xffname.txt"]
    assert "text" in skipped["bomb.pdf"] or "LimitReached" in skipped["bomb.pdf"]   # pypdf stops inflating it
    assert "no text" in skipped["zw.txt"]
    said = [w for w in out["warnings"] if "skipped" in w]
    assert len(said) == 1, said                          # one warning for them all (ingest.base.skipped_summary)
    for name in skipped:                                 # naming every skipped entry
        assert name in said[0], name
    json.dumps(out, ensure_ascii=False).encode("utf-8")  # every name printable


def test_sync_skips_bad_entries_too(bad_folder, tiny, tmp_path):
    from pathlib import Path
    out = _run(SYNC, bad_folder, tiny, Path(__file__).parent, timeout=240)
    assert sorted(out["added"]) == ["also_good.md", "good.txt"]
    assert {s[0] for s in out["skipped"]} >= {"pipe.txt", "zero.txt", "loop_a.txt", "bad\\xffname.txt", "bomb.pdf"}


def test_a_file_past_the_size_limit_is_skipped(tmp_path, monkeypatch):
    from contextrag.ingest import files
    (tmp_path / "big.txt").write_text("word " * 1000)
    (tmp_path / "small.txt").write_text("a few words")
    monkeypatch.setattr(files, "MAX_FILE_BYTES", 1000)
    with pytest.warns(UserWarning, match="big.txt: skipped, it is larger than"):
        got = files.read_documents(tmp_path)
    assert [d["id"] for d in got.docs] == ["small.txt"]


def test_a_reader_error_skips_its_file_only(tmp_path, monkeypatch):
    """A PDF bomb whose inflating fails outside the page text (pypdf's LimitReachedError is no
    PdfReadError) or any other reader failure: that file is skipped by name, the rest is read."""
    errors = pytest.importorskip("pypdf.errors")
    from contextrag.ingest import files, pdf

    def bomb(data):
        raise errors.LimitReachedError("Limit reached while decompressing.")
    monkeypatch.setattr(pdf, "read_pdf", bomb)
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.7 stand-in")
    (tmp_path / "b.txt").write_text("readable words")
    with pytest.warns(UserWarning, match=r"a.pdf: skipped, its pdf reader failed \(LimitReachedError"):
        got = files.read_documents(tmp_path)
    assert [d["id"] for d in got.docs] == ["b.txt"]
