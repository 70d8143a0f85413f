"""The CLI answers bad input, missing extras, LLM failures and Ctrl-C with one plain line (no traceback),
and warnings as one plain line each."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contextrag.cli import main
from contextrag.index import store
from contextrag.embed.embedder import Embedder
from hash_embedder import HashEmbedder

HERE = Path(__file__).parent


@pytest.fixture
def hash_embedder(monkeypatch):
    monkeypatch.setattr(Embedder, "from_config", classmethod(lambda cls, config, **kw: HashEmbedder()))


def _cfg(tmp_path):
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps({"rq_sizes": [4, 2], "n_join": 2, "n_meet": 2, "n_summaries": 0,
                             "chunk_tokenizer": "regex"}))
    return str(p)


def _one_line(capsys, *, contains):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ": error: " in ln]
    assert len(errors) == 1, err
    for c in contains:
        assert c in errors[0], (c, errors[0])
    return errors[0]


def test_corpus_folder_with_binary_latin1_empty_and_utf16_files(tmp_path, paragraphs, hash_embedder, capsys):
    folder = tmp_path / "corpus"
    folder.mkdir()
    for i, p in enumerate(paragraphs[:10]):
        (folder / f"p{i}.txt").write_text(p["text"])
    (folder / "picture.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8)
    (folder / "cafe.txt").write_bytes("Café crème brûlée, une spécialité française très appréciée.".encode("latin-1"))
    (folder / "empty.md").write_bytes(b"")
    (folder / "wide.txt").write_bytes("Grüße aus Köln, sagte die Übersetzerin.".encode("utf-16"))
    out = tmp_path / "idx"
    assert main(["index", str(folder), "--out", str(out), "--config", _cfg(tmp_path)]) == 0
    err = capsys.readouterr().err
    warn = [ln for ln in err.splitlines() if ln.startswith("contextrag: warning: ")]
    assert any("picture.txt: skipped, it is a binary file" in w for w in warn)
    assert any("cafe.txt: not UTF-8; decoded as" in w for w in warn)
    assert any("empty.md: skipped, it is empty" in w for w in warn)
    assert "Traceback" not in err and "warnings.warn" not in err and ".py:" not in err
    ix = store.load(out, embedder=HashEmbedder())
    assert "picture.txt" not in ix.docs and "empty.md" not in ix.docs
    texts = {d: t for d, t in zip(ix.chunk_doc_ids, ix.chunk_texts)}
    assert texts["cafe.txt"].startswith("Café crème brûlée") and "\ufffd" not in texts["cafe.txt"]
    assert texts["wide.txt"] == "Grüße aus Köln, sagte die Übersetzerin."


@pytest.mark.parametrize("name,body,why", [
    ("empty.jsonl", b"", "empty"),
    ("trunc.json", b'[{"id": "a", "text": "hel', "not valid JSON"),
    ("trunc.jsonl", b'{"id": "a", "text": "x"}\n{"id": ', "line 2"),
    ("types.jsonl", b'{"id": "a", "text": ["x"]}\n', "must be a string"),
    ("ids.jsonl", b'{"id": {"x": 1}, "text": "x"}\n', "'id' must be"),
    ("latin.json", '["caf\u00e9 cr\u00e8me"'.encode("latin-1"), "not valid JSON"),
])
def test_index_bad_corpus_files(tmp_path, hash_embedder, capsys, name, body, why):
    f = tmp_path / name
    f.write_bytes(body)
    assert main(["index", str(f), "--out", str(tmp_path / "o"), "--config", _cfg(tmp_path)]) == 2
    _one_line(capsys, contains=[name, why])
    assert not (tmp_path / "o").exists()


def test_query_bad_index_paths_and_questions(tmp_path, tiny, hash_embedder, capsys):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("x")
    assert main(["query", str(tmp_path / "plain"), "q", "--no-llm"]) == 2
    _one_line(capsys, contains=["not a contextrag index"])
    assert main(["query", str(tmp_path / "nothing"), "q", "--no-llm"]) == 2
    _one_line(capsys, contains=["no index"])
    snap = store.snapshot_dir(tiny)
    m = json.loads((snap / "manifest.json").read_text())
    m["format_version"] = 99
    (snap / "manifest.json").write_text(json.dumps(m))
    assert main(["query", str(tiny), "q", "--no-llm"]) == 2
    _one_line(capsys, contains=["format version 99", "newer contextrag"])


def test_query_empty_and_huge_questions(tiny, hash_embedder, capsys):
    assert main(["query", str(tiny), "   ", "--no-llm"]) == 2
    _one_line(capsys, contains=["question"])
    huge = "film director " * 80_000            # about a megabyte
    assert main(["query", str(tiny), huge, "--no-llm", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"]


def test_missing_extra_names_the_pip_install(tiny, hash_embedder, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)          # import httpx -> ModuleNotFoundError
    assert main(["query", str(tiny), "q", "--llm", "http://127.0.0.1:9/v1#m"]) == 3
    _one_line(capsys, contains=["httpx", "pip install 'contextrag[http]'"])


def test_unreachable_llm_is_one_line(tiny, hash_embedder, capsys, monkeypatch):
    from contextrag.llm import http
    orig = http.HTTPClient.__init__

    def fast(self, *a, **k):
        k.update(max_retries=1, backoff=0.01, deadline=5.0, timeout=2.0, connect_timeout=1.0)
        orig(self, *a, **k)
    monkeypatch.setattr(http.HTTPClient, "__init__", fast)
    assert main(["query", str(tiny), "who directed the film?", "--llm", "http://127.0.0.1:9/v1#x",
                 "--no-cache"]) == 1
    _one_line(capsys, contains=["LLM server failed", "127.0.0.1:9"])
    assert main(["query", str(tiny), "who directed the film?", "--no-llm"]) == 0   # without an LLM: works


def test_ctrl_c_during_index_exits_130_and_leaves_the_old_index(tiny, tmp_path, paragraphs):
    """A real SIGINT while `contextrag index` embeds over an existing index."""
    corpus = tmp_path / "c.json"
    corpus.write_text(json.dumps([p["text"] for p in paragraphs[:20]]))
    before = store.current_snapshot(tiny)
    code = textwrap.dedent(f"""
        import signal, sys, time
        # Python's own SIGINT handler, even when the parent process ignores SIGINT (a child inherits that)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, {str(HERE)!r})
        from hash_embedder import HashEmbedder
        from contextrag.embed.embedder import Embedder
        class Slow(HashEmbedder):
            def embed_passages(self, texts):
                print("embedding", flush=True)
                time.sleep(15)          # the SIGINT lands here (a worker thread may outlive it that long)
        Embedder.from_config = classmethod(lambda cls, config, **kw: Slow())
        from contextrag.cli import main
        sys.exit(main(["index", {str(corpus)!r}, "--out", {str(tiny)!r}, "--config", {_cfg(tmp_path)!r}]))
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "embedding"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=180)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and "Traceback" not in err and "interrupted" in err, err
    assert store.current_snapshot(tiny) == before
    assert not [n for n in os.listdir(tiny) if n.startswith((".tmp-", ".CURRENT-"))]
    assert store.load(tiny, embedder=HashEmbedder()).n_chunks > 0
