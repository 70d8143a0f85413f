"""The extractive answer: the best supporting sentence(s) of the top passages, without an LLM.

Every sentence of the answer's hits (query/sentences.py) is scored as eq. 13 scores a passage, minus
the graph term: ``w_bm25 · bm25 / max bm25 + w_cos · cos``, with BM25 (bm25s) over these sentences
only and the cosine between the index's embedder's question and sentence embeddings, so a sentence
wins by meaning or by the question's rare words, like a passage does.

How many sentences (no tuned threshold): the best sentence, plus the best sentence of the *next best
passage* when it scores at least as high as the runner-up sentence of the winning passage — a second
passage's sentence comes in when it is as relevant to the question as anything else the winning
passage has to offer, which is how the bridge fact of a two-hop question is added. So an answer is one
or two sentences from one or two passages: short enough to read, and a winning passage of one
sentence adds nothing. The best sentence comes first; each cites its passage.
"""
from __future__ import annotations

import numpy as np

from . import sentences


def candidates(hits) -> list[tuple[int, str]]:
    """(hit number, sentence) for every whole sentence of the hits, hit numbers 1-based. Pieces that
    end without a full stop (headings, list items, a sentence cut at the chunk's edge) are used only
    when the hits hold no whole sentence."""
    every = [(n, s) for n, h in enumerate(hits, 1) for s in sentences.split(h.text)]
    whole = [(n, s) for n, s in every if sentences.last_end(s) == len(s)]
    return whole or every


def scores(question: str, texts: list[str], embedder, w_bm25: float, w_cos: float) -> np.ndarray:
    """(len(texts),) eq. 13 without the graph term, over these sentences."""
    out = np.zeros(len(texts), dtype=np.float64)
    if not texts:
        return out
    if w_bm25:
        from ._view import _OwnBM25
        from .bm25 import normalise_max

        out += w_bm25 * normalise_max(_OwnBM25(texts)(question)).astype(np.float64)
    if w_cos:
        q = np.asarray(embedder.embed_queries([question]), dtype=np.float64)
        E = np.asarray(embedder.embed_passages(texts), dtype=np.float64)
        q /= max(np.linalg.norm(q), 1e-12)
        E /= np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
        out += w_cos * (E @ q[0])
    return out


def select(cands: list[tuple[int, str]], s: np.ndarray) -> list[int]:
    """Indices into ``cands`` of the chosen sentences (the rule in the module docstring), best first."""
    if not cands:
        return []
    best = int(np.argmax(s))
    hit = cands[best][0]
    own = [s[i] for i, (n, _) in enumerate(cands) if n == hit and i != best]
    others = [i for i, (n, _) in enumerate(cands) if n != hit]
    if not own or not others:
        return [best]
    second = max(others, key=lambda i: (s[i], -i))       # the next best passage's best sentence
    return [best, second] if s[second] >= max(own) else [best]


def extract(question: str, hits, embedder, w_bm25: float = 0.3, w_cos: float = 0.5) -> tuple[str, list[int]]:
    """(answer text, citations): the chosen sentences joined, and their passages' numbers."""
    cands = candidates(hits)
    if not cands:
        return "unknown", []
    chosen = select(cands, scores(question, [t for _, t in cands], embedder, w_bm25, w_cos))
    cites: list[int] = []
    for i in chosen:
        if cands[i][0] not in cites:
            cites.append(cands[i][0])
    return " ".join(cands[i][1] for i in chosen), cites
