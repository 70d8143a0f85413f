"""``contextrag serve``: the HTTP API, the OpenAI-compatible chat endpoint and the web page
(extra ``contextrag[server]``: FastAPI + uvicorn). See :func:`create_app`."""
from __future__ import annotations

from .app import create_app

__all__ = ["create_app"]
