"""The no-LLM answers chosen by the question's type (query/qtype.py, query/extractive.py), on hand-made
passages with a bag-of-words embedder: fast, and each rule checked where it decides the answer."""
from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

from contextrag.query import extractive as X
from contextrag.query import qtype as T
from contextrag.query.hybrid import Hit


class BagOfWords:
    """Hashed bag-of-words vectors (a fixed hash: the same buckets in every run): cosine = shared words,
    enough to rank sentences by overlap."""

    def _vec(self, t):
        v = np.zeros(512)
        for w in re.findall(r"[a-z0-9]+", t.lower()):
            v[zlib.crc32(w.encode()) % 512] += 1.0
        return v

    def embed_queries(self, texts):
        return np.stack([self._vec(t) for t in texts])

    embed_passages = embed_queries


def hit(title, text):
    return Hit(id=title, doc_id=title, kind="chunk", text=text, score=1.0, title=title)


@pytest.mark.parametrize("q, kind", [
    ("How many members does the Florida Senate have?", "number"),
    ("In what year was the university founded?", "date"),
    ("When did the war end?", "date"),
    ("Where was the band formed?", "place"),
    ("What county is Ron Teachworth from?", "place"),
    ("Who directed the film?", "person"),
    ("The university is named after whom?", "person"),
    ("Which comic series involves Nick Fury?", "entity"),
    ("Are both Cooking Light and Vibe magazines?", "yesno"),
    ("Who was born first, Jan Rajchman or Gerald Edelman?", "choice"),
    ("Between Greyia and Calibanus, which genus contains more species?", "choice"),
    ("How is the BM25 score normalised in the hybrid retrieval score?", "other"),
])
def test_question_types(q, kind):
    assert T.question_type(q).kind == kind


def test_choice_options_and_comparison():
    t = T.question_type("Who was born first, Jan Rajchman or Gerald Edelman?")
    assert t.options == ("Jan Rajchman", "Gerald Edelman") and t.target == "earlier"
    t = T.question_type("Between Greyia and Calibanus, which genus contains more species?")
    assert t.options == ("Greyia", "Calibanus") and t.target == "more"


def test_candidates_by_type_leave_out_the_question_words():
    s = "In 1990, The Shins met Jon Sortland at Madison Square Garden on July 4, 1776 and sold 1,200 records."
    assert [s[a:b] for a, b in T.candidates(s, "date")] == ["1990", "July 4, 1776"]
    assert [s[a:b] for a, b in T.candidates(s, "number")] == ["4", "1,200"]
    names = [s[a:b] for a, b in T.candidates(s, "person", {"jon", "sortland"})]
    assert "Jon Sortland" not in names and "Madison Square Garden" in names and "Shins" in names


def test_a_date_question_takes_the_sentence_with_a_date_and_its_span():
    hits = [hit("Tokarev", "Sergei Tokarev was a Soviet ethnographer. He was a professor at Moscow State University."),
            hit("Moscow State University", "Moscow State University is a university in Moscow. "
                                           "It was founded in 1755 by Mikhail Lomonosov.")]
    q = "In what year was the university where Sergei Tokarev was a professor founded?"
    ex = X.extract(q, hits, BagOfWords())
    assert ex.kind == "date" and ex.span == "1755" and ex.span_citation == 2
    assert any("1755" in s for s in ex.sentences) and len(ex.sentences) <= 2 and 2 in ex.citations


def test_the_second_sentence_comes_from_the_linked_passage():
    hits = [hit("Black Book", "Black Book is a war film that starred the actress Carice van Houten."),
            hit("Unrelated", "A different actress of French heritage sang."),
            hit("Carice van Houten", "Carice van Houten is a Dutch actress.")]
    ex = X.extract("Black Book starred the actress of what heritage?", hits, BagOfWords())
    assert ex.citations == [1, 3] and ex.span == "Dutch"     # the passage the first names, not the look-alike


