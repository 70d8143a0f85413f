"""The one LLM client interface every stage uses (index summaries; query rewrite, rerank, answer).

Every call goes through :meth:`LLMClient.complete` (or :meth:`LLMClient.stream`, the same call
delivered as text deltas), which records it in the client's :class:`~contextrag.llm.ledger.CostLedger`
under a stage name, so index and query costs are reported as the paper's Tables 1 and 6 do.
"""
from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass

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
    finish_reason: str = "stop"   # "length": generation stopped at max_tokens, the text may end mid-sentence


def _finish(value: dict, max_tokens: int) -> str:
    """A cached call's finish reason (entries written before it was stored: from the token count)."""
    fr = value.get("finish_reason")
    if fr in ("stop", "length"):
        return fr
    return "length" if int(value.get("completion_tokens") or 0) >= max_tokens else "stop"


class LLMClient(abc.ABC):
    """Subclasses implement :meth:`_generate`; callers use :meth:`complete` / :meth:`acomplete`."""

    model: str = "unknown"
    # True for the tiny embedded models: they run the pipeline offline but cannot write a useful
    # answer, so the default answer style is then extractive (contextrag.query.answer_style).
    small_model: bool = False

    def __init__(self, *, ledger: CostLedger | None = None, cache=None):
        self.ledger = ledger if ledger is not None else CostLedger()
        self.cache = cache  # contextrag.llm.cache.CallCache or None

    @abc.abstractmethod
    def _generate(self, messages: list[Message], *, max_tokens: int, temperature: float) -> Completion:
        """One uncached call to the model."""

    def _check(self, messages, stage, max_tokens, temperature) -> dict:
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in messages):
            raise ValueError("messages must be a non-empty list of {'role': str, 'content': str} dicts")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        if not isinstance(temperature, (int, float)) or not 0.0 <= float(temperature) <= 2.0:
            raise ValueError(f"temperature must be a number in [0, 2], got {temperature!r}")
        return {"max_tokens": int(max_tokens), "temperature": float(temperature)}

    def _cached(self, messages, params, stage) -> Completion | None:
        if self.cache is None:
            return None
        hit = self.cache.get(self.model, messages, params)
        if hit is None:
            return None
        c = Completion(hit["text"], hit.get("prompt_tokens", 0), hit.get("completion_tokens", 0),
                       0.0, True, self.model, _finish(hit, params["max_tokens"]))
        self.ledger.record(stage, c)
        return c

    def _store(self, messages, params, stage, c: Completion, t0: float) -> Completion:
        c.seconds = c.seconds or (time.perf_counter() - t0)
        c.model = c.model or self.model
        if self.cache is not None:
            self.cache.put(self.model, messages, params,
                           {"text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                            "finish_reason": c.finish_reason})
        self.ledger.record(stage, c)
        return c

    def complete(self, messages: list[Message], *, stage: str = "other", max_tokens: int = 256,
                 temperature: float = 0.0) -> Completion:
        params = self._check(messages, stage, max_tokens, temperature)
        hit = self._cached(messages, params, stage)
        if hit is not None:
            return hit
        t = time.perf_counter()
        c = self._generate(messages, **params)
        return self._store(messages, params, stage, c, t)

    def _stream_generate(self, messages: list[Message], *, max_tokens: int, temperature: float
                         ) -> Iterator[str | Completion]:
        """One uncached call as text deltas, then its Completion (whose text is the whole reply).
        The default sends the reply as one delta; clients that can stream override this."""
        c = self._generate(messages, max_tokens=max_tokens, temperature=temperature)
        if c.text:
            yield c.text
        yield c

    def stream(self, messages: list[Message], *, stage: str = "other", max_tokens: int = 256,
               temperature: float = 0.0) -> Iterator[str | Completion]:
        """:meth:`complete` delivered as it is generated: text deltas (str), then the Completion.

        The deltas joined are the reply as the model produced it; the Completion's text is the same
        reply as :meth:`complete` returns it (the same call cache and ledger; a cached reply arrives as
        one delta). Closing the iterator early stops the generation where the client can, and records
        nothing in the cache."""
        params = self._check(messages, stage, max_tokens, temperature)
        hit = self._cached(messages, params, stage)
        if hit is not None:
            if hit.text:
                yield hit.text
            yield hit
            return
        t = time.perf_counter()
        final = None
        for x in self._stream_generate(messages, **params):
            if isinstance(x, Completion):
                final = x
            elif x:
                yield x
        if final is None:       # a client bug, not a model reply: never cache it
            raise RuntimeError(f"{type(self).__name__}._stream_generate ended without a Completion")
        yield self._store(messages, params, stage, final, t)

    async def _agenerate(self, messages: list[Message], *, max_tokens: int, temperature: float) -> Completion:
        """Async uncached call; the default runs :meth:`_generate` in a worker thread.
        Clients with a native async transport (HTTP) override this."""
        return await asyncio.to_thread(self._generate, messages, max_tokens=max_tokens, temperature=temperature)

    async def acomplete(self, messages: list[Message], *, stage: str = "other", max_tokens: int = 256,
                        temperature: float = 0.0) -> Completion:
        """Async variant of :meth:`complete` (same cache and ledger)."""
        params = self._check(messages, stage, max_tokens, temperature)
        hit = await asyncio.to_thread(self._cached, messages, params, stage) if self.cache is not None else None
        if hit is not None:
            return hit
        t = time.perf_counter()
        c = await self._agenerate(messages, **params)
        if self.cache is not None:
            return await asyncio.to_thread(self._store, messages, params, stage, c, t)
        return self._store(messages, params, stage, c, t)

    def close(self) -> None:
        """Release resources (connections, model memory). Safe to call twice."""
