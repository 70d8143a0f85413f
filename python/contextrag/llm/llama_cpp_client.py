"""Optional: the embedded GGUF model run by llama-cpp-python instead of ``transformers``
(``make_client("llama-cpp")``, the ``llama-cpp`` extra). Not part of the default install.

llama-cpp-python compiles llama.cpp on install. A plain build targets the build machine's CPU and can
crash with SIGILL elsewhere; for one build that runs on every x86-64 CPU build it with run-time
dispatch: ``CMAKE_ARGS="-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF"
pip install "contextrag[llama-cpp]"`` (docs/LLM.md).
"""
from __future__ import annotations

import importlib.util
import os
import threading

from .base import Completion, LLMClient
from .local import LocalLLMUnavailable, is_embedded, model_file

# The gemma3 GGUF is the *base* model and carries no chat template: without one llama-cpp-python
# falls back to a generic format and the model stops at once (empty replies); Gemma's turn format works.
CHAT_FORMATS = {"gemma3-270m": "gemma"}

INSTALL_HINT = ('CMAKE_ARGS="-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF" '
                'pip install "contextrag[llama-cpp]"')


def llama_cpp_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


class LocalLlamaClient(LLMClient):
    """In-process llama.cpp generation (optional; the default local client is
    :class:`contextrag.llm.local.LocalLLMClient`). One model instance; calls are serialised by a lock
    (llama.cpp contexts are not thread-safe), so concurrency gives no speed-up here — it does
    against an HTTP server with parallel slots."""

    def __init__(self, model_path: str | os.PathLike | None = None, *, name: str | None = None,
                 n_ctx: int = 4096, n_threads: int | None = None, seed: int = 0, chat_format: str | None = None,
                 ledger=None, cache=None):
        super().__init__(ledger=ledger, cache=cache)
        if not llama_cpp_available():
            raise LocalLLMUnavailable(f"llama-cpp-python is not installed; {INSTALL_HINT}")
        model_name, path = model_file(model_path, name, n_ctx)
        self.model_path = path
        self.model = f"llama-cpp:{model_name}"
        self.small_model = is_embedded(model_name, path)
        self.chat_format = chat_format or CHAT_FORMATS.get(model_name)
        self.n_ctx = n_ctx
        if n_threads is None:
            env = os.environ.get("CONTEXTRAG_LLM_THREADS")
            # half the cores (at most 8): llama.cpp's threads spin at barriers, and on a small shared
            # machine one descheduled thread stalls all of them; the other half serves the embedder.
            n_threads = int(env) if env else max(1, min((os.cpu_count() or 2) // 2, 8))
        if isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1:
            raise ValueError(f"n_threads must be an int >= 1, got {n_threads!r}")
        self.n_threads = n_threads
        self.seed = seed
        self._llm = None
        self._lock = threading.Lock()

    def _load(self):
        if self._llm is None:
            from llama_cpp import Llama

            kw = {"chat_format": self.chat_format} if self.chat_format else {}
            self._llm = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                              seed=self.seed, verbose=False, **kw)
        return self._llm

    def _fit(self, llm, messages, max_tokens):
        """Trim the longest message so prompt + max_tokens fits the context window."""
        budget = self.n_ctx - max_tokens - 64
        total = sum(len(llm.tokenize(m["content"].encode("utf-8"), add_bos=False)) for m in messages)
        if total <= budget:
            return messages
        out = [dict(m) for m in messages]
        i = max(range(len(out)), key=lambda j: len(out[j]["content"]))
        toks = llm.tokenize(out[i]["content"].encode("utf-8"), add_bos=False)
        keep = max(16, len(toks) - (total - budget))
        out[i]["content"] = llm.detokenize(toks[:keep]).decode("utf-8", errors="ignore")
        return out

    def _generate(self, messages, *, max_tokens, temperature) -> Completion:
        with self._lock:
            llm = self._load()
            msgs = self._fit(llm, messages, max_tokens)
            r = llm.create_chat_completion(messages=msgs, max_tokens=max_tokens, temperature=temperature,
                                           seed=self.seed)
        usage = r.get("usage") or {}
        return Completion(text=r["choices"][0]["message"].get("content") or "",
                          prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0), model=self.model,
                          finish_reason="length" if r["choices"][0].get("finish_reason") == "length" else "stop")

    def close(self) -> None:
        with self._lock:
            if self._llm is not None:
                try:
                    self._llm.close()
                except AttributeError:
                    pass
                self._llm = None
