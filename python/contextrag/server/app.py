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

The routes live in one router per group: routes_answers (page, health, retrieval, answers),
routes_documents (index updates), routes_openai (the OpenAI-compatible chat).
With an API key every route but the page, /docs and /openapi.json needs ``Authorization: Bearer KEY``.
Library errors in a request (bad k, unknown filter operator, unknown doc id) are 400 with the message.
"""
from __future__ import annotations

import hmac

from fastapi import Depends, FastAPI, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from . import routes_answers, routes_documents, routes_openai
from .answering import NO_LLM  # noqa: F401  (re-exported: the note of a retrieval-only answer)
from .limits import BodyLimit
from .schemas import MODEL_NAME  # noqa: F401  (re-exported)
from .state import IndexHolder, Served


def _auth(api_key: str | None):
    bearer = HTTPBearer(auto_error=False)

    def auth(creds: HTTPAuthorizationCredentials | None = Depends(bearer)):
        if api_key is None:
            return
        if creds is None or not hmac.compare_digest(creds.credentials.encode(), api_key.encode()):
            raise HTTPException(401, "missing or wrong API key (Authorization: Bearer KEY)",
                                headers={"WWW-Authenticate": "Bearer"})
    return auth


def create_app(rag, *, llm=None, api_key: str | None = None, max_body_bytes: int = 8 << 20,
               default_k: int = 12) -> FastAPI:
    """The FastAPI app serving ``rag`` (a ContextRAG). ``llm``: an LLMClient for /answer and chat (None:
    retrieval only, the reply lists the passages); ``api_key``: bearer key required on the API."""
    if api_key is not None and (not isinstance(api_key, str) or not api_key):
        raise ValueError("api_key must be a non-empty str or None")
    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be an int >= 1, got {max_body_bytes!r}")
    served = Served(holder=IndexHolder(rag), llm=llm, guarded=[Depends(_auth(api_key))], version=_version())
    app = FastAPI(title="contextrag", version=served.version,
                  description="Extraction-free graph RAG over one index: retrieval, answers, an "
                              "OpenAI-compatible chat endpoint and index updates.")
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.state.holder = served.holder
    app.state.llm = llm
    for group in (routes_answers, routes_documents, routes_openai):
        app.include_router(group.router(served))
    return app


def _version() -> str:
    from .. import __version__
    return __version__
