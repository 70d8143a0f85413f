"""contextrag.query: hybrid retrieval (§4.2, §4.4), multi-query expansion with RRF, rerank (§4.5), answers.

* :func:`retrieve` — LLM-free: eq. 13 over chunks and virtual items, doc_id filter, boosts, top-k.
  ``**overrides`` are Config query fields (w_bm25, w_cos, w_fuzzy, theta, candidates, rerank_top,
  boost_summary, boost_bridge, n_rewrites, rrf_k), so BM25-only (w_cos=w_fuzzy=0), dense-only and
  hybrid-without-graph (w_fuzzy=0, boosts 1) systems all run from one index.
* :func:`search` — the full retrieval: the question plus its LLM rewrites (run concurrently),
  each retrieved by eq. 13, fused by RRF into the top ``candidates`` (25), reranked by the LLM to the
  top ``rerank_top`` (12).
* :func:`answer` / :func:`aanswer` — search, then an answer from the top hits in one of the styles of
  query/answer.py (short, paragraph with [n] citations, extractive), with the query's LLM cost from
  the ledger; :func:`answer_stream` — the same, as text deltas and then the Answer.
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np

from ..config import DEFAULT_K, Config, check_k
from ._view import CorpusView, view_of
from .answer import Answer, STYLES, cost_delta
from .answering import answer_style, compose, prepare_answer
from .dense import embed_queries
from .explain import explain_hits, neighbourhood
from .hybrid import Hit, base_parts, finish_parts, make_hits, score_all, top_indices, top_of
from .rerank import arerank, rerank as _rerank
from .relevance import annotate as annotate_relevance
from .rewrite import arewrite_calls, rewrite_calls
from .rrf import rrf

__all__ = ["retrieve", "retrieve_many", "explain", "neighbourhood", "search", "asearch", "answer", "aanswer",
           "answer_stream", "answer_from_hits", "answer_style", "Hit", "Answer", "STYLES", "QUERY_FIELDS",
           "CorpusView", "view_of", "rrf"]

QUERY_FIELDS = ("w_bm25", "w_cos", "w_fuzzy", "theta", "candidates", "rerank_top", "boost_summary",
                "boost_bridge", "n_rewrites", "rrf_k", "w_spread", "spread_families", "spread_seeds",
                "spread_steps", "spread_entities", "w_residual",
                "spread_mentions", "spread_stop", "spread_self", "scoring")


def _config(index, overrides: dict) -> Config:
    bad = sorted(set(overrides) - set(QUERY_FIELDS))
    if bad:
        raise ValueError(f"unknown query override(s) {bad}; allowed: {list(QUERY_FIELDS)}")
    cfg = getattr(index, "config", None)
    if not isinstance(cfg, Config):
        inner = getattr(index, "index", None)
        cfg = getattr(inner, "config", None)
    if not isinstance(cfg, Config):
        cfg = Config()
    for name in ("w_bm25", "w_cos", "w_fuzzy", "boost_summary", "boost_bridge"):
        if name in overrides:
            v = overrides[name]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    if "rrf_k" in overrides:
        v = overrides["rrf_k"]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise ValueError(f"rrf_k must be a number >= 0, got {v!r}")
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


def _check_question(question):
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {type(question).__name__}")
    if not question.strip():
        raise ValueError("question must be a non-empty str")


def retrieve(index, question: str, *, k: int = DEFAULT_K, doc_ids=None, explain: bool = False, **overrides) -> list[Hit]:
    """Top-k items by the hybrid score of eq. 13 (no LLM). Each Hit has parts {bm25, cos, fuzzy, boost}.
    ``explain=True`` also sets ``Hit.explain``: why each item came (query/explain.py)."""
    _check_question(question)
    check_k(k)
    cfg = _config(index, overrides)
    view = view_of(index)
    mask = view.doc_mask(doc_ids)
    q = embed_queries(view, [question])
    parts = score_all(view, question, q, cfg, mask, k)
    idx = top_of(parts, k)
    hits = annotate_relevance(view, question, make_hits(view, idx, parts), idx, cfg)
    if explain:
        explain_hits(view, question, hits, cfg, mask, parts)
    return hits


def explain(index, question: str, hits, *, doc_ids=None, **overrides) -> list[Hit]:
    """Set ``Hit.explain`` on hits of ``question`` (from retrieve, search or answer) and return them."""
    _check_question(question)
    cfg = _config(index, overrides)
    view = view_of(index)
    return explain_hits(view, question, list(hits), cfg, view.doc_mask(doc_ids))


def retrieve_many(index, questions, *, k: int = DEFAULT_K, doc_ids=None, **overrides) -> list[list[Hit]]:
    """:func:`retrieve` for a batch of questions: one embedding call for all of them and one batched
    spreading hop (``ops.spread_hop``) instead of one per question. Same hits as calling
    :func:`retrieve` on each question."""
    if isinstance(questions, str) or not hasattr(questions, "__iter__"):
        raise TypeError("questions must be a list of str")
    questions = list(questions)
    for q in questions:
        _check_question(q)
    check_k(k)
    if not questions:
        return []
    cfg = _config(index, overrides)
    view = view_of(index)
    mask = view.doc_mask(doc_ids)
    Q = embed_queries(view, questions)
    from .candidates import use_candidates
    if use_candidates(view, cfg):   # a large index: per question, on its candidates (query/candidates.py)
        out = []
        for i, question in enumerate(questions):
            full = score_all(view, question, Q[i:i + 1], cfg, mask, k)
            idx = top_of(full, k)
            out.append(annotate_relevance(view, question, make_hits(view, idx, full), idx, cfg))
        return out
    parts = [base_parts(view, q, Q[i:i + 1], cfg, mask) for i, q in enumerate(questions)]
    if cfg.w_spread:
        from .spread import spread_many
        spread = spread_many(view, questions, [p["base"] for p in parts], cfg, mask)
    else:
        spread = [(p["base"], np.zeros(view.n, dtype=np.float32)) for p in parts]
    out = []
    for question, p, (base, hop) in zip(questions, parts, spread):
        full = finish_parts(view, p, base, hop, cfg, mask)
        idx = top_indices(full["score"], k)
        out.append(annotate_relevance(view, question, make_hits(view, idx, full), idx, cfg))
    return out


# ---------------------------------------------------------------- the LLM pipeline
def _resolve_llm(llm):
    from ..llm import LLMClient, make_client

    if isinstance(llm, LLMClient):
        return llm
    if llm is None or isinstance(llm, str):
        return make_client(llm)       # None: no LLM (the extractive and span styles need none)
    raise TypeError(f"llm must be an LLMClient, a spec str or None, got {type(llm).__name__}")


def _fuse(view, questions: list[str], Q: np.ndarray, cfg, mask):
    """Hybrid lists for every query, fused by RRF. Returns (hits, parts of the original question)."""
    parts0 = score_all(view, questions[0], Q[:1], cfg, mask)
    lists = [top_of(parts0, cfg.candidates)]
    for i in range(1, len(questions)):
        p = score_all(view, questions[i], Q[i:i + 1], cfg, mask)
        lists.append(top_of(p, cfg.candidates))
    if len(lists) == 1:
        return annotate_relevance(view, questions[0], make_hits(view, lists[0], parts0), lists[0], cfg)
    fused = rrf([l.tolist() for l in lists], k=cfg.rrf_k)[: cfg.candidates]
    idx = [i for i, _ in fused]
    hits = annotate_relevance(view, questions[0], make_hits(view, idx, parts0), idx, cfg)
    for h, (_, s) in zip(hits, fused):   # the score stays the question's own (one scale everywhere)
        h.parts["rrf"] = float(s)
    return hits


def _prepare(index, question, k, doc_ids, overrides):
    _check_question(question)
    check_k(k)
    cfg = _config(index, overrides)
    view = view_of(index)
    return cfg, view, view.doc_mask(doc_ids)


def _apply_rerank(hits, rr, k):
    out = [hits[j] for j in rr.order][:k]
    if rr.reranked:
        for r, h in enumerate(out, start=1):
            h.parts["rerank_rank"] = r
    return out


def search(index, question: str, *, llm, k: int = DEFAULT_K, doc_ids=None, rewrite: bool = True, rerank: bool = True,
           **overrides) -> tuple[list[Hit], dict]:
    """(hits, info): rewrites → per-query hybrid retrieval → RRF → LLM rerank → top-k."""
    cfg, view, mask = _prepare(index, question, k, doc_ids, overrides)
    client = _resolve_llm(llm) if (rewrite or rerank) else None
    rewrite, rerank = rewrite and client is not None, rerank and client is not None
    rws, calls = rewrite_calls(client, question, cfg.n_rewrites) if rewrite and cfg.n_rewrites else ([], [])
    qs = [question] + rws
    Q = embed_queries(view, qs)
    hits = _fuse(view, qs, Q, cfg, mask)
    reranked = False
    if rerank and hits:
        rr = _rerank(client, question, [h.text for h in hits], top=min(cfg.rerank_top, len(hits)))
        hits, reranked = _apply_rerank(hits, rr, k), rr.reranked
    return hits[:k], {"rewrites": rws, "rewrite_calls": calls, "reranked": reranked}


async def asearch(index, question: str, *, llm, k: int = DEFAULT_K, doc_ids=None, rewrite: bool = True,
                  rerank: bool = True, **overrides) -> tuple[list[Hit], dict]:
    cfg, view, mask = _prepare(index, question, k, doc_ids, overrides)
    client = _resolve_llm(llm) if (rewrite or rerank) else None
    rewrite, rerank = rewrite and client is not None, rerank and client is not None
    rws, calls = (await arewrite_calls(client, question, cfg.n_rewrites) if rewrite and cfg.n_rewrites
                  else ([], []))
    qs = [question] + rws
    import asyncio      # imported here: a synchronous query does not need it (start-up time)
    Q = await asyncio.to_thread(embed_queries, view, qs)
    hits = _fuse(view, qs, Q, cfg, mask)
    reranked = False
    if rerank and hits:
        rr = await arerank(client, question, [h.text for h in hits], top=min(cfg.rerank_top, len(hits)))
        hits, reranked = _apply_rerank(hits, rr, k), rr.reranked
    return hits[:k], {"rewrites": rws, "rewrite_calls": calls, "reranked": reranked}


def _cost(client, before) -> dict:
    return cost_delta(client.ledger, before) if client is not None else {"total": {"calls": 0}}


def answer(index, question: str, *, llm=None, k: int = DEFAULT_K, doc_ids=None, rewrite: bool = True,
           rerank: bool = True, style: str | None = None, max_tokens: int | None = None, prompt: str | None = None,
           **overrides) -> Answer:
    """Search, then answer from the top-k hits (query/answer.py has the styles).

    style: "short" (a few words), "paragraph" (cites passages as [n]), "extractive" (the sentences
    that answer, no generation), "span" (the name, date or number that answers, no generation) or
    None: extractive with no LLM (``llm=None`` without ``CONTEXTRAG_LLM``, or ``"none"``) or only the
    tiny embedded one, short otherwise. max_tokens: the generation cap (default: the style's).
    prompt: a template for the answer call's user message with ``{question}`` and ``{passages}``.
    Rewrites and rerank use the LLM whatever the style; with no LLM they are skipped."""
    for x in _answer_events(index, question, llm, k, doc_ids, rewrite, rerank, style, max_tokens, prompt,
                            overrides, stream=False):
        return x
    raise AssertionError("unreachable")


def answer_stream(index, question: str, *, llm=None, k: int = DEFAULT_K, doc_ids=None, rewrite: bool = True,
                  rerank: bool = True, style: str | None = None, max_tokens: int | None = None,
                  prompt: str | None = None, **overrides):
    """:func:`answer` as it is written: text deltas (str), then the final :class:`Answer`. The deltas
    joined are ``Answer.text``. A paragraph arrives a sentence at a time (a sentence is shown once it is
    complete, so ending a capped reply at a sentence never takes back text already shown); a short
    answer when it is complete; an extractive one at once. Retrieval, rewrites and rerank run before
    the first delta, so a bad argument raises before anything is yielded."""
    return _answer_events(index, question, llm, k, doc_ids, rewrite, rerank, style, max_tokens, prompt,
                          overrides, stream=True)


def _answer_events(index, question, llm, k, doc_ids, rewrite, rerank, style, max_tokens, prompt, overrides, *,
                   stream: bool):
    t0 = time.perf_counter()
    client, style, max_tokens, prompt = prepare_answer(llm, style, max_tokens, prompt, _resolve_llm)
    before = client.ledger.snapshot() if client is not None else None
    if client is None:
        rewrite = rerank = False
    hits, info = search(index, question, llm=client, k=k, doc_ids=doc_ids, rewrite=rewrite, rerank=rerank,
                        **overrides)
    text, cites, support = yield from compose(index, question, hits, client, style, max_tokens, prompt,
                                     _config(index, overrides), stream=stream)
    yield Answer(text=text, hits=hits, cost=_cost(client, before), seconds=time.perf_counter() - t0,
                 rewrites=info["rewrites"], reranked=info["reranked"], style=style, citations=cites,
                 rewrite_calls=info["rewrite_calls"], support=support)


def answer_from_hits(index, question: str, hits, *, llm=None, style: str | None = None,
                     max_tokens: int | None = None, prompt: str | None = None, **overrides) -> Answer:
    """The answer step alone, from ``hits`` you retrieved (``retrieve``, ``search`` or your own
    selection, in the order the passages are numbered): no rewrites, no rerank."""
    _check_question(question)
    t0 = time.perf_counter()
    client, style, max_tokens, prompt = prepare_answer(llm, style, max_tokens, prompt, _resolve_llm)
    before = client.ledger.snapshot() if client is not None else None
    hits = list(hits)
    gen = compose(index, question, hits, client, style, max_tokens, prompt, _config(index, overrides), stream=False)
    try:
        next(gen)
        raise AssertionError("unreachable: compose yields only when streaming")
    except StopIteration as stop:
        text, cites, support = stop.value
    return Answer(text=text, hits=hits, cost=_cost(client, before), seconds=time.perf_counter() - t0,
                  style=style, citations=cites, support=support)


async def aanswer(index, question: str, *, llm=None, k: int = DEFAULT_K, doc_ids=None, rewrite: bool = True,
                  rerank: bool = True, style: str | None = None, max_tokens: int | None = None,
                  prompt: str | None = None, **overrides) -> Answer:
    """:func:`answer` on the client's async path (rewrites and rerank awaited concurrently)."""
    from .answering import acompose

    t0 = time.perf_counter()
    client, style, max_tokens, prompt = prepare_answer(llm, style, max_tokens, prompt, _resolve_llm)
    before = client.ledger.snapshot() if client is not None else None
    if client is None:
        rewrite = rerank = False
    hits, info = await asearch(index, question, llm=client, k=k, doc_ids=doc_ids, rewrite=rewrite,
                               rerank=rerank, **overrides)
    cfg = _config(index, overrides)
    text, cites, support = await acompose(index, question, hits, client, style, max_tokens, prompt, cfg)
    return Answer(text=text, hits=hits, cost=_cost(client, before), seconds=time.perf_counter() - t0,
                  rewrites=info["rewrites"], reranked=info["reranked"], style=style, citations=cites,
                  rewrite_calls=info["rewrite_calls"], support=support)
