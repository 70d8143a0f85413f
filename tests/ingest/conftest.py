"""Fixtures for the ingestion tests: real files written by the tests themselves (PDF by fpdf2, an
encrypted PDF by pypdf, DOCX by python-docx, HTML and Markdown as text) filled with real HotpotQA
paragraphs, and the hash embedder, so building an index takes milliseconds."""
from __future__ import annotations

import json

import pytest
from ingest_files import HashEmbedder
from shared_data import hotpot_file


@pytest.fixture(scope="session")
def paras():
    """Distinct HotpotQA paragraphs: {"title", "text"}."""
    seen: dict[str, str] = {}
    for q in json.loads(hotpot_file().read_text()):
        for title, sents in q["context"]:
            text = "".join(sents)
            if title not in seen and len(text) > 200 and text.isascii():
                seen[title] = text
        if len(seen) >= 40:
            break
    return [{"title": t, "text": x} for t, x in seen.items()]


@pytest.fixture
def hash_embedder(monkeypatch):
    from contextrag.embed.embedder import Embedder
    monkeypatch.setattr(Embedder, "from_config", classmethod(lambda cls, config, **kw: HashEmbedder()))
    return HashEmbedder()


@pytest.fixture
def cfg_file(tmp_path):
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps({"rq_sizes": [4, 2], "n_join": 2, "n_meet": 2, "n_summaries": 0,
                             "chunk_tokenizer": "regex", "chunk_tokens": 60, "chunk_overlap": 10}))
    return str(p)
