"""What a question asks for, and the candidates of that kind in a sentence: the typing behind the
extractive and span answers (query/extractive.py). Regular expressions over the question's wording and
the sentence's surface (capitalisation, digits, month names): no model, no tagger, any language that
capitalises names and writes numbers in digits.

Question types (:func:`question_type`):

* ``yesno``   — starts with an auxiliary verb ("Are both …", "Was X …") and offers no "X or Y";
  answered "yes" or "no";
* ``choice``  — names two options ("… first, X or Y?", "Between X and Y, which …", "Was it X or Y?");
  the answer is one;
* ``number``  — how many / how much / how old / what percentage …;
* ``date``    — when / what year / which century …;
* ``place``   — where / what city / which country …;
* ``person``  — who / whom / whose;
* ``entity``  — any other what / which question (a name, a title, a group …);
* ``other``   — how / why / anything else: answered by the sentence, not a span.

A candidate (:func:`candidates`) is a ``(start, end)`` character span of a sentence: numbers for
``number``, dates and years for ``date``, runs of capitalised words (with the connectors of names:
"of", "the", "de", "von" …) for the name types, without dates ("October 14"), lone initials and a
possessive's "'s". Candidates made only of the question's own words are dropped: the answer is what
the question does not already say.

A question asking what two subjects share ("What sport does X and Y have in common?", "X and Y are
both what kind of animal?") names them (:func:`shared_subjects`); the extractive answer quotes a
sentence about each.

A what / which / how many question also names the thing it asks for (``QuestionType.head``: "what
Kentucky county" -> "county"), which the span prefers a candidate to hold (query/extractive.py).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

NAME_TYPES = ("person", "place", "entity")
SPAN_TYPES = ("number", "date") + NAME_TYPES

_AUX = r"(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|shall|may|might|must)"
_RULES = (      # first match wins: the more specific wording before the generic one
    ("number", r"\bhow (?:many|much|long|old|tall|high|big|large|far|deep|wide|heavy|often)\b|"
               r"\bwhat (?:number|percentage|percent|proportion|amount|age|population|size)\b|\bpopulation\b"),
    ("date", r"^when\b|\bwhen (?:was|were|did|is|does|do|will|had|has)\b|"
             r"\b(?:what|which|in what|in which) (?:year|years|date|day|month|decade|century|era|season)\b"),
    ("place", r"^where\b|\bwhere (?:is|was|were|are|did|does|do)\b|"
              r"\b(?:what|which) (?:city|country|state|town|village|county|province|region|continent|"
              r"place|island|river|location|nation|capital|borough|district|area)\b"),
    ("person", r"^(?:who|whom|whose)\b|\b(?:who|whom|whose)\b"),
    ("entity", r"^(?:what|which)\b|\b(?:what|which)\b|^name\b"),
)
_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
           "Jan\\.?|Feb\\.?|Mar\\.?|Apr\\.?|Jun\\.?|Jul\\.?|Aug\\.?|Sep\\.?|Sept\\.?|Oct\\.?|Nov\\.?|Dec\\.?")
_DATE = re.compile(rf"\b(?:\d{{1,2}}\s+(?:{_MONTHS})\s+\d{{3,4}}|(?:{_MONTHS})\s+\d{{1,2}},?\s+\d{{3,4}}|"
                   rf"(?:{_MONTHS})\s+\d{{3,4}}|\d{{3,4}}s|1\d{{3}}|20\d{{2}}|\d{{1,2}}(?:st|nd|rd|th)\s+century)\b")
_DATE_OR_DAY = re.compile(rf"\b(?:{_MONTHS})(?:\s+\d{{1,4}})+\b|\b\d{{1,2}}\s+(?:{_MONTHS})\b")
_NUMBER_WORDS = ("one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
                 "fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|"
                 "eighty|ninety|hundred|thousand|dozen")
_NUMBER = re.compile(rf"(?<![\w.])(?:\$|£|€)?\d(?:[\d,]*\d)?(?:\.\d+)?(?:\s*(?:%|percent|million|billion|thousand|"
                     rf"hundred))?(?![\w])|\b(?:{_NUMBER_WORDS})(?:[\s-](?:{_NUMBER_WORDS}))*\b", re.IGNORECASE)
# a name: capitalised words (initials, hyphens, apostrophes, digits after the first word), joined by
# the small words names contain
_CAP = r"(?:[A-Z][\w'’.-]*|\d[\w'’.-]*)"
_NAME = re.compile(rf"\b[A-Z][\w'’-]*(?:\.(?=\s))?(?:\s+(?:(?:of|the|de|du|del|della|da|di|von|van|der|den|"
                   rf"le|la|los|las|y|&)\s+)*{_CAP})*")
# capitalised words that start sentences or refer back, never an answer by themselves
_NOT_NAMES = set("""a an the this that these those it its he she his her they their them we our you your i
in on at by for from with of to as after before during when while where which who whom whose what how
there here then also but and or so if although though however since because both each every some many
most several other such one two three first second third last next new old not no yes may june
""".split())
_WORD = re.compile(r"[a-z0-9]+")
_YESNO_FIRST = re.compile(rf"^{_AUX}\b", re.IGNORECASE)
_OR = re.compile(r"\s+or\s+")


@dataclass(frozen=True)
class QuestionType:
    kind: str                        # yesno, choice, number, date, place, person, entity, other
    options: tuple = ()              # the two options of a choice (or a yes/no question comparing two)
    target: str = ""                 # what a choice compares on ("first", "more" …): the comparison's word
    head: str = ""                   # the noun a what/which question asks for ("year", "nationality" …)


def words(text: str) -> list[str]:
    return _WORD.findall((text or "").lower())


def question_type(question: str) -> QuestionType:
    """The question's type and, for a choice between two, its options."""
    q = " ".join((question or "").split()).strip()
    low = q.lower()
    options = _options(q)
    if _YESNO_FIRST.match(low) and len(options) == 2 and _OR.search(q):
        # "Was it a comedy or a tragedy?": an alternative question, answered by one of its options
        return QuestionType("choice", options, _comparison(low))
    if _YESNO_FIRST.match(low):
        names = [m.group() for m in _NAME.finditer(q[1:])]      # past the capitalised first word
        return QuestionType("yesno", options or tuple(_clean_option(n) for n in names[:2]) if len(names) >= 2
                            else options)
    if len(options) == 2 and re.search(r"\b(?:which|who|what|whose)\b", low):
        return QuestionType("choice", options, _comparison(low))
    for kind, pat in _RULES:
        if re.search(pat, low):
            return QuestionType(kind, head=_head(q))
    return QuestionType("other", head=_head(q))


