"""contextrag: GPU-native kernels and a small orchestrator for extraction-free graph RAG."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["ContextRAG", "Config", "ops", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy: importing contextrag (or contextrag.ops) must not pull in the orchestrator's dependencies.
    import importlib
    if name == "Config":
        return importlib.import_module("contextrag.config").Config
    if name == "ContextRAG":
        return importlib.import_module("contextrag.rag").ContextRAG
    if name in ("ops", "ref"):
        return importlib.import_module(f"contextrag.{name}")
    raise AttributeError(f"module 'contextrag' has no attribute {name!r}")
