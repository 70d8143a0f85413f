"""A scripted LLMClient for tests and dry runs: replies come from a Python function, with an optional
per-call delay. Use it only for logic a real model cannot drive deterministically (concurrency timing,
malformed replies); everything else is tested against the embedded model."""
from __future__ import annotations

import asyncio
import re
import threading
import time

from .base import Completion, LLMClient


class ScriptedClient(LLMClient):
    """Replies from ``script(messages) -> str``; each call takes ``delay`` seconds (sync: sleep, async:
    asyncio.sleep). Counts calls and the most calls in flight at once."""

    model = "scripted"

    def __init__(self, script=None, delay: float = 0.0, *, small_model: bool = False, **kw):
        super().__init__(**kw)
        self.script = script or (lambda m: "ok")
        self.delay = delay
        self.small_model = small_model     # stand in for the tiny embedded model (default answer style)
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def _enter(self):
        with self._lock:
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _exit(self):
        with self._lock:
            self.in_flight -= 1

    def _reply(self, messages, max_tokens):
        """The script's reply, cut to ``max_tokens`` words (a word is a token here) as a model stops at
        its cap: then ``finish_reason`` is "length"."""
        text = self.script(messages)
        p = sum(len(m["content"].split()) for m in messages)
        words = re.findall(r"\S+\s*", text)
        if len(words) > max_tokens:
            return Completion(text="".join(words[:max_tokens]).rstrip(), prompt_tokens=p,
                              completion_tokens=max_tokens, finish_reason="length")
        return Completion(text=text, prompt_tokens=p, completion_tokens=len(words))

    def _generate(self, messages, *, max_tokens, temperature):
        self._enter()
        try:
            time.sleep(self.delay)
            return self._reply(messages, max_tokens)
        finally:
            self._exit()

    def _stream_generate(self, messages, *, max_tokens, temperature):
        """The reply in word-sized deltas (whitespace kept), as a token stream sends it."""
        c = self._generate(messages, max_tokens=max_tokens, temperature=temperature)
        yield from re.findall(r"\S+\s*|\s+", c.text)
        yield c

    async def _agenerate(self, messages, *, max_tokens, temperature):
        self._enter()
        try:
            await asyncio.sleep(self.delay)
            return self._reply(messages, max_tokens)
        finally:
            self._exit()
