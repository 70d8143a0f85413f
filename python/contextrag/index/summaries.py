"""Stage 4: cluster-summary virtual chunks (paper §4.1 stage 4, Appendix B).

One LLM call per selected concept, Config.n_summaries of them (0 allowed), made concurrently up to
the client's concurrency limit (``max_concurrency``, as the query rewrites are). Selection: the seed
concepts with the largest crisp support, coarsest group first (level-0 topics before level-1
residual clusters), because a summary is worth most where it stands for many chunks. The prompt
holds the concept's Config.summary_chunks most central member chunks (highest extent degree). Every
call goes through the project's LLM client (stage "summaries") and is also recorded in the index's
own ledger, so the index knows what it cost. Without an LLM the index builds without summaries and
records why. The graph topology never depends on these calls.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .graph import SEED, ConceptGraph

PROMPT = ("Below are passages that an unsupervised clustering grouped together. Write a short, "
          "factual summary (at most 4 sentences) of what they have in common, naming the main "
          "entities. Use only the passages.\n\n{passages}\n\nSummary:")
MAX_CHARS_PER_PASSAGE = 700


def select_concepts(g: ConceptGraph, attr_group: np.ndarray, n: int) -> list[int]:
    seeds = np.flatnonzero(g.kind == SEED)
    if n <= 0 or not len(seeds):
        return []
    grp = attr_group[g.attr[seeds]]
    order = np.lexsort((seeds, -g.score[seeds], grp))
    return [int(v) for v in seeds[order[:n]]]


def central_chunks(g: ConceptGraph, I: np.ndarray, v: int, k: int) -> np.ndarray:
    mem = g.members[v].indices
    if not len(mem):
        return mem
    deg = g.extents(I, [v])[0][mem]
    return mem[np.lexsort((mem, -deg))[:k]]


def summarize(llm, texts: list[str], ledger, *, max_tokens: int = 160) -> str:
    passages = "\n\n".join(f"[{i + 1}] {t[:MAX_CHARS_PER_PASSAGE]}" for i, t in enumerate(texts))
    messages = [{"role": "user", "content": PROMPT.format(passages=passages)}]
    c = llm.complete(messages, stage="summaries", max_tokens=max_tokens, temperature=0.0)
    if ledger is not None and ledger is not getattr(llm, "ledger", None):
        ledger.record("summaries", c)
    return (c.text or "").strip()


DEFAULT_CONCURRENCY = 8   # for clients without a max_concurrency of their own


def summarize_many(llm, passages: list[list[str]], ledger, *, max_tokens: int = 160) -> list:
    """:func:`summarize` for each list of passages, run on threads up to the client's
    ``max_concurrency`` (the HTTP client also enforces it; the embedded model serialises its calls
    itself). Results in input order; a failed call gives its exception instead of a text."""
    if not passages:
        return []
    limit = getattr(llm, "max_concurrency", None)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        limit = DEFAULT_CONCURRENCY
    workers = min(limit, len(passages))

    def one(texts):
        try:
            return summarize(llm, texts, ledger, max_tokens=max_tokens)
        except Exception as e:  # noqa: BLE001 - reported per call by the caller
            return e
    if workers == 1:
        return [one(t) for t in passages]
    with ThreadPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(one, passages))