_HEAD_STOP = set("""of in on at to for from by with and or is are was were be been do does did has have had
can could would will that which who whom whose where when what the a an first also both most only""".split())


def _head(q: str) -> str:
    """The common nouns a what / which / how many question asks for, up to four words, stemmed, without the
    names in it ("what kind of musicians" -> "musician", "which major international airport in" ->
    "major international airport", "what Kentucky county" -> "county"), or ""."""
    m = re.search(r"\b(?:[Ww]hat|[Ww]hich|[Hh]ow many|[Hh]ow much)\s+(?:(?:kind|type|sort|class)s?\s+of\s+)?"
                  r"((?:[\w-]+\s*){1,4})", q)
    if not m:
        return ""
    out = []
    for w in m.group(1).split():
        low = w.lower()
        if low in _HEAD_STOP or re.fullmatch(_AUX, low):
            break
        if not w[0].isupper():
            out.append(low[:-1] if len(low) > 3 and low.endswith("s") and not low.endswith("ss") else low)
    return " ".join(out)


def _options(q: str) -> tuple:
    """The two things a question compares: "between X and Y", or "X or Y" at the end."""
    body = q.rstrip(" ?.!")
    m = re.search(r"\bbetween\s+(.+?)\s+and\s+(.+?)(?:,|\?|$)", body, flags=re.IGNORECASE)
    if m:
        return _pair(_clean_option(m.group(1)), _clean_option(m.group(2)))
    parts = _OR.split(body)
    if len(parts) != 2:
        return ()
    left, right = parts
    right = re.split(r",|\?", right)[0]
    if "," in left:                                   # "Who was born first, X or Y?"
        left = left.rsplit(",", 1)[1]
    else:                                             # "Which is older X or Y?": the name before "or"
        m = list(_NAME.finditer(left))
        left = left[m[-1].start():] if m else left.split()[-1] if left.split() else left
    return _pair(_clean_option(left), _clean_option(right))


_COMMON = re.compile(r"\bboth\b|\bin common\b|\bcommon\b|\bshare[sd]?\b", re.IGNORECASE)


