"""Answer generation (§4.1 stage 7): a short-answer prompt over the top-12 passages.

``Answer.cost`` is this query's LLM cost, read from the client's CostLedger as the difference between
a snapshot before the query and after it (per stage: calls, cached_calls, prompt/completion tokens,
seconds, plus "total"), and ``Answer.seconds`` the wall time of the whole query. Two queries running at
once on one client see each other's calls in that difference; give each its own client (or ledger)
when exact per-query figures matter under concurrency.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_TOKENS = 48
PASSAGE_WORDS = 120
SYSTEM = "You answer questions from the given passages. Answer with a few words only, no explanation."
PROMPT = ("Passages:\n{passages}\n\nQuestion: {q}\n"
          "Answer the question in a few words, using only the passages. "
          "If they do not contain the answer, reply: unknown.\nAnswer:")


@dataclass
class Answer:
    text: str
    hits: list
    cost: dict = field(default_factory=dict)
    seconds: float = 0.0
    rewrites: list = field(default_factory=list)
    reranked: bool = False

    def to_dict(self) -> dict:
        return {"answer": self.text, "hits": [h.to_dict() for h in self.hits], "cost": self.cost,
                "seconds": self.seconds, "rewrites": self.rewrites, "reranked": self.reranked}


def _short(text: str, words: int) -> str:
    w = text.split()
    return " ".join(w[:words]) + (" …" if len(w) > words else "")


def messages_for(question: str, hits) -> list[dict]:
    passages = "\n".join(f"[{i + 1}] {_short(h.text, PASSAGE_WORDS)}" for i, h in enumerate(hits))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": PROMPT.format(q=question, passages=passages)}]


def clean(text: str) -> str:
    """The answer in a reply: the text after an "Answer:" label when there is one, else the first
    non-empty line that is not an echo of the prompt ("Question: ...", "Passages:", "[1] ...");
    wrapping quotes removed."""
    text = text or ""
    m = re.search(r"(?:^|\n)\s*(?:final\s+)?answer\s*:\s*(.+)", text, flags=re.IGNORECASE)
    lines = [m.group(1)] if m and m.group(1).strip() else text.splitlines()
    for line in lines:
        s = line.strip()
        if re.match(r"^(?:question|passages?)\s*:|^\[\d+\]|^(?:final\s+)?answer\s*:\s*$", s, flags=re.IGNORECASE):
            continue
        s = s.strip("\"'`“” ").strip()
        if s:
            return s
    return ""


def cost_delta(ledger, before) -> dict:
    d = ledger.since(before)
    total: dict = {}
    for v in d.values():
        for f, x in v.items():
            total[f] = total.get(f, 0) + x
    d = {k: v for k, v in d.items() if any(v.values())}
    d["total"] = total
    return d
