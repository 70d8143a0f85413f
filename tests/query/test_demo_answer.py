"""The demo's own question, answered offline with no LLM, on the demo's corpus (the repository's README
and docs), and the absolute relevance that tells a question about that corpus from one about nothing
in it. One index of the demo corpus for the module."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from contextrag.commands.demo import DEFAULT_QUESTION, repo_docs, shipped_corpus

pytestmark = pytest.mark.skipif(repo_docs() is None, reason="the repository's docs are not next to the package")

ABOUT_THE_CORPUS = [
    DEFAULT_QUESTION,
    "What does fuzzy c-means compute for each chunk?",
    "How are concept nodes built with fuzzy formal concept analysis?",
    "Which t-norm does the Łukasiewicz logic use?",
    "How do I serve an index over HTTP?",
    "What tools does the MCP server expose?",
    "How is the index stored on disk?",
    "What are the codebook sizes of the residual quantization k-means?",
    "How does the spreading step reach a bridge passage?",
    "Which LLM clients can answer questions?",
    "What does contextrag eval measure on HotpotQA?",
    "How are the CPU kernels dispatched to AVX-512?",
]
ABOUT_NOTHING_IN_IT = [
    "zebra migration patterns in Kenya",
    "Who won the 1966 football World Cup final?",
    "What is a good recipe for banana bread?",
    "How tall is Mount Kilimanjaro?",
    "When did the Western Roman Empire fall?",
    "Who painted the Mona Lisa?",
    "How do I repot an orchid?",
    "Which planet has the most moons?",
    "What causes the northern lights?",
    "How many strings does a violin have?",
    "What happens in the plot of Hamlet?",
    "What is the best season to plant tulip bulbs?",
]


@pytest.fixture(scope="module")
def demo_rag():
    from contextrag import Config, ContextRAG

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ContextRAG.build(shipped_corpus(), config=Config(n_summaries=0))


def test_the_demo_answers_its_own_question_and_cites_the_passage(demo_rag):
    from contextrag import query

    ans = query.answer(demo_rag.index, DEFAULT_QUESTION, k=8)            # no LLM unless one is named
    assert ans.style == "extractive" and ans.cost["total"]["calls"] == 0
    text = ans.text.lower()
    assert re.search(r"divided by (?:its|their) (?:per-query )?maximum", text), ans.text
    first = ans.support[0].lower()                       # the sentence that answers comes first
    assert "maximum" in first and "divid" in first
    cited = ans.cited_hits[0]
    assert "maximum" in cited.text.lower() and first.split("`")[-1][:40] in cited.text.lower()


def test_relevance_separates_questions_about_the_corpus(demo_rag):
    def best(q):
        hits = demo_rag.retrieve(q, k=5)
        rel = [h.relevance for h in hits]
        assert all(0.0 <= r <= 1.0 for r in rel)
        return max(rel)

    pos = np.array([best(q) for q in ABOUT_THE_CORPUS])
    neg = np.array([best(q) for q in ABOUT_NOTHING_IN_IT])
    auc = float(np.mean(pos[:, None] > neg[None, :]) + 0.5 * np.mean(pos[:, None] == neg[None, :]))
    assert auc >= 0.95, (auc, pos.round(3), neg.round(3))
