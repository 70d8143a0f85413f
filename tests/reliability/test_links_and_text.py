"""Planted links in an index, JSONL records with the Unicode that splitlines() breaks on or that no
encoder takes, and text files that are almost UTF-8, hold NULs late, or draw nothing."""
from __future__ import annotations

import json
import os

import pytest

from contextrag.index import store
from contextrag.index.store import IndexFormatError


# ---- symlinks in an index ------------------------------------------------------------------

def test_a_symlinked_lock_is_refused_and_nothing_is_created_outside(tiny, tmp_path):
    outside = tmp_path / "elsewhere" / "victim"
    outside.parent.mkdir()
    (tiny / store.LOCK).unlink(missing_ok=True)
    os.symlink(outside, tiny / store.LOCK)
    with pytest.raises(IndexFormatError, match="lock file LOCK is a symbolic link"):
        with store.writer_lock(tiny):
            pass
    assert not outside.exists()


def test_symlinked_snapshot_files_are_refused_without_leaking_sizes(tiny, tmp_path):
    snap = store.snapshot_dir(tiny)
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"x" * 12345)
    os.replace(snap / store.META, tmp_path / "meta.copy")
    os.symlink(secret, snap / store.META)
    with pytest.raises(IndexFormatError, match="symbolic link") as e:
        store.load(tiny, embedder=object())
    assert "12345" not in str(e.value)
    os.unlink(snap / store.META)                 # a plain file of the wrong size: no sizes named either
    (snap / store.META).write_bytes(b"y" * 777)
    with pytest.raises(IndexFormatError, match="size") as e:
        store.verify(snap, store.read_manifest(snap))
    assert "777" not in str(e.value)


def test_symlinked_manifest_or_current_is_refused(tiny, tmp_path):
    snap = store.snapshot_dir(tiny)
    os.replace(snap / store.MANIFEST, tmp_path / "m.json")
    os.symlink(tmp_path / "m.json", snap / store.MANIFEST)
    with pytest.raises(IndexFormatError, match="symbolic link"):
        store.read_manifest(snap)
    os.replace(tiny / store.CURRENT, tmp_path / "CURRENT")
    os.symlink(tmp_path / "CURRENT", tiny / store.CURRENT)
    with pytest.raises(IndexFormatError, match="symbolic link"):
        store.snapshot_dir(tiny)


# ---- JSONL ---------------------------------------------------------------------------------

def test_jsonl_records_split_on_newline_only(tmp_path):
    from contextrag.ingest import read_records
    recs = [{"id": "a", "text": "one\u2028two\u2029three\x85four"}, {"id": "b", "text": "five\u2028"}]
    p = tmp_path / "c.jsonl"
    p.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in recs) + "\r\n", encoding="utf-8")
    got = read_records(p)
    assert [(d["id"], d["text"]) for d in got] == [(r["id"], r["text"]) for r in recs]


@pytest.mark.parametrize("line,field", [('{"id": "c", "text": "bad \\ud800 x"}', "text"),
                                        ('{"id": "c\\udfff", "text": "fine"}', "id"),
                                        ('{"id": "c", "text": "fine", "author": "\\udc80"}', "author")])
def test_jsonl_lone_surrogates_name_file_line_and_record(tmp_path, line, field):
    from contextrag.ingest import read_records
    p = tmp_path / "c.jsonl"
    p.write_text('{"id": "a", "text": "ok"}\n\n' + line + "\n")
    with pytest.raises(ValueError, match=rf"c\.jsonl line 3: record 1 field '{field}' holds a lone surrogate"):
        read_records(p)


def test_lone_surrogates_in_documents_are_a_value_error_naming_the_field():
    from contextrag.index.chunking import normalize_docs
    with pytest.raises(ValueError, match=r"docs\[1\] text holds a lone surrogate"):
        normalize_docs([{"id": "a", "text": "ok"}, {"id": "b", "text": "x\ud800"}])
    with pytest.raises(ValueError, match=r"docs\[0\] metadata\['k'\] holds a lone surrogate"):
        normalize_docs([{"id": "a", "text": "ok", "metadata": {"k": "\udcff"}}])
    with pytest.raises(ValueError, match="no visible text"):
        normalize_docs([{"id": "a", "text": "\u200b\u2060\ufeff"}])


def test_server_answers_400_for_lone_surrogates(tiny):
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient
    from hash_embedder import HashEmbedder

    from contextrag import ContextRAG
    from contextrag.server.app import create_app
    client = TestClient(create_app(ContextRAG.load(tiny, embedder=HashEmbedder())), base_url="http://127.0.0.1")
    body = '{"documents": [{"id": "s", "text": "bad \\ud800 text"}]}'
    r = client.post("/documents", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert "lone surrogate" in r.text


# ---- text files ----------------------------------------------------------------------------

def test_mostly_utf8_with_a_stray_byte_stays_utf8():
    from contextrag.textfile import sniff
    text = "Привет, мир: это обычный текст в UTF-8. " * 10
    got, note = sniff(text.encode() + b" \xff end")
    assert got.startswith(text) and got.endswith("\ufffd end")
    assert "invalid byte" in note
    assert sniff("Café crème brûlée".encode("latin-1"))[0] == "Café crème brûlée"   # legacy text still detected


def test_nul_bytes_after_the_sniffed_start(tmp_path):
    from contextrag.textfile import sniff
    text, note = sniff(b"words " * 2000 + b"\x00\x00 tail")
    assert "\x00" not in text and text.endswith(" tail") and "NUL" in note
    text, note = sniff(b"words " * 2000 + bytes(range(32)) * 300)   # binary data past 8 KiB
    assert text is None and "binary" in note


def test_zero_width_only_text_file_is_skipped(tmp_path):
    from contextrag.ingest import read_documents
    (tmp_path / "zw.txt").write_text("\u200b\u200d\u2060\n\ufeff")
    (tmp_path / "ok.txt").write_text("visible words")
    with pytest.warns(UserWarning, match="zw.txt: skipped, it holds no text"):
        got = read_documents(tmp_path)
    assert [d["id"] for d in got.docs] == ["ok.txt"]


def test_a_model_folder_never_runs_its_own_code(tmp_path):
    pytest.importorskip("sentence_transformers")
    from contextrag.embed.embedder import Embedder
    marker = tmp_path / "ran"
    model = tmp_path / "model"
    model.mkdir()
    (model / "custom_st.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nclass Evil: pass\n")
    (model / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "custom_st.Evil"}]))
    with pytest.raises(Exception, match="trust_remote_code"):
        Embedder(str(model), backend="torch").embed_passages(["hello"])
    assert not marker.exists()
