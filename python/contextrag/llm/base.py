"""The one LLM client interface every stage uses (index summaries; query rewrite, rerank, answer).

Every call goes through :meth:`LLMClient.complete`, which records it in the client's
:class:`~contextrag.llm.ledger.CostLedger` under a stage name, so index and query costs are reported
as the paper's Tables 1 and 6 do.
"""
from __future__ import annotations

import abc
import asyncio
import time
from dataclasses import dataclass, field

from .ledger import CostLedger

Message = dict  # {"role": "system" | "user" | "assistant", "content": str}

STAGES = ("summaries", "rewrite", "rerank", "answer", "other")


@dataclass
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    model: str = ""


class LLMClient(abc.ABC):
    """Subclasses implement :meth:`_generate`; callers use :meth:`complete` / :meth:`acomplete`."""

    model: str = "unknown"

    def __init__(self, *, ledger: CostLedger | None = None, cache=None):
        self.ledger = ledger if ledger is not None else CostLedger()
        self.cache = cache  # contextrag.llm.cache.CallCache or None

    @abc.abstractmethod
    def _generate(self, messages: list[Message], *, max_tokens: int, temperature: float) -> Completion:
        """One uncached call to the model."""

    def complete(self, messages: list[Message], *, stage: str = "other", max_tokens: int = 256,
                 temperature: float = 0.0) -> Completion:
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
        params = {"max_tokens": int(max_tokens), "temperature": float(temperature)}
        if self.cache is not None:
            hit = self.cache.get(self.model, messages, params)
            if hit is not None:
                c = Completion(hit["text"], hit.get("prompt_tokens", 0), hit.get("completion_tokens", 0),
                               0.0, True, self.model)
                self.ledger.record(stage, c)
                return c
        t = time.perf_counter()
        c = self._generate(messages, **params)
        c.seconds = c.seconds or (time.perf_counter() - t)
        c.model = c.model or self.model
        if self.cache is not None:
            self.cache.put(self.model, messages, params,
                           {"text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens})
        self.ledger.record(stage, c)
        return c

    async def acomplete(self, messages: list[Message], **kw) -> Completion:
        """Async variant; the default runs the blocking call in a worker thread."""
        return await asyncio.to_thread(self.complete, messages, **kw)
