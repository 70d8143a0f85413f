"""LLM rerank (§4.5): the fused top-25 → top-12.

The model sees the candidates numbered [1]..[n] (each cut to ``PASSAGE_WORDS`` words) and is asked
for the numbers of the useful ones, best first. Parsing is forgiving: every integer in the reply
that names a candidate counts, once, in order; the candidates it did not name follow in the fused
order. A reply that names no candidate (malformed, empty, refusal, an exception from the client)
falls back to the fused order unchanged — ``RerankResult.reranked`` says which happened.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

PASSAGE_WORDS = 60
MAX_TOKENS = 64
SYSTEM = "You rank search results. Reply only with passage numbers."
PROMPT = ("Question: {q}\n\nPassages:\n{passages}\n\n"
          "Which passages help answer the question? Reply with their numbers, most useful first, "
          "separated by commas (for example: 3, 1, 7).")


@dataclass
class RerankResult:
    order: list        # indices into the candidate list, best first (length ≤ top)
    reranked: bool     # False: the reply named no candidate and the fused order was kept
    raw: str = ""


def _short(text: str, words: int) -> str:
    w = text.split()
    return " ".join(w[:words]) + (" …" if len(w) > words else "")


def messages_for(question: str, texts: list[str]) -> list[dict]:
    passages = "\n".join(f"[{i + 1}] {_short(t, PASSAGE_WORDS)}" for i, t in enumerate(texts))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": PROMPT.format(q=question, passages=passages)}]


def parse(reply: str, n: int, top: int) -> RerankResult:
    """Order of the n candidates from a reply; fused order when it names none."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError(f"top must be an int >= 1, got {top!r}")
    picked = []
    for m in re.finditer(r"-?\d+", reply if isinstance(reply, str) else ""):
        j = int(m.group()) - 1
        if 0 <= j < n and j not in picked:
            picked.append(j)
    if not picked:
        return RerankResult(list(range(min(n, top))), False, reply if isinstance(reply, str) else "")
    rest = [j for j in range(n) if j not in set(picked)]
    return RerankResult((picked + rest)[:top], True, reply)


def rerank(llm, question: str, texts: list[str], top: int = 12) -> RerankResult:
    if not texts:
        return RerankResult([], False)
    try:
        c = llm.complete(messages_for(question, texts), stage="rerank", max_tokens=MAX_TOKENS, temperature=0.0)
        reply = c.text
    except Exception as e:  # a failing reranker must not fail the query
        return RerankResult(list(range(min(len(texts), top))), False, f"error: {type(e).__name__}: {e}")
    return parse(reply, len(texts), top)


async def arerank(llm, question: str, texts: list[str], top: int = 12) -> RerankResult:
    import asyncio
    if not texts:
        return RerankResult([], False)
    try:
        c = await llm.acomplete(messages_for(question, texts), stage="rerank", max_tokens=MAX_TOKENS,
                                temperature=0.0)
        reply = c.text
    except asyncio.CancelledError:
        raise
    except Exception as e:
        return RerankResult(list(range(min(len(texts), top))), False, f"error: {type(e).__name__}: {e}")
    return parse(reply, len(texts), top)
