"""The HTTP API of ``contextrag serve`` (FastAPI; extra ``contextrag[server]``).

    POST /retrieve                 hits for a question (k, doc_ids, metadata filter, explain)
    POST /answer                   an answer (style short | paragraph | extractive) with numbered
                                   citations, its hits and cost
    GET  /health                   library and index format version, write generation, counts
    POST /documents                add documents            DELETE /documents/{doc_id}
    POST /v1/chat/completions      OpenAI-compatible chat answering from the index (stream: SSE, the
                                   answer's own stream: deltas as the LLM writes them)
    GET  /v1/models                the one model name ("contextrag")
    GET  /                         the web page (static/index.html); OpenAPI at /docs

With an API key every route but the page, /docs and /openapi.json needs ``Authorization: Bearer KEY``.
Library errors in a request (bad k, unknown filter operator, unknown doc id) are 400 with the message.
"""
from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from importlib import resources
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from .citations import reply_tail, reply_text
from .limits import BodyLimit
from .state import IndexHolder, WriteInProgress

MODEL_NAME = "contextrag"


# ---------------------------------------------------------------- request bodies
class _Query(BaseModel):
    question: str = Field(min_length=1, description="the question")
    k: int = Field(12, ge=1, le=1000, description="hits to return")
    doc_ids: list[str] | None = Field(None, description="only these documents (§4.6 doc_id filter)")
    filter: dict[str, Any] | None = Field(None, description="metadata conditions: {key: value | [values] | "
                                                            "{$eq|$ne|$in|$nin|$gt|$gte|$lt|$lte: ...}}")
    explain: bool = Field(False, description="add why each hit came and the graph that connected them")


class RetrieveRequest(_Query):
    overrides: dict[str, Any] = Field(default_factory=dict, description="Config query fields (w_bm25, ...)")


_STYLE = ("answer style: short (a few words), paragraph (cites passages as [n]), extractive (the "
          "sentences that answer, no generation), span (the name, date or number that answers); default: "
          "extractive without an LLM or with the tiny embedded one, else short")


class AnswerRequest(_Query):
    rewrite: bool = Field(True, description="LLM query rewrites")
    rerank: bool = Field(True, description="LLM rerank")
    style: str | None = Field(None, description=_STYLE)
    max_tokens: int | None = Field(None, ge=1, le=8192, description="answer length cap (default: the style's)")


class Document(BaseModel):
    id: str | None = None
    text: str = Field(min_length=1)
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AddRequest(BaseModel):
    documents: list[Document] = Field(min_length=1)


class ChatMessage(BaseModel):
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model: str = MODEL_NAME
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    k: int = Field(12, ge=1, le=1000, description="contextrag: passages the answer is drawn from")
    style: str | None = Field(None, description="contextrag: " + _STYLE)
    model_config = {"extra": "allow"}   # temperature, max_tokens, ...: accepted, the index's prompt decides


# ---------------------------------------------------------------- helpers
def _bad_request(e: Exception):
    return HTTPException(400, str(e))


def _question(messages: list[ChatMessage]) -> str:
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


def _usage(cost: dict) -> dict:
    tot = (cost or {}).get("total", {})
    p, c = int(tot.get("prompt_tokens", 0)), int(tot.get("completion_tokens", 0))
    return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}


def _sse(obj) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def _pieces(text: str):
    """The reply in word-sized pieces (whitespace kept), as a token stream would send it."""
    word = ""
    for ch in text:
        word += ch
        if ch.isspace():
            yield word
            word = ""
    if word:
        yield word


def _tail_pieces(tail: str):
    """The sources under a streamed reply, a line at a time."""
    for line in tail.splitlines(keepends=True):
        if line:
            yield line


async def _aiter_list(items):
    for x in items:
        yield x


async def _chain(first, rest):
    if first is not None:
        yield first
    async for x in rest:
        yield x