def test_a_choice_cites_both_sides_and_picks_by_the_comparison():
    hits = [hit("Jan Rajchman", "Jan Rajchman was born on August 1, 1911 in London."),
            hit("Gerald Edelman", "Gerald Edelman was born on July 1, 1929 in New York.")]
    ex = X.extract("Who was born first, Jan Rajchman or Gerald Edelman?", hits, BagOfWords())
    assert ex.kind == "choice" and ex.span == "Jan Rajchman" and sorted(ex.citations) == [1, 2]
    ex = X.extract("Who was born later, Jan Rajchman or Gerald Edelman?", hits, BagOfWords())
    assert ex.span == "Gerald Edelman" and ex.span_citation == 2


def test_yes_no():
    hits = [hit("Cooking Light", "Cooking Light is an American monthly food magazine."),
            hit("Vibe", "Vibe is an American music and entertainment magazine.")]
    assert X.extract("Are both Cooking Light and Vibe magazines?", hits, BagOfWords()).span == "yes"
    hits[1] = hit("Vibe", "Vibe is a 1996 album by a rock band.")
    assert X.extract("Are both Cooking Light and Vibe magazines?", hits, BagOfWords()).span == "no"


def test_a_how_question_gets_sentences_and_no_span():
    hits = [hit("a", "The score adds three terms. BM25 scores are divided by their maximum over the items."),
            hit("b", "Cosine is an inner product.")]
    ex = X.extract("How are BM25 scores normalised?", hits, BagOfWords())
    assert ex.kind == "other" and ex.span == "" and "divided by their maximum" in ex.sentences[0]


def test_no_sentences_is_unknown():
    ex = X.extract("Who?", [], BagOfWords())
    assert ex.text == "unknown" and ex.citations == [] and ex.span == ""


def test_no_llm_unless_one_is_named(monkeypatch):
    from contextrag.llm import make_client
    from contextrag.query import _resolve_llm
    from contextrag.query.answering import prepare_answer

    monkeypatch.delenv("CONTEXTRAG_LLM", raising=False)
    assert make_client(None) is None                     # never the embedded 135M model by default
    client, style, _, _ = prepare_answer(None, None, None, None, _resolve_llm)
    assert client is None and style == "extractive"
    assert prepare_answer(None, "span", None, None, _resolve_llm)[1] == "span"
    with pytest.raises(ValueError, match="needs an LLM"):
        prepare_answer(None, "short", None, None, _resolve_llm)


# ---- real HotpotQA questions, each answered from its own ten paragraphs (gold and distractors)
def _hotpot_question(text):
    import json

    from shared_data import hotpot_file

    q = next(q for q in json.loads(hotpot_file().read_text()) if q["question"] == text)
    return q, [hit(t, "".join(s)) for t, s in q["context"]]


@pytest.mark.parametrize("question", [
    "Are Dogo Cubano and the Dutch Shepherd both breeds of dog?",              # yes: each one's passage says so
    "Were Ulrich Walter and Léopold Eyharts both from Germany?",               # no: one is French
])
def test_yes_no_on_hotpotqa(question):
    q, hits = _hotpot_question(question)
    ex = X.extract(q["question"], hits, BagOfWords())
    assert ex.kind == "yesno" and ex.span == q["answer"]
    assert len(ex.sentences) == 2 and len(set(ex.citations)) == 2      # one sentence about each entity


@pytest.mark.parametrize("question", [
    "Who was born first, Javier Frana or Sherwood Stewart?",                   # birth years from their passages
    "Which aired first, Life After People or Werner Herzog Eats His Shoe?",
    "Which dog is believed to dispel ghosts and evil spirits, Segugio Italiano or Sapsali?",   # no date to compare
])
def test_which_of_two_on_hotpotqa(question):
    q, hits = _hotpot_question(question)
    ex = X.extract(q["question"], hits, BagOfWords())
    assert ex.kind == "choice" and ex.span == q["answer"]
    assert q["answer"] in hits[ex.span_citation - 1].title       # cited: the chosen option's own passage


