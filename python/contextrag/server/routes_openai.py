"""OpenAI-compatible chat: GET /v1/models, POST /v1/chat/completions (stream: SSE)."""
from __future__ import annotations

import asyncio
import json
import time
import uuid

from fastapi import APIRouter, HTTPException
from sse_starlette.sse import EventSourceResponse

from .answering import answer_question, bad_request
from .citations import reply_tail, reply_text
from .conversation import split_turns, standalone_question
from .schemas import MODEL_NAME, ChatRequest
from .streaming import aiter_list, chain, pieces, tail_pieces


MODEL_ALIASES = (MODEL_NAME,)    # the names /v1/chat/completions answers to; any other is a 404


def check_model(name: str) -> None:
    if name not in MODEL_ALIASES:
        raise HTTPException(404, f"the model {name!r} does not exist; this server answers as "
                                 f"{', '.join(repr(m) for m in MODEL_ALIASES)} (GET /v1/models)")


def header_text(text: str, limit: int = 1000) -> str:
    """``text`` as a header value: one line of printable ASCII (other characters as \\u escapes)."""
    one = " ".join(text.split())[:limit]
    return "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode() for c in one)


def usage(cost: dict) -> dict:
    tot = (cost or {}).get("total", {})
    p, c = int(tot.get("prompt_tokens", 0)), int(tot.get("completion_tokens", 0))
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


PING_SECONDS = 15     # a comment line this often keeps proxies from closing a stream whose LLM is slow


def _sse(obj) -> dict:
    return {"data": json.dumps(obj)}


def router(s) -> APIRouter:
    api = APIRouter()
    holder, llm, gate = s.holder, s.llm, s.llm_gate

    @api.get("/v1/models", dependencies=s.guarded)
    def models():
        return {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0,
                                            "owned_by": "contextrag"}]}

    @api.post("/v1/chat/completions", dependencies=s.guarded)
    async def chat(req: ChatRequest):
        check_model(req.model)
        _, turns, question = split_turns(req.messages)    # 400 before any work when there is no user text
        if turns:                                           # an LLM call when there is one: in the LLM gate
            question = (await gate.run(standalone_question, req.messages, llm) if llm is not None
                        else standalone_question(req.messages, None))
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if not req.stream:
            if llm is None:
                text, hits, cites, cost, extra = await asyncio.to_thread(answer_question, holder.rag, llm, question,
                                                                         k=req.k, style=req.style)
            else:
                text, hits, cites, cost, extra = await gate.run(answer_question, holder.rag, llm, question,
                                                                k=req.k, style=req.style)
            return {"id": cid, "object": "chat.completion", "created": created, "model": MODEL_NAME,
                    "choices": [{"index": 0, "message": {"role": "assistant",
                                                         "content": reply_text(text, hits, cites,
                                                                               extra.get("style", "short"))},
                                 "finish_reason": "stop"}],
                    "usage": usage(cost),
                    "contextrag": {"question": question, "answer": text, "citations": cites,
                                   "hits": [{"n": n, **h.to_dict()} for n, h in enumerate(hits, 1)]}}

        def chunk(delta, finish=None):
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_NAME,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        want_usage = bool((req.stream_options or {}).get("include_usage"))
        if llm is None:     # the extractive answer and its sources, in word-sized pieces
            text, hits, cites, cost, extra = await asyncio.to_thread(answer_question, holder.rag, llm, question,
                                                                     k=req.k, style=req.style)
            items = aiter_list([*pieces(reply_text(text, hits, cites, extra.get("style", "extractive"))),
                                ("cost", cost)])
        else:
            r = holder.rag
            items = gate.stream(lambda: r.answer_stream(question, llm=llm, k=req.k, style=req.style))
            # retrieval, rewrites and rerank run before the first delta: a bad request is still a status code
            try:
                first = await items.__anext__()
            except StopAsyncIteration:
                first = None
            except (ValueError, TypeError) as e:
                raise bad_request(e) from None
            items = chain(first, items)

        async def events():
            yield _sse(chunk({"role": "assistant", "content": ""}))
            cost = {}
            try:
                async for x in items:
                    if isinstance(x, str):
                        if x:
                            yield _sse(chunk({"content": x}))
                    elif isinstance(x, tuple):
                        cost = x[1]
                    else:   # the final Answer: its markers and sources follow the text
                        cost = x.cost
                        for piece in tail_pieces(reply_tail(x.hits, x.citations, x.style)):
                            yield _sse(chunk({"content": piece}))
            except Exception as e:  # noqa: BLE001 - the response has started: report it in the stream
                yield _sse({"error": {"message": f"{type(e).__name__}: {e}", "type": "server_error"}})
                yield {"data": "[DONE]"}
                return
            yield _sse(chunk({}, "stop"))
            if want_usage:
                yield _sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_NAME,
                            "choices": [], "usage": usage(cost)})
            yield {"data": "[DONE]"}

        # sse-starlette: the event framing, keep-alive comments while the LLM thinks, and the end of the
        # stream when the client goes away
        return EventSourceResponse(events(), ping=PING_SECONDS, headers={
            "X-Contextrag-Question": header_text(question)})

    return api
