"""Multi-query expansion (§4.5): three LLM rewrites — a paraphrase, a decomposed sub-question and an
entity-focused variant — generated **concurrently** (the paper ran them one after another, 2.5 s a
query) and cached through the client's on-disk cache (same question → no new call).

``rewrites`` runs the calls on threads (works inside or outside an event loop);
``arewrites`` awaits them with ``asyncio.gather`` on the client's async path (real async for HTTP).
A rewrite that comes back empty or unusable is dropped; the original question is always searched too.
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

KINDS = ("paraphrase", "decompose", "entities")

PROMPTS = {
    "paraphrase": "Rewrite the question below in different words, keeping its meaning. "
                  "Reply with the rewritten question only.\n\nQuestion: {q}",
    "decompose": "The question below may need several steps to answer. Write the first simpler "
                 "sub-question that must be answered first. Reply with that one question only.\n\nQuestion: {q}",
    "entities": "List the names, places, works, dates and other key entities mentioned in the question "
                "below, separated by commas. Reply with the list only.\n\nQuestion: {q}",
}
SYSTEM = "You rewrite search queries. Be brief."
MAX_TOKENS = 48

_LABEL = re.compile(r"^\s*(?:[-*•]|\d+[.)]|(?:rewritten|paraphrased?|sub-?question|question|entities|"
                    r"answer|query|list)\s*[^:\n]{0,20}:)\s*", re.IGNORECASE)


def messages_for(kind: str, question: str) -> list[dict]:
    if kind not in PROMPTS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPTS[kind].format(q=question)}]


def clean(text: str, question: str) -> str | None:
    """First usable line of a rewrite, labels and quotes stripped; None when nothing usable is left."""
    if not isinstance(text, str):
        return None
    for line in text.splitlines():
        s = line.strip()
        for _ in range(2):
            s = _LABEL.sub("", s).strip()
        s = s.strip("\"'`“”‘’ ").strip()
        if len(s) >= 3 and re.search(r"\w", s):
            return s[: max(300, 2 * len(question))]
    return None


def _kinds(n: int) -> tuple[str, ...]:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an int >= 0, got {n!r}")
    return KINDS[: min(n, len(KINDS))]


def rewrites(llm, question: str, n: int = 3) -> list[str]:
    """Up to n rewrites (paraphrase, decomposition, entities, in that order), called concurrently."""
    return rewrite_calls(llm, question, n)[0]


def rewrite_calls(llm, question: str, n: int = 3) -> tuple[list[str], list[dict]]:
    """(rewrites searched, one record per call made): each record is {kind, reply, used}, ``reply``
    the cleaned rewrite (None when unusable) and ``used`` whether it was searched (False for an
    unusable reply or one that repeats the question or an earlier rewrite)."""
    kinds = _kinds(n)
    if not kinds:
        return [], []

    def one(kind):
        c = llm.complete(messages_for(kind, question), stage="rewrite", max_tokens=MAX_TOKENS, temperature=0.0)
        return clean(c.text, question)

    with ThreadPoolExecutor(max_workers=len(kinds)) as ex:
        outs = list(ex.map(one, kinds))
    return _dedupe(kinds, outs, question)


async def arewrites(llm, question: str, n: int = 3) -> list[str]:
    return (await arewrite_calls(llm, question, n))[0]


async def arewrite_calls(llm, question: str, n: int = 3) -> tuple[list[str], list[dict]]:
    import asyncio
    kinds = _kinds(n)
    if not kinds:
        return [], []
    cs = await asyncio.gather(*(llm.acomplete(messages_for(k, question), stage="rewrite", max_tokens=MAX_TOKENS,
                                              temperature=0.0) for k in kinds))
    return _dedupe(kinds, [clean(c.text, question) for c in cs], question)


def _dedupe(kinds, outs, question) -> tuple[list[str], list[dict]]:
    seen = {question.strip().lower()}
    res, calls = [], []
    for kind, s in zip(kinds, outs):
        used = bool(s) and s.lower() not in seen
        if used:
            seen.add(s.lower())
            res.append(s)
        calls.append({"kind": kind, "reply": s, "used": used})
    return res, calls
