"""The HTTP API of ``contextrag serve`` (FastAPI; extra ``contextrag[server]``).

    POST /retrieve                 hits for a question (k, doc_ids, metadata filter, explain)
    POST /answer                   an answer (style short | paragraph | extractive) with numbered
                                   citations, its hits and cost
    GET  /health                   library and index format version, write generation, counts
    POST /documents                add documents (queued: one writer batches concurrent writes; the
                                   reply names the ids assigned)
    POST /documents/upload         add files (multipart) through the ingest readers
    GET  /documents                ids, titles, sources, sha256, chunk counts (offset, limit)
    DELETE /documents/{doc_id}     doc_id may hold '/' (folder-indexed files: people/a.txt)
    POST /v1/chat/completions      OpenAI-compatible chat answering from the index (stream: SSE, the
                                   answer's own stream: deltas as the LLM writes them)
    GET  /v1/models                the one model name ("contextrag")
    GET  /                         the web page (static/index.html); OpenAPI at /docs

The routes live in one router per group: routes_answers (page, health, retrieval, answers),
routes_documents (index updates), routes_openai (the OpenAI-compatible chat).
With an API key every route but the page, /docs and /openapi.json needs ``Authorization: Bearer KEY``.
Library errors in a request (bad k, unknown filter operator, unknown doc id) are 400 with the message;
under /v1 every error has OpenAI's shape ({"error": {"message", "type", "param", "code"}}). Only
loopback Host headers are accepted unless ``allowed_hosts`` names more (DNS rebinding). LLM work runs
behind its own limit and queue (limits.LLMGate): 503 when full, 502/504 when the LLM fails or is late.
"""
from __future__ import annotations

import hmac

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware

from ..config import DEFAULT_K
from . import routes_answers, routes_documents, routes_openai
from .limits import BodyLimit, LLMGate, host_patterns
from .schemas import MODEL_NAME  # noqa: F401  (re-exported)
from .state import IndexHolder, Served
from .validation import validation_reply


def _auth(api_key: str | None):
    bearer = HTTPBearer(auto_error=False)

    def auth(creds: HTTPAuthorizationCredentials | None = Depends(bearer)):
        if api_key is None:
            return
        if creds is None or not hmac.compare_digest(creds.credentials.encode(), api_key.encode()):
            raise HTTPException(401, "missing or wrong API key (Authorization: Bearer KEY)",
                                headers={"WWW-Authenticate": "Bearer"})
    return auth


_OPENAI_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 409: "conflict_error", 413: "invalid_request_error",
                 422: "invalid_request_error", 429: "rate_limit_error", 503: "server_error"}


def _openai_error(status: int, message: str, headers=None) -> JSONResponse:
    """OpenAI's error body, so the official clients show the message."""
    kind = _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    code = "model_not_found" if status == 404 and message.startswith("the model ") else None
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code}},
                        status_code=status, headers=headers)


def _error_handlers(app: FastAPI) -> None:
    async def http_error(request: Request, exc: StarletteHTTPException):
        if request.url.path.startswith("/v1/"):
            return _openai_error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))
        return await http_exception_handler(request, exc)

    async def invalid(request: Request, exc: RequestValidationError):
        if request.url.path.startswith("/v1/"):
            msg = "; ".join(f"{'.'.join(str(p) for p in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}"
                            for e in exc.errors())
            return _openai_error(400, msg or "invalid request")
        return validation_reply(exc)      # 400 for text that is not Unicode; 422 replies that always encode

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)


def check_api_key(api_key) -> None:
    if api_key is None:
        return
    if not isinstance(api_key, str) or not api_key:
        raise ValueError("api_key must be a non-empty str or None")
    if not api_key.isascii() or not api_key.isprintable() or any(c.isspace() for c in api_key):
        raise ValueError("api_key must be printable ASCII without spaces: an HTTP Authorization header "
                         "cannot carry other characters, so no client could ever send it")


def create_app(rag, *, llm=None, api_key: str | None = None, max_body_bytes: int = 8 << 20,
               default_k: int = DEFAULT_K, allowed_hosts=None, llm_limit: int = 4, llm_queue: int = 32) -> FastAPI:
    """The FastAPI app serving ``rag`` (a ContextRAG). ``llm``: an LLMClient for /answer and chat (None:
    retrieval only, the reply lists the passages); ``api_key``: bearer key required on the API;
    ``allowed_hosts``: Host names accepted besides the loopback ones ('*': any); ``llm_limit`` LLM
    calls run at once and ``llm_queue`` more wait (the rest get 503)."""
    check_api_key(api_key)
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be an int >= 1, got {max_body_bytes!r}")
    hosts = host_patterns(allowed_hosts)
    served = Served(holder=IndexHolder(rag), llm=llm, guarded=[Depends(_auth(api_key))], version=_version(),
                    llm_gate=LLMGate(llm_limit, llm_queue))
    app = FastAPI(title="contextrag", version=served.version,
                  description="Extraction-free graph RAG over one index: retrieval, answers, an "
                              "OpenAI-compatible chat endpoint and index updates.")
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts)    # outermost: refused before anything
    _error_handlers(app)
    app.state.holder = served.holder
    app.state.llm = llm
    for group in (routes_answers, routes_documents, routes_openai):
        app.include_router(group.router(served))
    return app


def _version() -> str:
    from .. import __version__
    return __version__
