"""The answers written without an LLM: ``extractive`` (the sentence(s) that answer) and ``span`` (the
name, date or number that answers, with its sentence cited).

Relevance of a sentence: every sentence of the answer's hits (contextrag/sentences.py) is scored as eq. 13
scores a passage, minus the graph term: ``w_bm25 · bm25 / max bm25 + w_cos · cos``, with BM25 (bm25s)
over these sentences only, on the words the index's BM25 reads (its ``Config.stemmer``'s stems), and
the cosine between the index's embedder's question and sentence
embeddings; times its passage's score over the best passage's (:func:`passage_prior`), so a sentence
counts in proportion to the passage that holds it — a look-alike sentence in a weak passage (a
glossary line that repeats the question's words) does not beat the passage the retrieval put first.

Relevance alone picks the sentence that *resembles* the question; the one that *answers* it holds
what the question asks for. So the question is typed first (query/qtype.py: who, when, where, how
many, which of two, yes/no …) and the choice follows the type:

* **which of two / yes-no**: the best sentence about each option (a sentence naming it, or any
  sentence of a passage titled by it), so both sides of the comparison are on the page. An option
  read off the question's capitalised words is cut to the title of a passage it holds ("Neil Jordan
  American" -> "Neil Jordan"). The answer states its span first ("Yes." / "No." / the option), then
  the two sentences as its evidence: those sentences describe both sides and never say which. The span of
  a choice is the option the sentences favour: the earlier date or the larger number when the
  question asks which came first or which has more (each option's value read from its sentences,
  else from its own passage, whose opening usually dates it), else the option whose sentences hold
  more of what the question says of it. The span of a yes/no question is "yes" when each option's
  sentences (with the opening sentence of its own passage, which says what it is) hold at least half
  of the question's other words, "same …" / "different …" comparing the names the two hold (a
  country, a family), else their words; with no two options, when the chosen sentences hold that
  much of the question;
* **what two subjects share** ("What sport do X and Y have in common?", "X and Y are both what?"):
  the best sentence about each, as for a choice (each states the attribute asked of both);
* **a name, date or number**: the first sentence comes from the question's *path* — a passage the
  question names by its title, or one linked to such a passage — before any other passage (a
  distractor that resembles the question is off it), and the sentences that hold a candidate of the
  asked type are preferred to those that do not (a candidate: a span of that type most of whose words
  the question does not already say). The first sentence is the best such sentence. The second says
  what the first leaves out: first from a passage the first sentence names (its title's name is one
  of the sentence's names, and the question does not name it: the next hop), then among the
  sentences of passages *linked* to the first one's (a passage whose title the first one's text names,
  or which names the first one's title, a title counted by its name without its disambiguator:
  "Chris Evans (actor)" is named "Chris Evans"; the bridge of a two-hop question, the passage the
  graph's spreading reaches through the attribute, here the name, the two share), then of the first
  one's own passage (the next hop along the path before more of the same passage), a typed
  one adding a question word the first does not hold before one adding none, then the one holding most
  of those words (idf-weighted over the hits, a sentence counted with its passage's title, as it says
  "it" for its subject) plus its relevance. A sentence of an unlinked passage comes in only when it is
  as relevant as the first passage's runner-up. The span is picked among the two sentences'
  candidates: one that repeats none of the question's words, then one holding the noun the question
  asks for ("Albany County" for "what county", "87 parish churches" for "how many parish churches"), a
  bare demonym ("Italian") first when the question asks a nationality or descent and last unless it
  asks a kind, one named in one sentence only (the one named in both is the link), one with question
  words beside it, a full name for "who", then the second sentence's (where a two-hop path ends), then
  relevance; "what year" keeps the year of a date;
* **anything else** (how, why …): the best sentence, and the best sentence of the next passage when
  it scores at least as high as the runner-up sentence of the winning passage.

No fitted threshold: preferences are orderings (typed before untyped, linked before unlinked, then
relevance), and the one share used, half of the question's words, is a majority, not a fit. An
answer is at most two sentences; each cites its passage, the best sentence first.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np

from .. import sentences
from . import qtype

_STOP = set("""a an the of in on at to for from by with and or is are was were be been being do does did
what which who whom whose when where why how that this these those it its as than then also both same
has have had not no yes can could would should will shall may might must there their they he she his her
him them we our you your i me my into about over under between after before during first""".split())


@dataclass
class Extract:
    """An answer written from the hits: its sentences, their passages and (span style) the span."""
    sentences: list = field(default_factory=list)   # the chosen sentences, best first
    citations: list = field(default_factory=list)   # 1-based hit numbers, in the order of the sentences
    span: str = ""                                  # the span answer ("" when the question asks for none)
    span_citation: int | None = None                # the hit whose sentence holds the span
    kind: str = "other"                             # the question's type (query/qtype.py)

    @property
    def lead(self) -> str:
        """What the answer states before its evidence: "Yes." / "No." for a yes/no question and the
        chosen option for a which-of-two, which the sentences alone never say (they describe both
        sides); "" for the other types, whose sentences hold their answer themselves."""
        if not self.span or not self.sentences or self.kind not in ("yesno", "choice"):
            return ""
        t = self.span.strip()
        return t[:1].upper() + t[1:] + ("" if t.endswith((".", "!", "?")) else ".")

    @property
    def text(self) -> str:
        if not self.sentences:
            return "unknown"
        return " ".join(([self.lead] if self.lead else []) + list(self.sentences))


def candidates(hits) -> list[tuple[int, str]]:
    """(hit number, sentence) for every whole sentence of the hits, hit numbers 1-based. Pieces that
    end without a full stop (headings, list items, a sentence cut at the chunk's end) and the first
    piece of a chunk whose window began inside a sentence (:func:`_starts_inside_a_sentence`) are
    used only when the hits hold no whole sentence."""
    every, whole = [], []
    for n, h in enumerate(hits, 1):
        pieces = sentences.split(h.text)
        cut = _starts_inside_a_sentence(h)
        for i, s in enumerate(pieces):
            every.append((n, s))
            if sentences.last_end(s) == len(s) and not (i == 0 and cut):
                whole.append((n, s))
    return whole or every


def _starts_inside_a_sentence(hit) -> bool:
    """A chunk that begins after its document's start (a later window) with a lower-case word or a
    closing mark (",", ")", ...) begins inside a sentence: its first piece is the tail of one."""
    span = getattr(hit, "span", None)
    t = (getattr(hit, "text", "") or "").lstrip()
    return bool(span) and span[0] > 0 and bool(t) and (t[0].islower() or t[0] in ",;:)]}")


def scores(question: str, texts: list[str], embedder, w_bm25: float, w_cos: float,
           stemmer: str | None = None) -> np.ndarray:
    """(len(texts),) eq. 13 without the graph term, over these sentences; BM25 reads the words as the
    index does (their ``stemmer`` stems: "scores" matches "score", "normalisation" "normalised")."""
    out = np.zeros(len(texts), dtype=np.float64)
    if not texts:
        return out
    if w_bm25:
        from ._view import _OwnBM25
        from .bm25 import normalise_max

        out += w_bm25 * normalise_max(_OwnBM25(texts, stemmer)(question)).astype(np.float64)
    if w_cos:
        q = np.asarray(embedder.embed_queries([question]), dtype=np.float64)
        E = np.asarray(embedder.embed_passages(texts), dtype=np.float64)
        q /= max(np.linalg.norm(q), 1e-12)
        E /= np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
        out += w_cos * (E @ q[0])
    return out


def passage_prior(hits, cands) -> np.ndarray:
    """(len(cands),) each sentence's passage score over the best passage's, in [0, 1]: a sentence
    answers when it is relevant itself *and* sits in a passage the retrieval (BM25, cosine and the
    graph's spreading) ranks high, so the two are multiplied (the product t-norm: both must hold)."""
    sc = np.array([float(h.score) for h in hits], dtype=np.float64)
    top = sc.max() if sc.size else 0.0
    if not np.isfinite(top) or top <= 0:
        return np.ones(len(cands))
    return np.array([min(max(sc[n - 1] / top, 0.0), 1.0) for n, _ in cands])


def content_words(text: str) -> set[str]:
    return {w for w in qtype.words(text) if w not in _STOP}


def _norm(text: str) -> str:
    return " " + " ".join(qtype.words(text)) + " "


def _mentions(sentence: str, title: str, option: str) -> float:
    """How much a sentence (of a passage titled ``title``) is about ``option``: 1 when it names the
    option or its passage is titled by it, else the share of the option's words it contains."""
    o = _norm(option)
    if o.strip() and (o in _norm(sentence) or o == _norm(title)):
        return 1.0
    ow = content_words(option) or set(qtype.words(option))
    return len(ow & set(qtype.words(sentence))) / len(ow) if ow else 0.0


def _name_of(title: str) -> str:
    """A title without its disambiguator: "Chris Evans (actor)" -> "Chris Evans", "Palm Springs,
    Florida" -> "Palm Springs" (the text names the thing, not the qualifier). A comma is a qualifier
    only before a name (capitalised words): "Peace, Love and Understanding" stays whole."""
    t = re.sub(r"\s*\([^)]*\)\s*$", "", title or "")
    head, _, qual = t.partition(",")
    if qual and head.strip() and all(w[:1].isupper() for w in qual.split()):
        return head
    return t


def _as_titled(option: str, hits) -> str:
    """An option read off the question's capitalised words, cut to the name of the passage it names
    when it holds one and more ("Neil Jordan American" -> "Neil Jordan": the question names the
    passages' subjects; the word after the name belongs to what is asked of it)."""
    o = _norm(option)
    inside = [_name_of(h.title or "") for h in hits]
    inside = [t for t in inside if _norm(t).strip() and _norm(t) in o and _norm(t) != o]
    return max(inside, key=len) if inside else option


def _linked(a, b) -> bool:
    """Passages a and b are linked when one names the other's title (the bridge of a two-hop question)."""
    ta, tb = _norm(_name_of(getattr(a, "title", "") or "")), _norm(_name_of(getattr(b, "title", "") or ""))
    return bool((tb.strip() and tb in _norm(a.text)) or (ta.strip() and ta in _norm(b.text)))


def extract(question: str, hits, embedder, w_bm25: float = 0.3, w_cos: float = 0.5,
            stemmer: str | None = None) -> Extract:
    """The sentences that answer ``question`` from ``hits`` and the span that answers it (the rules in
    the module docstring). ``stemmer``: the index's (``Config.stemmer``), for the sentences' BM25."""
    cands = candidates(hits)
    qt = qtype.question_type(question)
    if not cands:
        return Extract(kind=qt.kind)
    s = scores(question, [t for _, t in cands], embedder, w_bm25, w_cos, stemmer) * passage_prior(hits, cands)
    if qt.options:
        qt = dataclasses.replace(qt, options=tuple(_as_titled(o, hits) for o in qt.options))
    if qt.kind in ("choice", "yesno") and len(qt.options) == 2:
        ex = _two_sided(question, qt, hits, cands, s)
        if ex is not None:
            return ex
    pair = qtype.shared_subjects(question) if qt.kind in qtype.SPAN_TYPES + ("other",) else ()
    if pair:
        ex = _shared(question, qt, tuple(_as_titled(o, hits) for o in pair), hits, cands, s)
        if ex is not None:
            return ex
    if qt.kind in qtype.SPAN_TYPES:
        return _typed(question, qt, hits, cands, s)
    chosen = select(cands, s)
    if qt.kind == "choice" and len(qt.options) == 2:     # an option the hits hardly name: still one of the two
        span, _ = _choose(question, qt, [" ".join(t for _, t in cands if _mentions(t, "", o) >= 0.5)
                                         for o in qt.options])
        return _finish(cands, chosen, qt.kind, span, cands[chosen[0]][0])
    if qt.kind == "yesno":          # no two options to hold apart: does what the sentences say hold the claim?
        return _finish(cands, chosen, qt.kind, _yes_no(question, qt, [" ".join(cands[i][1] for i in chosen)]),
                       cands[chosen[0]][0])
    return _finish(cands, chosen, qt.kind)


def _finish(cands, chosen: list[int], kind: str, span: str = "", span_citation=None) -> Extract:
    cites: list[int] = []
    for i in chosen:
        if cands[i][0] not in cites:
            cites.append(cands[i][0])
    return Extract([cands[i][1] for i in chosen], cites, span, span_citation, kind)


def select(cands, s) -> list[int]:
    """The best sentence, plus the best sentence of the next best passage when it scores at least as
    high as the runner-up sentence of the winning passage."""
    if not cands:
        return []
    best = int(np.argmax(s))
    hit = cands[best][0]
    own = [s[i] for i, (n, _) in enumerate(cands) if n == hit and i != best]
    others = [i for i, (n, _) in enumerate(cands) if n != hit]
    if not own or not others:
        return [best]
    second = max(others, key=lambda i: (s[i], -i))
    return [best, second] if s[second] >= max(own) else [best]


def _typed(question, qt, hits, cands, s) -> Extract:
    qwords = set(qtype.words(question))
    spans = [qtype.candidates(t, qt.kind, qwords) for _, t in cands]
    qc = content_words(question)

    def fresh(t, a, b):     # a candidate most of whose words the question does not already say
        w = [x for x in qtype.words(t[a:b]) if x not in _STOP]
        return bool(w) and 2 * sum(x in qc for x in w) < len(w)

    has = np.array([any(fresh(cands[i][1], a, b) for a, b in sp) for i, sp in enumerate(spans)])
    path = _on_path(question, hits)
    first = min(range(len(cands)), key=lambda i: (not path[cands[i][0] - 1], not has[i], -s[i], i))
    h1, n1 = hits[cands[first][0] - 1], cands[first][0]
    # the second sentence says what the first leaves out: the question's words the first does not
    # hold (idf-weighted, with its passage's title), from the first one's passage or one linked to it
    # (an unlinked passage only as relevant as the first passage's runner-up, as in :func:`select`)
    idf = _idf(question, hits)
    known = _words_of(cands[first][1], h1)
    left = {w: v for w, v in idf.items() if w not in known}
    total = sum(left.values()) or 1.0

    def rest(i):
        w = _words_of(cands[i][1], hits[cands[i][0] - 1])
        return sum(v for t, v in left.items() if t in w) / total

    def near(i):
        return cands[i][0] == n1 or _linked(h1, hits[cands[i][0] - 1])

    def key(i):             # typed, adds a word the first lacks, then how much it adds and its relevance
        return (not has[i], rest(i) == 0, -(rest(i) + s[i]), i)

    qn = _norm(question)
    f1names = {_norm(cands[first][1][a:b]) for a, b in qtype.candidates(cands[first][1], "entity")}

    def hop(i):             # a passage the first sentence names (a name of it) and the question does not
        t = _norm(_name_of(hits[cands[i][0] - 1].title or ""))
        return cands[i][0] != n1 and bool(t.strip()) and t in f1names and t not in qn

    second = min((i for i in range(len(cands)) if i != first),
                 key=lambda i: (key(i)[0], not hop(i), not near(i), cands[i][0] == n1, *key(i)[1:]), default=None)
    if second is not None and not near(second):
        # an unlinked passage's sentence comes in as in :func:`select`: when it is as relevant as
        # anything else the first sentence's passage has to offer; else the best of that passage
        own = [s[i] for i, (n, _) in enumerate(cands) if n == n1 and i != first]
        if own and s[second] < max(own):
            second = min((i for i in range(len(cands)) if i != first and near(i)), key=key, default=None)
    chosen = [first] + ([second] if second is not None else [])
    span, at = _best_span(cands, s, spans, chosen, qt, content_words(question))
    return _finish(cands, chosen, qt.kind, span, cands[at][0] if at is not None else None)


def _on_path(question: str, hits) -> list[bool]:
    """Per hit: is it on the question's path, a passage the question names by its title or one linked
    to such a passage (a hop from what the question is about)? All True when the question names no
    hit (nothing to anchor a path)."""
    q = _norm(question)
    named = [bool(t.strip()) and t in q for t in (_norm(_name_of(h.title or "")) for h in hits)]
    if not any(named):
        return [True] * len(hits)
    return [named[j] or any(named[k] and _linked(hits[k], hits[j]) for k in range(len(hits)))
            for j in range(len(hits))]


def _words_of(sentence: str, hit) -> set[str]:
    """A sentence's content words with its passage's title's (a sentence says "it" for its subject)."""
    return _stems(content_words(sentence) | content_words(getattr(hit, "title", "") or ""))


def _idf(question, hits) -> dict:
    """The question's content words (stemmed) with their idf over the hits (each hit a document)."""
    docs = [_stems(content_words(h.text) | content_words(h.title or "")) for h in hits]
    n = len(docs)
    out = {}
    for w in _stems(content_words(question)):
        df = sum(w in d for d in docs)
        out[w] = float(np.log(1.0 + (n - df + 0.5) / (df + 0.5)))
    return out


_DEMONYM = re.compile(r"[A-Z][a-z]+(?:an|ian|ean|ish|ese|ic|i|ch)")
# what a single-word demonym ("Italian", "Dutch") answers; for a question asking a kind of thing it may,
# for any other it describes, not names
_DEMONYM_HEADS = {"nationality", "heritage", "descent", "origin", "ethnicity", "language", "citizenship",
                  "ancestry", "background"}
_KIND_HEADS = {"kind", "type", "genre", "cuisine", "religion", "style", "sort", "class"}


def _best_span(cands, s, spans, chosen, qt=None, qwords=frozenset()) -> tuple[str, int | None]:
    """The candidate of the chosen sentences that answers: one that repeats none of the question's
    words before one that does (the question names its subject, not its answer), one holding the noun
    the question asks for ("Albany County" for "what county"), a bare demonym first when the question
    asks a nationality and last unless it asks a kind, one named in only one sentence before one
    named in both (their link), one with question words beside it ("directed by Rob Reiner" for
    "directed by whom"), a full name for "who", a candidate of the second sentence before one of the
    first (where a two-hop path ends), then relevance, then the leftmost."""
    qstems = _stems(qwords)
    best: dict[str, list] = {}
    for i in chosen:
        t = cands[i][1]
        for a, b in spans[i]:
            key = _norm(t[a:b])
            near = _stems(w for w in qtype.words(t[max(0, a - 40):a] + " " + t[b:b + 40]) if w not in _STOP)
            ctx = len(near & qstems)            # question words within ~40 characters of it
            e = best.setdefault(key, [t[a:b], i, -np.inf, set(), 0, set()])
            e[3].add(i)
            e[4] = max(e[4], ctx)
            e[5] |= _stems(qtype.words(t[a:b]) + qtype.words(t[b:b + 30])[:3])   # it, and what it counts
            if s[i] > e[2]:
                e[0], e[1], e[2] = t[a:b], i, s[i]
    if not best:
        return "", None
    head = set(qt.head.split()) if qt is not None else set()

    def repeats(e):         # most of its words are the question's own (the head noun aside: "Albany County")
        w = [x for x in qtype.words(e[0]) if x not in _STOP and not _stems([x]) & head]
        return bool(w) and 2 * sum(x in qwords for x in w) >= len(w)

    def demonym(e):         # asked for ("what nationality"): a demonym first; else (but a kind) last
        d = bool(_DEMONYM.fullmatch(e[0].strip()))
        return not d if head & _DEMONYM_HEADS else d and not head & _KIND_HEADS

    def headed(e):          # it holds the noun the question asks for ("Albany County" for "what county",
        # "87 parish churches" for "how many parish churches")
        return bool((e[5] if qt is not None and qt.kind == "number" else _stems(qtype.words(e[0]))) & head)

    def key(e):
        return (repeats(e), not headed(e), demonym(e), len(e[3]) > 1 and len(best) > 1, e[4] == 0,
                qt is not None and qt.kind == "person" and len(e[0].split()) < 2, -chosen.index(e[1]), -e[2])

    pick = min(best.values(), key=key)
    span = pick[0].strip()
    if qt is not None and qt.kind == "date" and "year" in head:
        m = re.search(r"\b\d{3,4}s?\b", span)          # "what year": the year of a full date
        span = m.group() if m else span
    return span, pick[1]


def _two_sided(question, qt, hits, cands, s) -> Extract | None:
    """Which of two / yes-no: the best sentence about each option."""
    picks = []
    for opt in qt.options:
        m = [(_mentions(t, hits[n - 1].title or "", opt), s[i], i) for i, (n, t) in enumerate(cands)]
        top = max(m, key=lambda x: (x[0], x[1], -x[2]))
        if top[0] < 0.5:
            return None
        picks.append(top[2])
    if picks[0] == picks[1]:
        chosen = [picks[0]]
    else:
        chosen = picks
    if qt.kind == "yesno":
        span = _yes_no(question, qt, [_about(opt, hits, cands, i) for opt, i in zip(qt.options, picks)])
        return _finish(cands, chosen, qt.kind, span, cands[chosen[0]][0])
    span, at = _choose(question, qt, [_about(opt, hits, cands, i) for opt, i in zip(qt.options, picks)],
                       [_passage_of(opt, hits) for opt in qt.options])
    return _finish(cands, chosen, qt.kind, span, cands[picks[at]][0])


def _shared(question, qt, pair, hits, cands, s) -> Extract | None:
    """What two subjects share ("What sport does X and Y have in common?"): the best sentence about
    each (as for a choice), where each states the attribute the question asks of both; the span is
    the candidate of the asked type the two sentences hold, else None (fewer than both named)."""
    qwords = set(qtype.words(question))
    spans = [qtype.candidates(t, qt.kind, qwords) for _, t in cands]
    picks = []
    for opt in pair:
        m = [(_mentions(t, hits[n - 1].title or "", opt), s[i], i) for i, (n, t) in enumerate(cands)]
        top = max(m, key=lambda x: (x[0], x[1], -x[2]))
        if top[0] < 0.5:
            return None
        picks.append(top[2])
    chosen = picks[:1] if picks[0] == picks[1] else picks
    if qt.kind not in qtype.SPAN_TYPES:
        return _finish(cands, chosen, qt.kind)
    span, at = _best_span(cands, s, spans, chosen, qt, content_words(question))
    return _finish(cands, chosen, qt.kind, span, cands[at][0] if at is not None else None)


def _passage_of(option: str, hits) -> str:
    """The text of the passage titled by ``option`` ("" when no hit is)."""
    o = _norm(option)
    return next((h.text for h in hits if _norm(h.title or "") == o), "")


def _about(option: str, hits, cands, pick: int) -> str:
    """What the hits say of ``option``: its best sentence, and the opening sentence of a passage titled
    by it (where a passage says what its subject is: "X is a breed of dog")."""
    o = _norm(option)
    lead = next((t for n, t in cands if _norm(hits[n - 1].title or "") == o), "")
    return cands[pick][1] if lead == cands[pick][1] else f"{cands[pick][1]} {lead}".strip()


def _first_value(text: str, kind: str) -> float | None:
    if kind == "date":
        m = re.search(r"\b(1\d{3}|20\d{2}|\d{3})\b", text)
        return float(m.group(1)) if m else None
    m = qtype._NUMBER.search(text)
    if not m or not re.match(r"[\d$£€]", m.group()):
        return None
    try:
        return float(re.sub(r"[^\d.]", "", m.group()) or "nan")
    except ValueError:
        return None


def _choose(question, qt, texts, passages=None) -> tuple[str, int]:
    """(option, index of its sentence): the earlier date for "first / older", the later for "later /
    younger", the larger number for "more", the smaller for "fewer" (each option's value read from its
    sentences, else from its own passage); when there is no comparison or no value to compare, the
    option whose sentences hold more of what the question says of it; else the first option."""
    if qt.target:
        kind = "date" if qt.target in ("earlier", "later") else "number"
        v = []
        for j, t in enumerate(texts):
            x = _first_value(t, kind)
            if x is None and passages and passages[j]:
                x = _first_value(passages[j], kind)
            v.append(x)
        if all(x is not None for x in v) and v[0] != v[1]:
            pick_small = qt.target in ("earlier", "fewer")
            i = int(np.argmin(v) if pick_small else np.argmax(v))
            return qt.options[i], i
    opts = _roots(set().union(set(), *(qtype.words(o) for o in qt.options)))
    rest = _roots(content_words(question)) - opts
    share = [len(rest & _roots(qtype.words(t))) for t in texts]
    i = int(np.argmax(share)) if share[0] != share[1] else 0
    return qt.options[i], i


def _stems(words) -> set[str]:
    """Words without a plural "s" ("magazines" meets "magazine")."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in words}


def _roots(words) -> set[str]:
    """Word roots for matching a claim against a sentence: the first five letters ("documentaries"
    meets "documentary", "novelists" meets "novels")."""
    return {w[:5] for w in words}


def _yes_no(question, qt, texts) -> str:
    """"yes" when what the question says of the options holds for each: every option's sentences
    hold at least half of the question's own words beyond the options (their roots); a "same …"
    question: the options' sentences share a word beyond the question's ("different …": they do not)."""
    opts = _roots(set().union(set(), *(qtype.words(o) for o in qt.options)))
    q = _roots(content_words(question) - {"both", "either", "each", "all"})
    rest = q - opts
    same = re.search(r"\bsame\b", question, flags=re.IGNORECASE)
    differ = re.search(r"\bdiffer(?:ent|ently|s)?\b", question, flags=re.IGNORECASE)
    if (same or differ) and len(texts) == 2:
        # what the two have in common: the names they hold (a country, a family, a city) when both
        # hold one, else their words
        qw = set(qtype.words(question)) | set(qtype.words(" ".join(qt.options)))
        a, b = ({_norm(t[i:j]) for i, j in qtype.candidates(t, "entity", qw)} for t in texts)
        if not (a and b):
            a, b = (_roots(content_words(t)) - opts - q for t in texts)
        shared = bool(a & b)
        return "yes" if shared == bool(same) else "no"
    if not rest:
        return "yes"
    share = [len(rest & _roots(qtype.words(t))) / len(rest) for t in texts]
    return "yes" if min(share) >= 0.5 else "no"
