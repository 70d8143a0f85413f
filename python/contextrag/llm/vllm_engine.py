"""In-process vLLM engine for batch generation on a GPU machine (the ``vllm`` extra, imported lazily).

Uses vLLM's offline API: ``LLM(model=...)`` and ``LLM.chat(conversations, SamplingParams)``, which
applies the model's chat template and batches the conversations. :meth:`complete_batch` serves
cached calls from the cache and sends only the misses to the engine, in one batch.
Not exercised by the CPU test-suite (no GPU, no vllm there).
"""
from __future__ import annotations

import threading
import time

from .base import Completion, LLMClient


class VLLMClient(LLMClient):
    def __init__(self, model: str, *, ledger=None, cache=None, **engine_kwargs):
        super().__init__(ledger=ledger, cache=cache)
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty model name or path, got {model!r}")
        self.model = model
        self.engine_kwargs = engine_kwargs
        self._llm = None
        self._lock = threading.Lock()

    def _engine(self):
        if self._llm is None:
            try:
                from vllm import LLM
            except ImportError as e:
                raise ImportError('the vLLM engine needs the vllm extra: pip install "contextrag[vllm]"') from e
            self._llm = LLM(model=self.model, **self.engine_kwargs)
        return self._llm

    def _run(self, conversations, max_tokens, temperature) -> list[Completion]:
        from vllm import SamplingParams

        sp = SamplingParams(max_tokens=max_tokens, temperature=temperature)
        t0 = time.perf_counter()
        with self._lock:
            outs = self._engine().chat(conversations, sp, use_tqdm=False)
        per = (time.perf_counter() - t0) / max(len(conversations), 1)
        res = []
        for o in outs:
            g = o.outputs[0]
            res.append(Completion(text=g.text, prompt_tokens=len(o.prompt_token_ids or []),
                                  completion_tokens=len(g.token_ids or []), seconds=per, model=self.model))
        return res

    def _generate(self, messages, *, max_tokens, temperature) -> Completion:
        return self._run([messages], max_tokens, temperature)[0]

    def complete_batch(self, conversations: list[list[dict]], *, stage: str = "other", max_tokens: int = 256,
                       temperature: float = 0.0) -> list[Completion]:
        """Many conversations at once: cache hits answered directly, misses generated in one batch."""
        if not isinstance(conversations, list):
            raise TypeError(f"conversations must be a list of message lists, got {type(conversations).__name__}")
        params = [self._check(m, stage, max_tokens, temperature) for m in conversations]
        out: list[Completion | None] = [self._cached(m, p, stage) for m, p in zip(conversations, params)]
        todo = [i for i, c in enumerate(out) if c is None]
        if todo:
            t0 = time.perf_counter()
            gen = self._run([conversations[i] for i in todo], max_tokens, float(temperature))
            for i, c in zip(todo, gen):
                out[i] = self._store(conversations[i], params[i], stage, c, t0)
        return out  # type: ignore[return-value]

    def close(self) -> None:
        self._llm = None
