"""Where sentences begin and end in plain text, for the chunker (a window starts at a sentence where
one begins within its overlap) and the answers (whole sentences are quoted; query/sentences.py).

A sentence ends at ``.``, ``!`` or ``?`` (closing quotes, brackets and citation markers such as
``[2]`` stay with it) followed by whitespace or the end of the text; a line break also ends one. A
full stop between digits or inside an abbreviation-like token ("3.5", "e.g.x") is not an end because
it is not followed by whitespace; neither is one followed by a lower-case word or a number ("eq. 13",
"e.g. the", "et al. in"), which does not start a sentence, nor one that closes an initial or a title
before a name ("M. Night Shyamalan", "the U.S. Route 78", "Bing Crosby Jr. (1903"). A list item's
marker at the start of a line ("- ", "* ", "3. ") belongs to no sentence.
"""
from __future__ import annotations

import re

# the end of a sentence: terminal punctuation, then closing quotes/brackets and citation markers
MARK = r"[.!?…]+[\"'”’)\]]*(?:\s*\[\d+(?:\s*,\s*\d+)*\])*"
END = re.compile(MARK + r"(?=\s|$)")
# splitting text also skips a full stop before a lower-case word or a number ("eq. 13", "e.g. the");
# trimming a cut reply does not (END), so a reply that runs on in lower case still ends on its last full stop
SPLIT = re.compile(MARK + r"(?=\s+(?![a-z0-9])|\s*$)")
WORD = re.compile(r"\w")
# a full stop that closes an initial ("M.", "U.S.") or a title before a name ("Jr.", "Dr.", "St."), not a sentence
ABBREV = re.compile(r"(?:^|[\s(\"'“‘])(?:[A-Z]|(?:[A-Z]\.)+[A-Z]|Jr|Sr|Dr|Mr|Mrs|Ms|St|Mt|Ft|Lt|Col|Gen|Gov|Sen|"
                    r"Rev|Prof|Capt|Sgt|Maj|Hon|Rt)$")
# a list item's marker at the start of a line ("- ", "* ", "• ", "3. ", "2) "): not part of its sentence
BULLET = re.compile(r"\s*(?:[-*•+]|\d{1,3}[.)])\s+(?=\S)")


def line_pieces(line: str) -> list[tuple[int, int]]:
    """[start, end) of each sentence piece of one line, in order (a list marker left out; pieces may
    be only whitespace or punctuation)."""
    bullet = BULLET.match(line)
    start = bullet.end() if bullet else 0
    out = []
    for m in SPLIT.finditer(line):
        if m.group() == "." and m.end() < len(line.rstrip()) and ABBREV.search(line[start:m.start()]):
            continue
        out.append((start, m.end()))
        start = m.end()
    out.append((start, len(line)))
    return out


def sentence_starts(text: str) -> list[int]:
    """The character offsets where the sentences of ``text`` begin (the first non-space character of
    each piece holding a word character), ascending."""
    out, at = [], 0
    for line in (text or "").splitlines(keepends=True):
        for a, b in line_pieces(line):
            piece = line[a:b]
            if WORD.search(piece):
                out.append(at + a + len(piece) - len(piece.lstrip()))
        at += len(line)
    return out
