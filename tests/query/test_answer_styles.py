"""Answer styles (short, paragraph with [n] citations, extractive), answers ending on a sentence, and
answer_stream — on the small real index, with a scripted client where the model's reply must be
controlled (the embedded model's own streaming is tested in tests/llm/test_streaming.py)."""
import asyncio
import importlib

import numpy as np
import pytest

from contextrag import query
from contextrag.llm.scripted import ScriptedClient
from contextrag.query import extractive as X
from contextrag import sentences as S

A = importlib.import_module("contextrag.query.answer")     # the module (query.answer is the function)


def _script(reply):
    """Rewrites echo nothing new, the rerank keeps the order, the answer call gets ``reply``."""
    def script(m):
        u = m[-1]["content"]
        if "Answer the question" in u or "ANSWER NOW" in u:
            return reply
        if "Passages:" in u:
            return "1, 2, 3"
        return "same"
    return script


# ---------------------------------------------------------------- sentences
def test_sentence_split_and_trim():
    assert S.split("Paris is big. It has 2.1 million people! Really? Yes\nA heading\n\n ") == [
        "Paris is big.", "It has 2.1 million people!", "Really?", "Yes", "A heading"]
    assert S.split('He said "go." Then [2] left [3].') == ['He said "go."', "Then [2] left [3]."]
    assert S.trim("It was founded in 1755. The univer") == "It was founded in 1755."
    assert S.trim("It was founded in 1755 [2]. Later [3]") == "It was founded in 1755 [2]."
    assert S.trim("founded by Mikhail Lomon") == "founded by Mikhail…"
    assert S.trim("Lomon") == "Lomon…" and S.trim("") == ""
    assert S.last_end("No end here") == 0 and S.last_end("One. Two") == 4
    # a full stop before a lower-case word or a number does not split a passage's sentence
    assert S.split("The hybrid score (eq. 13) adds BM25, e.g. the title. Cosine too.") == [
        "The hybrid score (eq. 13) adds BM25, e.g. the title.", "Cosine too."]
    assert S.trim("It was founded in 1755. and then it gr") == "It was founded in 1755."
    # a list item's marker is not part of its sentence; a hyphen or number inside a line stays
    assert S.split("Intro line.\n- BM25 normalisation. Scores are divided.\n* Cosine.\n12. Twelve.\n"
                   "2) Two.\n• Dot.\n-5 degrees. Well-known - yes.") == [
        "Intro line.", "BM25 normalisation.", "Scores are divided.", "Cosine.", "Twelve.", "Two.", "Dot.",
        "-5 degrees.", "Well-known - yes."]


def test_markers_naming_no_passage_are_dropped():
    text, cites = A.resolve_marks("Founded in 1755 [2][7]. By Lomonosov [1, 9]. Odd [12].", 3)
    assert text == "Founded in 1755 [2]. By Lomonosov [1]. Odd." and cites == [2, 1]


# ---------------------------------------------------------------- generated styles
def test_paragraph_cites_existing_hits_only(index, hotpot):
    q = hotpot[0][0]["question"]
    reply = "The university was founded in 1755 [2]. Tokarev taught there [1][40]. It is in Moscow [0]."
    a = query.answer(index, q, llm=ScriptedClient(_script(reply)), k=4, style="paragraph")
    assert a.style == "paragraph" and a.citations == [2, 1]
    assert a.text == "The university was founded in 1755 [2]. Tokarev taught there [1]. It is in Moscow."
    assert a.cited_hits == [a.hits[1], a.hits[0]]
    d = a.to_dict()
    assert d["citations"] == [2, 1] and d["style"] == "paragraph" and len(d["hits"]) == 4


def test_short_answer_cut_at_the_cap_ends_on_a_sentence(index, hotpot):
    q = hotpot[0][0]["question"]
    long = "It was founded in 1755 by the empress. " + " ".join(["word"] * 60)
    a = query.answer(index, q, llm=ScriptedClient(_script(long)), k=3, rewrite=False, rerank=False)
    assert a.style == "short" and a.text == "It was founded in 1755 by the empress."
    assert a.cost["answer"]["completion_tokens"] == A.MAX_TOKENS
    b = query.answer(index, q, llm=ScriptedClient(_script(long)), k=3, rewrite=False, rerank=False, max_tokens=6)
    assert b.text == "It was founded in 1755…"               # no sentence end inside the cap: last whole word


