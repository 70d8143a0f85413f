"""Numbered citations under a chat reply. The answer prompt numbers the passages [1]..[k]
(query/answer.py); ``Answer.citations`` says which the answer cites: for a short answer the passages
whose text contains it (the passages a reader can check it against), for a paragraph the [n] markers
it wrote, for an extractive answer the passages its sentences come from."""
from __future__ import annotations

from ..query.answer import containing as cited   # noqa: F401  (the short style's rule, by name)

MAX_SOURCES = 3   # sources listed under a chat reply when no passage contains the answer (retrieval only)


def _source(n: int, h) -> str:
    name = h.title or h.doc_id or ", ".join(h.doc_ids[:3]) or h.id
    return f"[{n}] {name} ({h.kind}, {h.id})"


def reply_text(answer: str | None, hits, cites: list[int], style: str = "short") -> str:
    """A chat reply: the answer with its citation markers, then the cited sources. Without an LLM
    (answer None) the reply lists the best passages instead."""
    if answer is None:
        lines = ["No LLM is configured on this server; the most relevant passages:"]
        lines += [f"{_source(n, h)}: {' '.join(h.text.split())[:300]}" for n, h in enumerate(hits[:MAX_SOURCES], 1)]
        return "\n".join(lines)
    return answer + reply_tail(hits, cites, style)


def reply_tail(hits, cites: list[int], style: str = "short") -> str:
    """What follows the answer text in a chat reply: its markers (a paragraph has them inline
    already), then the cited sources."""
    tail = "" if style == "paragraph" or not cites else " " + "".join(f"[{n}]" for n in cites)
    if cites:
        tail += "\n\nSources:\n" + "\n".join(_source(n, hits[n - 1]) for n in cites)
    return tail