def _thread_stream(make):
    """An async iterator over the sync generator ``make()``, which runs in a worker thread (the LLM
    stream blocks); items pass through a queue as they come. Closing it early stops the generator."""
    import threading

    loop = asyncio.get_running_loop()
    q: asyncio.Queue = asyncio.Queue()
    stop = threading.Event()
    done = object()

    def put(item):
        try:
            loop.call_soon_threadsafe(q.put_nowait, item)
        except RuntimeError:          # the loop has closed (server shut down): nobody is listening
            stop.set()

    def work():
        gen = None
        try:
            gen = make()
            for x in gen:
                put((True, x))
                if stop.is_set():
                    break
        except BaseException as e:  # noqa: BLE001 - re-raised in the event loop
            put((False, e))
        finally:
            if gen is not None:
                gen.close()
            put((True, done))

    async def items():
        th = threading.Thread(target=work, name="contextrag-answer-stream", daemon=True)
        th.start()
        try:
            while True:
                ok, x = await q.get()
                if not ok:
                    raise x
                if x is done:
                    return
                yield x
        finally:
            stop.set()

    return items()


def create_app(rag, *, llm=None, api_key: str | None = None, max_body_bytes: int = 8 << 20,
               default_k: int = 12) -> FastAPI:
    """The FastAPI app serving ``rag`` (a ContextRAG). ``llm``: an LLMClient for /answer and chat (None:
    retrieval only, the reply lists the passages); ``api_key``: bearer key required on the API."""
    from ..query import neighbourhood

    if api_key is not None and (not isinstance(api_key, str) or not api_key):
        raise ValueError("api_key must be a non-empty str or None")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be an int >= 1, got {max_body_bytes!r}")
    holder = IndexHolder(rag)
    bearer = HTTPBearer(auto_error=False)

    def auth(creds: HTTPAuthorizationCredentials | None = Depends(bearer)):
        if api_key is None:
            return
        if creds is None or not hmac.compare_digest(creds.credentials.encode(), api_key.encode()):
            raise HTTPException(401, "missing or wrong API key (Authorization: Bearer KEY)",
                                headers={"WWW-Authenticate": "Bearer"})

    app = FastAPI(title="contextrag", version=_version(),
                  description="Extraction-free graph RAG over one index: retrieval, answers, an "
                              "OpenAI-compatible chat endpoint and index updates.")
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.state.holder = holder
    app.state.llm = llm
    guarded = [Depends(auth)]

    def _hits_payload(hits, explain):
        out = {"hits": [h.to_dict() for h in hits]}
        if explain:
            out["graph"] = neighbourhood(hits)
        return out

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page():
        return resources.files("contextrag.server").joinpath("static/index.html").read_text(encoding="utf-8")

    @app.get("/health", dependencies=guarded)
    def health():
        from ..index.store import FORMAT_VERSION
        r = holder.rag
        ix = r.index
        return {"status": "ok", "version": _version(), "index_format_version": FORMAT_VERSION,
                "generation": holder.generation, "path": r.path,
                "counts": {"docs": len(ix.docs), "chunks": ix.n_chunks, "items": ix.n_items,
                           "nodes": int(ix.graph.n_nodes)},
                "llm": getattr(llm, "model", None)}

    @app.post("/retrieve", dependencies=guarded)
    def retrieve(req: RetrieveRequest):
        t0 = time.perf_counter()
        r = holder.rag
        try:
            hits = r.retrieve(req.question, k=req.k, doc_ids=req.doc_ids, filter=req.filter,
                              explain=req.explain, **req.overrides)
        except (ValueError, TypeError) as e:
            raise _bad_request(e) from None
        return {"question": req.question, **_hits_payload(hits, req.explain),
                "seconds": time.perf_counter() - t0, "generation": holder.generation}

    def _answer(r, question, *, k, doc_ids=None, filter=None, explain=False, rewrite=True, rerank=True,
                style=None, max_tokens=None):
        """(answer text or None, hits, citations, cost, extra) for one question on index ``r``."""
        from .. import query
        try:      # one answer everywhere: no LLM is the extractive answer (query.answer_style)
            ans = r.answer(question, llm=llm if llm is not None else "none", k=k, doc_ids=doc_ids, filter=filter, rewrite=rewrite,
                           rerank=rerank, style=style, max_tokens=max_tokens)
            if explain:
                from ..query.filters import doc_ids_for
                query.explain(r.index, question, ans.hits, doc_ids=doc_ids_for(r.index, doc_ids, filter))
        except (ValueError, TypeError) as e:
            raise _bad_request(e) from None
        return ans.text, ans.hits, ans.citations, ans.cost, {"style": ans.style, "rewrites": ans.rewrites,
                                                              "reranked": ans.reranked}

    @app.post("/answer", dependencies=guarded)
    def answer(req: AnswerRequest):
        t0 = time.perf_counter()
        text, hits, cites, cost, extra = _answer(holder.rag, req.question, k=req.k, doc_ids=req.doc_ids,
                                                 filter=req.filter, explain=req.explain, rewrite=req.rewrite,
                                                 rerank=req.rerank, style=req.style, max_tokens=req.max_tokens)
        return {"question": req.question, "answer": text, "citations": cites,
                **_hits_payload(hits, req.explain), "cost": cost,
                "seconds": time.perf_counter() - t0, "generation": holder.generation, **extra}

    def _write(change):
        """One write through the holder: 409 while another runs, 400 for a change the index refuses."""
        try:
            return holder.write(change)
        except WriteInProgress as e:
            raise HTTPException(409, str(e)) from None
        except (ValueError, TypeError) as e:
            raise _bad_request(e) from None

    @app.post("/documents", dependencies=guarded, status_code=201)
    def add_documents(req: AddRequest):
        docs = [{k: v for k, v in d.model_dump().items() if v is not None} for d in req.documents]
        out = _write(lambda r: r.add(docs))
        return {"added": _jsonable(out), "generation": holder.generation, "docs": len(holder.rag.index.docs)}

    @app.delete("/documents/{doc_id}", dependencies=guarded)
    def delete_document(doc_id: str):
        if doc_id not in holder.rag.index.docs:
            raise HTTPException(404, f"no document {doc_id!r} in the index")
        out = _write(lambda r: r.delete([doc_id]))
        return {"deleted": _jsonable(out), "generation": holder.generation, "docs": len(holder.rag.index.docs)}

    @app.get("/v1/models", dependencies=guarded)
    def models():
        return {"object": "list", "data": [{"id": MODEL_NAME, "object": "model", "created": 0,
                                            "owned_by": "contextrag"}]}

    @app.post("/v1/chat/completions", dependencies=guarded)
    async def chat(req: ChatRequest):
        question = _question(req.messages)
        cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if not req.stream:
            text, hits, cites, cost, extra = await asyncio.to_thread(_answer, holder.rag, question, k=req.k,
                                                                     style=req.style)
            return {"id": cid, "object": "chat.completion", "created": created, "model": MODEL_NAME,
                    "choices": [{"index": 0, "message": {"role": "assistant",
                                                         "content": reply_text(text, hits, cites,
                                                                               extra.get("style", "short"))},
                                 "finish_reason": "stop"}],
                    "usage": _usage(cost),
                    "contextrag": {"answer": text, "citations": cites,
                                   "hits": [{"n": n, **h.to_dict()} for n, h in enumerate(hits, 1)]}}

        def chunk(delta, finish=None):
            return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_NAME,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        want_usage = bool((req.stream_options or {}).get("include_usage"))
        r = holder.rag
        items = _thread_stream(lambda: r.answer_stream(question, llm=llm if llm is not None else "none",
                                                       k=req.k, style=req.style))
        # retrieval, rewrites and rerank run before the first delta: a bad request is still a status code
        try:
            first = await items.__anext__()
        except StopAsyncIteration:
            first = None
        except (ValueError, TypeError) as e:
            raise _bad_request(e) from None
        items = _chain(first, items)

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
                        for piece in _tail_pieces(reply_tail(x.hits, x.citations, x.style)):
                            yield _sse(chunk({"content": piece}))
            except Exception as e:  # noqa: BLE001 - the response has started: report it in the stream
                yield _sse({"error": {"message": f"{type(e).__name__}: {e}", "type": "server_error"}})
                yield b"data: [DONE]\n\n"
                return
            yield _sse(chunk({}, "stop"))
            if want_usage:
                yield _sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": MODEL_NAME,
                            "choices": [], "usage": _usage(cost)})
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return app


def _version() -> str:
    from .. import __version__
    return __version__


def _jsonable(x):
    """add()/delete() summaries with NumPy scalars and arrays as plain JSON values."""
    import numpy as np
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x
