"""A small real index for the integration tests (integration_corpus.py), built once per session with
ContextRAG.build and the embedded MiniLM into a directory."""
from __future__ import annotations

import warnings

import pytest
from integration_corpus import answer_script, docs


@pytest.fixture(scope="session")
def index_dir(tmp_path_factory):
    from contextrag import Config, ContextRAG

    path = tmp_path_factory.mktemp("integrations") / "idx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # codebook sizes clamped to the small corpus
        ContextRAG.build(docs(), path=path, config=Config(n_summaries=0, rq_sizes=(4, 2)))
    return path


@pytest.fixture(scope="session")
def rag(index_dir):
    from contextrag import ContextRAG
    return ContextRAG.load(index_dir)


@pytest.fixture
def scripted():
    from contextrag.llm.scripted import ScriptedClient
    return ScriptedClient(answer_script)