def shared_subjects(question: str) -> tuple:
    """The two subjects of a question asking what they share ("What sport does Simon Aspelin and
    Thomaz Koch have in common?", "Pandikona and Berger Blanc Suisse are both what kinds of animals?"):
    two names joined by "and" in a question saying "both", "common" or "share"; else ()."""
    q = " ".join((question or "").split())
    if not _COMMON.search(q) or re.search(r"\bwhich (?:one|of)\b", q, re.IGNORECASE):
        return ()           # "which one …": a choice between them, not what they share
    if re.search(r"\b(?:that|who|which)\s+\w+\s+both\b", q, re.IGNORECASE):
        return ()           # "a movie that starred both X and Y": a third thing, linked to both
    name = rf"[\"“]?(?:the\s+)?({_NAME.pattern})[\"”]?"
    for m in re.finditer(rf"{name}\s+and\s+{name}", q):
        names = []
        for i in (1, 2):
            rest = q[m.start(i):]
            at = _trim_name(rest, re.match(_NAME, rest))
            if at is not None:
                names.append(_clean_option(rest[at[0]:at[1]]))
        pair = _pair(*names) if len(names) == 2 else ()
        if pair:
            return pair
    return ()


def _pair(a: str, b: str) -> tuple:
    """Two options, or none when they are empty, the same, or clauses rather than names (over six words)."""
    if not a or not b or a.lower() == b.lower() or max(len(a.split()), len(b.split())) > 6:
        return ()
    return a, b


def _clean_option(s: str) -> str:
    s = re.sub(r"^(?:the|a|an)\s+(?=[A-Z])", "", s.strip(" \"'“”‘’"), flags=re.IGNORECASE)
    return s.strip(" \"'“”‘’,")


def _comparison(low: str) -> str:
    for word, pat in (("earlier", r"\b(?:first|earlier|earliest|older|oldest|before|predates?)\b"),
                      ("later", r"\b(?:later|latest|last|younger|youngest|newer|newest|more recent(?:ly)?)\b"),
                      ("more", r"\b(?:more|most|larger|largest|bigger|biggest|higher|highest|longer|longest|"
                               r"taller|tallest|greater|greatest)\b"),
                      ("fewer", r"\b(?:fewer|less|least|smaller|smallest|lower|lowest|shorter|shortest)\b")):
        if re.search(pat, low):
            return word
    return ""


def candidates(sentence: str, kind: str, question_words: set[str] = frozenset()) -> list[tuple[int, int]]:
    """``(start, end)`` spans of ``sentence`` that could answer a question of type ``kind``, left to
    right; spans made only of ``question_words`` (lower-case) are left out."""
    if kind == "number":
        spans = [m.span() for m in _NUMBER.finditer(sentence) if not _is_year(m.group())]
    elif kind == "date":
        spans = [m.span() for m in _DATE.finditer(sentence)]
    elif kind in NAME_TYPES:
        dates = [m.span() for m in _DATE_OR_DAY.finditer(sentence)]
        spans = [_trim_name(sentence, m) for m in _NAME.finditer(sentence)]
        # a date ("October 14", "April 1998") is capitalised but names no one; an initial alone is no name
        spans = [s for s in spans if s is not None and len(sentence[s[0]:s[1]].strip(".")) > 1
                 and not any(a <= s[0] < b for a, b in dates)]
    else:
        return []
    out = []
    for a, b in spans:
        w = words(sentence[a:b])
        if w and not set(w) <= set(question_words):
            out.append((a, b))
    return out


def _is_year(s: str) -> bool:
    return bool(re.fullmatch(r"1\d{3}|20\d{2}", s.strip()))


def _trim_name(sentence: str, m) -> tuple[int, int] | None:
    """A name match without leading words that only start a sentence ("The", "In", "He") and without
    trailing connectors ("of", "the"); None when nothing of a name is left."""
    toks = [(t.start() + m.start(), t.end() + m.start()) for t in re.finditer(r"\S+", m.group())]
    while toks and sentence[toks[0][0]:toks[0][1]].lower().strip(".") in _NOT_NAMES and not (
            len(toks) > 1 and sentence[toks[0][0]:toks[0][1]] in ("New", "Old")):     # New York, Old Trafford
        toks = toks[1:]
    while toks and sentence[toks[-1][0]:toks[-1][1]].lower() in ("of", "the", "and", "for", "on", "in", "&",
                                                                  "de", "y"):
        toks = toks[:-1]
    if not toks or not sentence[toks[0][0]].isupper():
        return None
    a, b = toks[0][0], toks[-1][1]
    if sentence[max(a, b - 2):b] in ("'s", "’s"):         # "Benedict Arnold's surrender": the name, not its 's
        b -= 2
    if sentence[b - 1] in ".,;:'’-" and toks[-1][1] - toks[-1][0] > 2:     # a full stop, not an initial's
        b -= 1
    return (a, b) if a < b else None
