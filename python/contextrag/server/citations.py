"""Numbered citations for an answer. The answer prompt numbers the passages [1]..[k] (query/answer.py)
and asks for a few words, not for markers, so a passage is cited when its text contains the answer
(case and spacing ignored): the passages a reader can check the answer against."""
from __future__ import annotations

import re

MAX_SOURCES = 3   # sources listed under a chat reply when no passage contains the answer (retrieval only)


def _norm(s: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", s.lower()).split())


def cited(answer: str | None, hits) -> list[int]:
    """1-based numbers of the hits whose text contains ``answer`` ([] for None, "" or "unknown")."""
    a = _norm(answer or "")
    if not a or a == "unknown":
        return []
    return [n for n, h in enumerate(hits, 1) if f" {a} " in f" {_norm(h.text)} "]


def _source(n: int, h) -> str:
    name = h.title or h.doc_id or ", ".join(h.doc_ids[:3]) or h.id
    return f"[{n}] {name} ({h.kind}, {h.id})"


def reply_text(answer: str | None, hits, cites: list[int]) -> str:
    """A chat reply: the answer with its citation markers, then the cited sources. Without an LLM
    (answer None) the reply lists the best passages instead."""
    if answer is None:
        lines = ["No LLM is configured on this server; the most relevant passages:"]
        lines += [f"{_source(n, h)}: {' '.join(h.text.split())[:300]}" for n, h in enumerate(hits[:MAX_SOURCES], 1)]
        return "\n".join(lines)
    marks = "".join(f"[{n}]" for n in cites)
    text = f"{answer} {marks}".strip()
    if cites:
        text += "\n\nSources:\n" + "\n".join(_source(n, hits[n - 1]) for n in cites)
    return text
