"""A scripted LLMClient for tests and dry runs: replies come from a Python function, with an optional
per-call delay. Use it only for logic a real model cannot drive deterministically (concurrency timing,
malformed replies); everything else is tested against the embedded model."""
from __future__ import annotations

import asyncio
import threading
import time

from .base import Completion, LLMClient


class ScriptedClient(LLMClient):
    """Replies from ``script(messages) -> str``; each call takes ``delay`` seconds (sync: sleep, async:
    asyncio.sleep). Counts calls and the most calls in flight at once."""

    model = "scripted"

    def __init__(self, script=None, delay: float = 0.0, **kw):
        super().__init__(**kw)
        self.script = script or (lambda m: "ok")
        self.delay = delay
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

    def _reply(self, messages):
        text = self.script(messages)
        p = sum(len(m["content"].split()) for m in messages)
        return Completion(text=text, prompt_tokens=p, completion_tokens=len(text.split()))

    def _generate(self, messages, *, max_tokens, temperature):
        self._enter()
        try:
            time.sleep(self.delay)
            return self._reply(messages)
        finally:
            self._exit()

    async def _agenerate(self, messages, *, max_tokens, temperature):
        self._enter()
        try:
            await asyncio.sleep(self.delay)
            return self._reply(messages)
        finally:
            self._exit()