def test_what_year_keeps_the_year_of_a_date():
    q, hits = _hotpot_question("The Dogwoman telemovies were created by an actress born in what year?")
    ex = X.extract(q["question"], hits, BagOfWords())
    assert ex.kind == "date" and ex.span == "1961" and any("1961" in s for s in ex.sentences)


def test_question_head_and_name_candidates():
    assert T.question_type("Fighting Cock is produced in what Kentucky county?").head == "county"
    assert T.question_type("What kind of musicians are Mark Gaudet and Jan Axel Blomberg?").head == "musician"
    assert T.question_type("How many members does the Florida Senate have?").head == "member"
    s = "Born on October 14, 1977 in New York City, U. S. he met John Smith in April 1998."
    names = [s[a:b] for a, b in T.candidates(s, "person")]
    assert "New York City" in names and "John Smith" in names           # "New" kept before a name
    assert not any(n.startswith(("October", "April")) or n == "U" for n in names)   # dates, initials: no names


def test_span_prefers_the_asked_noun_and_new_words():
    hits = [hit("Fighting Cock", "Fighting Cock is a bourbon made by Heaven Hill Distilleries in Bardstown."),
            hit("Bardstown", "Bardstown is a city in and the county seat of Nelson County, Kentucky, United States.")]
    ex = X.extract("Fighting Cock is produced in what Kentucky county?", hits, BagOfWords())
    assert ex.span == "Nelson County" and ex.span_citation == 2
    hits = [hit("Giovanna d'Arco", "Giovanna d'Arco is an opera by Giuseppe Verdi."),
            hit("Giuseppe Verdi", "Giuseppe Verdi was an Italian opera composer.")]
    ex = X.extract("Giovanna d'Arco is an opera by a composer of what nationality?", hits, BagOfWords())
    assert ex.span == "Italian"                                           # a demonym when one is asked for


def test_a_possessive_name_is_the_name():
    s = "He was hanged for assisting Benedict Arnold's attempted surrender."
    assert [s[a:b] for a, b in T.candidates(s, "person")] == ["Benedict Arnold"]


# ---- the answer's path: bridge passage first, a title's name, the lead that states the answer
@pytest.mark.parametrize("question, passage, words", [
    # the first sentence names the bridge; the second is the bridge passage's sentence that answers
    ("Carrie Coon plays Margo Dunne in a 2014 film set in what state?", "Gone Girl (film)", "Missouri"),
    ("Mariana Kovacevic used horse placenta treatment to heal the captian of what team?", "Asamoah Gyan",
     "Ghanaian national team"),
    ("Who created the NBC sitcom that Johnny Pemberton appears in as the character Bo Thompson?",
     "Superstore (TV series)", "Justin Spitzer"),
])
def test_the_second_sentence_comes_from_the_bridge_passage(question, passage, words):
    q, hits = _hotpot_question(question)
    ex = X.extract(q["question"], hits, BagOfWords())
    assert len(ex.sentences) == 2 and words in ex.sentences[1], ex.sentences
    assert hits[ex.citations[1] - 1].title == passage and ex.citations[0] != ex.citations[1]


def test_a_title_is_named_without_its_disambiguator():
    assert X._name_of("Chris Evans (actor)") == "Chris Evans" and X._name_of("Palm Springs, Florida") == "Palm Springs"
    assert X._name_of("Peace, Love and Understanding") == "Peace, Love and Understanding"   # a title, no qualifier
    q, hits = _hotpot_question("Mr. & Mrs. Mxyzptlk is an episode of the superhero TV series that originally "
                               "aired on what network?")
    ex = X.extract(q["question"], hits, BagOfWords())    # the episode's passage says "Supergirl", not its title
    assert [hits[n - 1].title for n in ex.citations][1] == "Supergirl (TV series)"


