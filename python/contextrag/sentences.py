"""Sentence boundaries: splitting passages into sentences (the extractive answer; the index's
distinct text, index/distinct.py) and ending a generated answer on a whole sentence (a reply cut by
the token cap).

A sentence ends at ``.``, ``!`` or ``?`` (closing quotes, brackets and citation markers such as
``[2]`` stay with it) followed by whitespace or the end of the text; a line break also ends one. A
full stop between digits or inside an abbreviation-like token ("3.5", "e.g.x") is not an end because
it is not followed by whitespace; when passages are split, neither is one followed by a lower-case
word or a number ("eq. 13", "e.g. the", "et al. in"), which does not start a sentence, nor one that closes
an initial or a title before a name ("M. Night Shyamalan", "the U.S. Route 78", "Bing Crosby Jr. (1903").
"""
from __future__ import annotations

import re

# the end of a sentence: terminal punctuation, then closing quotes/brackets and citation markers
_MARK = r"[.!?…]+[\"'”’)\]]*(?:\s*\[\d+(?:\s*,\s*\d+)*\])*"
_END = re.compile(_MARK + r"(?=\s|$)")
# splitting passages also skips a full stop before a lower-case word or a number ("eq. 13", "e.g. the");
# trimming a cut reply does not, so a reply that runs on in lower case still ends on its last full stop
_SPLIT = re.compile(_MARK + r"(?=\s+(?![a-z0-9])|\s*$)")
_WORD = re.compile(r"\w")


# a full stop that closes an initial ("M.", "U.S.") or a title before a name ("Jr.", "Dr.", "St."), not a sentence
_ABBREV = re.compile(r"(?:^|[\s(\"'“‘])(?:[A-Z]|(?:[A-Z]\.)+[A-Z]|Jr|Sr|Dr|Mr|Mrs|Ms|St|Mt|Ft|Lt|Col|Gen|Gov|Sen|"
                     r"Rev|Prof|Capt|Sgt|Maj|Hon|Rt)$")


# a list item's marker at the start of a line ("- ", "* ", "• ", "3. ", "2) "): not part of its sentence
_BULLET = re.compile(r"\s*(?:[-*•+]|\d{1,3}[.)])\s+(?=\S)")


def split(text: str) -> list[str]:
    """The sentences of ``text``, stripped, in order (pieces without a word character dropped; a list
    item's marker left out of its first sentence)."""
    out = []
    for line in (text or "").splitlines():
        bullet = _BULLET.match(line)
        start = bullet.end() if bullet else 0
        for m in _SPLIT.finditer(line):
            if m.group() == "." and m.end() < len(line.rstrip()) and _ABBREV.search(line[start:m.start()]):
                continue
            out.append(line[start:m.end()])
            start = m.end()
        out.append(line[start:])
    return [s.strip() for s in out if _WORD.search(s)]


def last_end(text: str) -> int:
    """The index just past the last complete sentence in ``text`` (0 when there is none). A line break
    counts as an end of what precedes it."""
    end = 0
    for m in _END.finditer(text):
        end = m.end()
    nl = text.rstrip().rfind("\n")
    if nl > end and text[:nl].strip():
        end = len(text[:nl].rstrip())
    return end


def trim(text: str) -> str:
    """``text`` cut by a token cap, ended at its last complete sentence; without one, its last
    (possibly cut) word is dropped and "…" marks the cut."""
    t = (text or "").strip()
    end = last_end(t)
    if end:
        return t[:end].strip()
    words = t.split()
    if len(words) <= 1:
        return t + "…" if t else t
    return " ".join(words[:-1]).rstrip(",;:-–—") + "…"
