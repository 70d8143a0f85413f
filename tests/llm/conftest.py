"""Fixtures for the LLM-layer tests."""
from __future__ import annotations

import importlib.util

import pytest


def llama_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


@pytest.fixture(scope="session")
def gguf_path():
    if not llama_available():
        pytest.skip("llama-cpp-python is not installed (the `local` extra)")
    from contextrag.llm.local import LocalLLMUnavailable, find_gguf
    try:
        return find_gguf()[1]
    except LocalLLMUnavailable as e:
        pytest.skip(str(e))
