"""An error in the embedder (Ctrl-C included) waits for the lexical families' thread before it
propagates: a daemon thread still inside native code when the interpreter exits aborts the process
(SIGABRT) instead of letting the CLI exit with 130."""
from __future__ import annotations

import threading
import time

import pytest

from contextrag import Config
from contextrag.index import build
from contextrag.index.chunking import Document


class _Interrupting:
    """An embedder without a tokenizer (the chunker splits on words) that is interrupted."""
    dim = 8

    def embed_passages(self, texts):
        raise KeyboardInterrupt

    embed_queries = embed_passages


def test_interrupted_embedding_waits_for_the_families_thread(hotpot_paragraphs, monkeypatch):
    finished = threading.Event()

    def slow_families(chunks, config):
        time.sleep(0.5)
        finished.set()

    monkeypatch.setattr(build, "_lexical_of_chunks", slow_families)
    docs = [Document(p["id"], p["text"], p["title"]) for p in hotpot_paragraphs[:3]]
    with pytest.raises(KeyboardInterrupt):
        build.build_index(docs, Config(seed=0), _Interrupting())
    assert finished.is_set()
