"""Retrieval and answers: the page, /health, /retrieve, /answer."""
from __future__ import annotations

import time
from importlib import resources

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from .answering import answer_question, bad_request, hits_payload
from .schemas import AnswerRequest, RetrieveRequest
from .validate import check_filter, check_overrides


def router(s) -> APIRouter:
    """``s``: the app's Served (state.py)."""
    api = APIRouter()
    holder = s.holder

    @api.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page():
        return resources.files("contextrag.server").joinpath("static/index.html").read_text(encoding="utf-8")

    @api.get("/health", dependencies=s.guarded)
    def health():
        from ..rag import FORMAT_VERSION
        r = holder.rag
        ix = r.index
        return {"status": "ok", "version": s.version, "index_format_version": FORMAT_VERSION,
                "generation": holder.generation, "path": r.path,
                "counts": {"docs": len(ix.docs), "chunks": ix.n_chunks, "items": ix.n_items,
                           "nodes": int(ix.graph.n_nodes)},
                "llm": getattr(s.llm, "model", None)}

    @api.post("/retrieve", dependencies=s.guarded)
    def retrieve(req: RetrieveRequest):
        t0 = time.perf_counter()
        check_filter(req.filter)
        check_overrides(req.overrides)
        r = holder.rag
        try:
            hits = r.retrieve(req.question, k=req.k, doc_ids=req.doc_ids, filter=req.filter,
                              explain=req.explain, **req.overrides)
        except (ValueError, TypeError) as e:
            raise bad_request(e) from None
        return {"question": req.question, **hits_payload(hits, req.explain),
                "seconds": time.perf_counter() - t0, "generation": holder.generation}

    @api.post("/answer", dependencies=s.guarded)
    async def answer(req: AnswerRequest):
        t0 = time.perf_counter()
        check_filter(req.filter)
        # with an LLM: in the LLM gate's threads (its own limit and queue), so hung LLM calls never
        # hold the threads /retrieve and /health run in
        run = s.llm_gate.run if s.llm is not None else run_in_threadpool
        text, hits, cites, cost, extra = await run(answer_question, holder.rag, s.llm, req.question, k=req.k,
                                                   doc_ids=req.doc_ids, filter=req.filter,
                                                   explain=req.explain, rewrite=req.rewrite,
                                                   rerank=req.rerank, style=req.style,
                                                   max_tokens=req.max_tokens)
        return {"question": req.question, "answer": text, "citations": cites,
                **hits_payload(hits, req.explain), "cost": cost,
                "seconds": time.perf_counter() - t0, "generation": holder.generation, **extra}

    return api
