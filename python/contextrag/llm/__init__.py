"""contextrag.llm: one client interface, one on-disk call cache, one cost ledger.

``make_client(spec)`` builds a client from a short spec:

* ``"local"`` or ``"local:NAME"`` — the embedded GGUF model, run by ``transformers`` on torch's CPU
  build (``local`` extra; no native compilation, runs on every x86-64 CPU);
* ``"llama-cpp"`` or ``"llama-cpp:NAME"`` — the same model through llama-cpp-python (optional
  ``llama-cpp`` extra, see docs/LLM.md for a portable build);
* ``"http://host:port/v1"`` (or https) — any OpenAI-compatible server; ``model=`` or
  ``"http://...#MODEL"`` names the model;
* ``"vllm:MODEL"`` — in-process vLLM (``vllm`` extra);
* ``None`` — env ``CONTEXTRAG_LLM`` if set, else no LLM (the embedded model is never chosen for
  you: it is too small to rewrite, rerank or answer usefully, so it runs only when asked for);
* ``"none"`` / ``"off"`` — no LLM (returns None: retrieval only).

Every client gets the shared on-disk cache (``cache=True``, the default; pass a CallCache, a path,
or False) and its own CostLedger unless one is passed.
"""
from __future__ import annotations

import os

from .base import Completion, LLMClient, Message, STAGES
from .cache import CallCache, cache_key, default_cache_path
from .ledger import CostLedger, StageCost

__all__ = ["Completion", "LLMClient", "Message", "STAGES", "CostLedger", "StageCost", "CallCache",
           "cache_key", "default_cache_path", "make_client"]


def _make_cache(cache):
    if cache is False or cache is None:
        return None
    if cache is True:
        return CallCache()
    if isinstance(cache, CallCache):
        return cache
    if isinstance(cache, (str, os.PathLike)):
        return CallCache(cache)
    raise TypeError(f"cache must be True, False, a path or a CallCache, got {type(cache).__name__}")


def make_client(spec=None, *, model: str | None = None, cache=True, ledger: CostLedger | None = None,
                **kwargs) -> LLMClient | None:
    """Build an LLM client from ``spec`` (see the module docstring). Extra kwargs go to the client."""
    if isinstance(spec, LLMClient):
        return spec
    if spec is None:
        spec = os.environ.get("CONTEXTRAG_LLM") or "none"
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a str, an LLMClient or None, got {type(spec).__name__}")
    s = spec.strip()
    if s.lower() in ("none", "off", ""):
        return None
    c = _make_cache(cache)
    if s == "local" or s.startswith("local:"):
        from .local import LocalLLMClient

        name = s.split(":", 1)[1] if ":" in s else None
        return LocalLLMClient(name=name or None, ledger=ledger, cache=c, **kwargs)
    if s == "llama-cpp" or s.startswith("llama-cpp:"):
        from .llama_cpp_client import LocalLlamaClient

        name = s.split(":", 1)[1] if ":" in s else None
        return LocalLlamaClient(name=name or None, ledger=ledger, cache=c, **kwargs)
    if s.startswith(("http://", "https://")):
        from .http import HTTPClient

        url, _, frag = s.partition("#")
        return HTTPClient(url, model=model or frag or os.environ.get("CONTEXTRAG_LLM_MODEL"), ledger=ledger,
                          cache=c, **kwargs)
    if s.startswith("vllm:"):
        from .vllm_engine import VLLMClient

        m = s.split(":", 1)[1]
        return VLLMClient(m, ledger=ledger, cache=c, **kwargs)
    raise ValueError(f"spec must be 'local', 'local:NAME', 'llama-cpp[:NAME]', 'http(s)://…', 'vllm:MODEL', 'none' or None, got {spec!r}")