@pytest.mark.parametrize("question, lead", [
    ("Were Halldór Laxness and Timothy Leary from the same country?", "No."),     # Iceland / American
    ("Are the films Gasland from 2010 and Pumping Iron from 1977 both documentaries?", "Yes."),
    ("Which dog is believed to dispel ghosts and evil spirits, Segugio Italiano or Sapsali?", "Sapsali."),
])
def test_a_yes_no_or_choice_answer_states_its_answer_first(question, lead):
    q, hits = _hotpot_question(question)
    ex = X.extract(q["question"], hits, BagOfWords())
    assert ex.text.startswith(lead + " ") and ex.text == " ".join([lead, *ex.sentences])
    assert 1 <= len(ex.sentences) <= 2 and ex.span.lower() == lead[:-1].lower()


def test_typed_answers_have_no_lead_and_unknown_stays_unknown():
    q, hits = _hotpot_question("Carrie Coon plays Margo Dunne in a 2014 film set in what state?")
    ex = X.extract(q["question"], hits, BagOfWords())
    assert ex.lead == "" and ex.text == " ".join(ex.sentences)      # its sentences hold the answer already
    assert X.Extract(span="yes", kind="yesno").text == "unknown"


def test_an_alternative_question_is_a_choice_and_options_are_cut_to_titles():
    t = T.question_type("Was the famous opera comique that was based on a Prosper Merimee novella a comedy or "
                        "a tragedy?")
    assert t.kind == "choice" and t.options[1] == "tragedy"
    assert T.question_type("Are both Cooking Light and Vibe magazines?").kind == "yesno"
    hits = [hit("Reinhold Ewald", "Reinhold Ewald is a German physicist and ESA astronaut."),
            hit("Ernst Messerschmid", "Ernst Messerschmid is a German physicist and former astronaut.")]
    assert X._as_titled("Reinhold Ewald ESA", hits) == "Reinhold Ewald"
    assert X._as_titled("Ernst Messerschmid", hits) == "Ernst Messerschmid"


# ---- sentences whole across initials, what two subjects share, the hop the first sentence names
def test_an_initial_or_a_title_before_a_name_does_not_end_a_sentence():
    from contextrag.sentences import split
    text = ("The Visit is a 2015 American found footage horror film written and directed by M. Night Shyamalan. "
            "Interstate 22 follows the U.S. Route 78 corridor. Harry Lillis \"Bing\" Crosby Jr. (May 3, 1903) "
            "was a singer. It ends in the U.S.")
    assert split(text) == ["The Visit is a 2015 American found footage horror film written and directed by "
                           "M. Night Shyamalan.", "Interstate 22 follows the U.S. Route 78 corridor.",
                           "Harry Lillis \"Bing\" Crosby Jr. (May 3, 1903) was a singer.", "It ends in the U.S."]
    assert split("It was made in 1999. The end.") == ["It was made in 1999.", "The end."]


@pytest.mark.parametrize("question, pair", [
    ("What sport does Simon Aspelin and Thomaz Koch have in common?", ("Simon Aspelin", "Thomaz Koch")),
    ("Pandikona and Berger Blanc Suisse are both what kinds of animals?", ("Pandikona", "Berger Blanc Suisse")),
    ("Who plays in both The True Adventures of Wolfboy and \"The Knick\"?", ("True Adventures of Wolfboy", "Knick")),
    ("In what year did a movie that starred both Nicholas Cage and Cher come out?", ()),    # a third thing
    ("Steve Denton and Albert Costa are both tennis players, which one began playing at the age if five?", ()),
    ("What is the capital of France?", ()),
])
def test_the_subjects_of_a_question_asking_what_two_share(question, pair):
    assert T.shared_subjects(question) == pair


def test_what_two_share_quotes_a_sentence_about_each():
    q, hits = _hotpot_question("Josh Trank and Mike Valerio both work in what industry?")
    ex = X.extract(q["question"], hits, BagOfWords())
    assert len(ex.sentences) == 2 and "Josh Trank" in ex.sentences[0] and "Mike Valerio" in ex.sentences[1]
    assert "entertainment industry" in ex.sentences[1]


