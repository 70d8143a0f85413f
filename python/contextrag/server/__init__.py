"""``contextrag serve``: the HTTP API, the OpenAI-compatible chat endpoint and the web page
(extra ``contextrag[server]``: FastAPI + uvicorn). See :func:`create_app`.

``create_app`` is imported on first use, so ``contextrag.server.mcp_tools`` (extra ``contextrag[mcp]``)
imports without FastAPI installed."""
from __future__ import annotations

__all__ = ["create_app"]


def __getattr__(name):
    if name == "create_app":
        from .app import create_app
        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
