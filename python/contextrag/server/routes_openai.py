"""OpenAI-compatible chat: GET /v1/models, POST /v1/chat/completions (stream: SSE)."""
from __future__ import annotations

import asyncio
import json
import time
import uuid

from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse

from .answering import answer_question, bad_request
from .citations import reply_tail, reply_text
from .schemas import MODEL_NAME, ChatMessage, ChatRequest
from .streaming import aiter_list, chain, pieces, tail_pieces, thread_stream


def question_of(messages: list[ChatMessage]) -> str:
    for m in reversed(messages):
        if m.role != "user" or m.content is None:
            continue
        if isinstance(m.content, str):
            text = m.content
        else:
            text = " ".join(p.get("text", "") for p in m.content if p.get("type") == "text")
        if text.strip():
            return text.strip()
    raise HTTPException(400, "messages must hold a user message with text content")


def usage(cost: dict) -> dict:
    tot = (cost or {}).get("total", {})
    p, c = int(tot.get("prompt_tokens", 0)), int(tot.get("completion_tokens", 0))
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _sse(obj) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def router(s) -> APIRouter:
    api = APIRouter()
    holder, llm = s.holder, s.llm

    @api.get("/v1/models", dependencies=s.guarded)
    def models():
        return {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0,
                                            "owned_by": "contextrag"}]}

    @api.post("/v1/chat/completions", dependencies=s.guarded)
    async def chat(req: ChatRequest):
        question = question_of(req.messages)
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if not req.stream:
            text, hits, cites, cost, extra = await asyncio.to_thread(answer_question, holder.rag, llm, question,
                                                                     k=req.k, style=req.style)
            return {"id": cid, "object": "chat.completion", "created": created, "model": MODEL_NAME,
                    "choices": [{"index": 0, "message": {"role": "assistant",
                                                         "content": reply_text(text, hits, cites,
                                                                               extra.get("style", "short"))},
                                 "finish_reason": "stop"}],
                    "usage": usage(cost),
                    "contextrag": {"answer": text, "citations": cites,
                                   "hits": [{"n": n, **h.to_dict()} for n, h in enumerate(hits, 1)]}}

        def chunk(delta, finish=None):
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_NAME,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        want_usage = bool((req.stream_options or {}).get("include_usage"))
        if llm is None:     # retrieval only: the passages, in word-sized pieces
            text, hits, cites, cost, _ = await asyncio.to_thread(answer_question, holder.rag, llm, question, k=req.k)
            items = aiter_list([*pieces(reply_text(text, hits, cites)), ("cost", cost)])
        else:
            r = holder.rag
            items = thread_stream(lambda: r.answer_stream(question, llm=llm, k=req.k, style=req.style))
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
                yield b"data: [DONE]\n\n"
                return
            yield _sse(chunk({}, "stop"))
            if want_usage:
                yield _sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_NAME,
                            "choices": [], "usage": usage(cost)})
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return api