def test_custom_prompt_and_bad_arguments(index, hotpot):
    q = hotpot[0][0]["question"]
    seen = []

    def script(m):
        seen.append(m[-1]["content"])
        return "1755"
    c = ScriptedClient(script)
    a = query.answer(index, q, llm=c, k=2, rewrite=False, rerank=False,
                     prompt="ANSWER NOW: {question}\n{passages}")
    assert a.text == "1755" and seen[-1].startswith(f"ANSWER NOW: {q}\n[1] ")
    with pytest.raises(ValueError, match="style"):
        query.answer(index, q, llm=c, style="essay")
    with pytest.raises(ValueError, match="max_tokens"):
        query.answer(index, q, llm=c, max_tokens=0)
    with pytest.raises(ValueError, match=r"\{passages\}"):
        query.answer(index, q, llm=c, prompt="just {question}")
    with pytest.raises(ValueError, match="llm"):
        query.answer(index, q, llm="none", style="short")


# ---------------------------------------------------------------- extractive
def test_extractive_candidates_are_whole_sentences_when_there_are_any():
    from types import SimpleNamespace as H
    hits = [H(text="The hybrid score (eq. 13)\nBM25 is divided by its maximum. Cosine is"), H(text="A heading")]
    assert X.candidates(hits) == [(1, "BM25 is divided by its maximum.")]
    assert X.candidates([H(text="A heading"), H(text="another")]) == [(1, "A heading"), (2, "another")]


def test_extractive_rule_adds_the_next_passage_above_the_runner_up():
    cands = [(1, "a1"), (1, "a2"), (1, "a3"), (2, "b1"), (2, "b2"), (3, "c1")]
    s = np.array([0.9, 0.5, 0.1, 0.6, 0.55, 0.4])
    assert X.select(cands, s) == [0, 3]              # b1 beats a2 (0.5), the winner's runner-up
    assert X.select(cands, np.array([0.9, 0.3, 0.1, 0.6, 0.2, 0.5])) == [0, 3]   # c1 passes too: one extra only
    assert X.select(cands, np.array([0.9, 0.7, 0.1, 0.6, 0.2, 0.4])) == [0]      # a2 beats every other passage
    assert X.select([(1, "only"), (2, "x")], np.array([0.9, 0.8])) == [0]   # a one-sentence winner adds nothing
    assert X.select([(1, "a"), (1, "b")], np.array([0.2, 0.9])) == [1]
    assert X.select([], np.array([])) == []


def test_extractive_answer_quotes_the_supporting_sentence(index, hotpot):
    q = hotpot[0][6]          # "Who was hung for assisting ...?": one passage's sentence answers it
    a = query.answer(index, q["question"], llm="none", k=5)          # no LLM: the default is extractive
    assert a.style == "extractive" and a.cost["total"]["calls"] == 0 and not a.rewrite_calls
    assert q["answer"] in a.text and a.citations
    for sent in S.split(a.text):                                     # every sentence is from a cited hit
        assert any(sent in h.text for h in a.cited_hits)
    small = ScriptedClient(_script("never asked"), small_model=True)   # stands in for the tiny embedded model
    b = query.answer(index, q["question"], llm=small, k=5, rewrite=False, rerank=False)
    assert b.style == "extractive" and b.text == a.text and small.calls == 0
    assert query.answer_style(None, ScriptedClient()) == "short"


# ---------------------------------------------------------------- streaming
def test_answer_stream_shows_whole_sentences_that_join_to_the_answer(index, hotpot):
    q = hotpot[0][0]["question"]
    reply = "It was founded in 1755 [1]. Tokarev taught there [2][9]. He wrote on ethnography"
    c = ScriptedClient(_script(reply))
    items = list(query.answer_stream(index, q, llm=c, k=3, style="paragraph", rewrite=False, rerank=False))
    deltas, final = items[:-1], items[-1]
    assert isinstance(final, query.Answer) and all(isinstance(d, str) for d in deltas)
    assert deltas[:2] == ["It was founded in 1755 [1].", " Tokarev taught there [2]."]
    assert "".join(deltas) == final.text and final.citations == [1, 2]
    assert final.text.endswith("He wrote on ethnography")             # not cut: the reply's end stays
    same = query.answer(index, q, llm=c, k=3, style="paragraph", rewrite=False, rerank=False)
    assert same.text == final.text
    aa = asyncio.run(query.aanswer(index, q, llm=c, k=3, style="paragraph", rewrite=False, rerank=False))
    assert aa.text == final.text and aa.citations == final.citations
    ex = list(query.answer_stream(index, q, llm="none", k=3))
    assert len(ex) == 2 and ex[0] == ex[1].text and ex[1].style == "extractive"