@pytest.mark.parametrize("question, passage, words", [
    ("Millennium Greens were funded in part by a what type of lottery?", "National Lottery (United Kingdom)",
     "state-franchised"),
])
def test_the_second_sentence_comes_from_the_passage_the_first_names(question, passage, words):
    q, hits = _hotpot_question(question)
    ex = X.extract(q["question"], hits, BagOfWords())
    assert len(ex.sentences) == 2 and words in ex.sentences[1], ex.sentences
    assert hits[ex.citations[1] - 1].title == passage


@pytest.mark.parametrize("question, words", [
    ("What is the population of the city that Munsonville is in the northwest corner of?", "729"),
    ("Milo Parker starred in which 2014 movie alongside Gillian Anderson?", "Robot Overlords"),
    ("When was the singer of Miss Emily's Picture born?", "August 11, 1946"),
])
def test_the_first_sentence_is_on_the_path_from_what_the_question_names(question, words):
    q, hits = _hotpot_question(question)
    ex = X.extract(q["question"], hits, BagOfWords())
    assert any(words in s for s in ex.sentences), ex.sentences
    path = X._on_path(q["question"], hits)
    assert path[ex.citations[0] - 1] and not all(path)      # a distractor passage is off the path


class Flat:
    """The same vector for every text: the cosine ties, so BM25 alone orders the sentences."""

    def embed_queries(self, texts):
        return np.ones((len(texts), 8))

    embed_passages = embed_queries


def test_sentence_bm25_reads_the_index_stemmer():
    """A question's "score" / "normalised" match a sentence's "scores" / "normalisation" as the index's
    stemmed BM25 matches them: unstemmed, a short sentence holding only "score" wins."""
    hits = [hit("Design", "Weight = the node's selection score. The lattice edges run both ways."),
            hit("Query", "BM25 normalisation divides the scores of every item by their maximum. "
                         "The other terms are added after.")]
    q = "How is the BM25 score normalised in the hybrid score?"
    got = X.extract(q, hits, Flat(), stemmer="english")
    assert got.sentences[0].startswith("BM25 normalisation divides"), got.sentences
    plain = X.extract(q, hits, Flat())
    assert plain.sentences[0].startswith("Weight = the node's selection score"), plain.sentences
    texts = [t for _, t in X.candidates(hits)]
    stemmed = X.scores(q, texts, Flat(), 1.0, 0.0, "english")
    assert stemmed[2] > stemmed[0] and X.scores(q, texts, Flat(), 1.0, 0.0)[2] < 1.0


def test_the_answer_reads_sentences_with_the_index_stemmer(monkeypatch):
    from contextrag import Config
    from contextrag.query import answering

    seen = []
    monkeypatch.setattr(X, "extract", lambda *a, **k: seen.append(k.get("stemmer")) or X.Extract())
    answering._extract(type("Ix", (), {"embedder": Flat()})(), "q?", [hit("A", "a b.")], Config(), "extractive")
    answering._extract(type("Ix", (), {"embedder": Flat()})(), "q?", [hit("A", "a b.")], Config(stemmer=None),
                       "extractive")
    assert seen == [Config().stemmer, None] and seen[0] == "english"


def test_a_window_that_starts_inside_a_sentence_offers_no_tail_as_a_sentence():
    """A later window of a document that begins with a lower-case word is the tail of a sentence: it is
    not quoted as one while whole sentences exist; a document's first window, or one that begins a
    sentence, is read whole."""
    from dataclasses import replace

    tail = Hit(id="d#1", doc_id="d", kind="chunk", score=1.0, title="D", span=(812, 1400),
               text="scores of every item are divided by their maximum. The next sentence is whole.")
    got = X.candidates([tail])
    assert [s for _, s in got] == ["The next sentence is whole."]
    assert [s for _, s in X.candidates([replace(tail, span=(0, 600))])][0].startswith("scores of every")
    assert [s for _, s in X.candidates([replace(tail, text="Scores of every item. More.")])] == [
        "Scores of every item.", "More."]
    only = replace(tail, text="scores of every item are divided by their maximum.")
    assert [s for _, s in X.candidates([only])] == ["scores of every item are divided by their maximum."]
