"""A small real index for the query tests: the 10 paragraphs of each of the first N_QUESTIONS HotpotQA
questions (gold and distractors), built once per session with ContextRAG.build and the embedded MiniLM."""
from __future__ import annotations

import json
import warnings

import pytest

N_QUESTIONS = 8


from shared_data import hotpot_file  # noqa: E402


@pytest.fixture(scope="session")
def hotpot():
    qs = json.loads(hotpot_file().read_text())[:N_QUESTIONS]
    docs: dict[str, str] = {}
    for q in qs:
        for title, sents in q["context"]:
            docs.setdefault(title, "".join(sents))
    return qs, [{"id": t, "title": t, "text": x} for t, x in docs.items()]


@pytest.fixture(scope="session")
def rag(hotpot):
    from contextrag import Config, ContextRAG

    _, docs = hotpot
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # codebook sizes clamped to the small corpus
        return ContextRAG.build(docs, config=Config(n_summaries=0, rq_sizes=(12, 4, 2), n_join=64, n_meet=64))


@pytest.fixture(scope="session")
def index(rag):
    return rag.index
