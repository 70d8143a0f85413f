"""An error in the embedder (Ctrl-C included) waits for the threads beside it (the lexical
families, the sentence hashes) before it propagates: a daemon thread still inside native code when the interpreter exits aborts the process
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


@pytest.mark.parametrize("job", ["_lexical_of_chunks", "_sentences_of_chunks"])
def test_interrupted_embedding_waits_for_the_threads_beside_it(hotpot_paragraphs, monkeypatch, job):
    """Both the families' thread and the sentence hashes' thread."""
    finished = threading.Event()

    def slow(*args):
        time.sleep(0.5)
        finished.set()

    monkeypatch.setattr(build, job, slow)
    docs = [Document(p["id"], p["text"], p["title"]) for p in hotpot_paragraphs[:3]]
    with pytest.raises(KeyboardInterrupt):
        build.build_index(docs, Config(seed=0), _Interrupting())
    assert finished.is_set()
