"""Stage 4: cluster-summary virtual chunks (paper §4.1 stage 4, Appendix B).

One LLM call per selected concept, Config.n_summaries of them (0 allowed). Selection: the seed
concepts with the largest crisp support, coarsest group first (level-0 topics before level-1
residual clusters), because a summary is worth most where it stands for many chunks. The prompt
holds the concept's Config.summary_chunks most central member chunks (highest extent degree). Every
call goes through the project's LLM client (stage "summaries") and is also recorded in the index's
own ledger, so the index knows what it cost. Without an LLM the index builds without summaries and
records why. The graph topology never depends on these calls.
"""
from __future__ import annotations

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
