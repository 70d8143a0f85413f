"""Sentence boundaries for answers: splitting passages into sentences (the extractive answer) and
ending a generated answer on a whole sentence (a reply cut by the token cap).

The boundaries are those of :mod:`contextrag.sentence_bounds`, which the chunker reads too.
"""
from __future__ import annotations

from ..sentence_bounds import END as _END, WORD as _WORD, line_pieces


def split(text: str) -> list[str]:
    """The sentences of ``text``, stripped, in order (pieces without a word character dropped; a list
    item's marker left out of its first sentence)."""
    out = [line[a:b] for line in (text or "").splitlines() for a, b in line_pieces(line)]
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
