"""OpenAI-compatible HTTP client (vLLM's ``vllm serve``, llama.cpp's server, Ollama, hosted APIs).

``POST {base_url}/chat/completions`` with httpx. Timeouts, retries with exponential backoff (and
``Retry-After`` when the server sends one) on 429, 5xx and connection/timeouts, and a concurrency
limit shared by the sync and async paths. ``acomplete`` is truly asynchronous (httpx.AsyncClient),
so the three query rewrites go out at the same time.
"""
from __future__ import annotations

import asyncio
import os
import random
import threading
import time

from .base import Completion, LLMClient

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class LLMHTTPError(RuntimeError):
    """A request failed for good: a non-retryable status, or retries exhausted."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def _normalise_base_url(base_url: str) -> str:
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
    url = base_url.rstrip("/")
    if url.endswith("/chat/completions"):
        url = url[: -len("/chat/completions")]
    # "http://host:8000" → "http://host:8000/v1": the OpenAI path prefix every server above serves.
    path = url.split("://", 1)[1].partition("/")[2]
    if not path:
        url += "/v1"
    return url


class HTTPClient(LLMClient):
    """OpenAI-compatible chat-completions client.

    base_url: e.g. ``http://127.0.0.1:8000/v1`` (``/v1`` is appended when no path is given).
    model: model name sent to the server; None asks ``GET /models`` for the first one.
    api_key: explicit key, else env ``api_key_env`` (default ``CONTEXTRAG_LLM_API_KEY``, then
    ``OPENAI_API_KEY``); servers that need none get no Authorization header.
    """

    def __init__(self, base_url: str, *, model: str | None = None, api_key: str | None = None,
                 api_key_env: str = "CONTEXTRAG_LLM_API_KEY", timeout: float = 120.0,
                 connect_timeout: float = 10.0, max_retries: int = 4, backoff: float = 0.5,
                 max_backoff: float = 20.0, max_concurrency: int = 8, transport=None,
                 async_transport=None, ledger=None, cache=None, extra_body: dict | None = None):
        super().__init__(ledger=ledger, cache=cache)
        import httpx  # the `http` extra

        self.base_url = _normalise_base_url(base_url)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if backoff < 0 or max_backoff < 0:
            raise ValueError("backoff and max_backoff must be >= 0")
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_concurrency = max_concurrency
        self.extra_body = dict(extra_body or {})
        key = api_key or os.environ.get(api_key_env) or os.environ.get("OPENAI_API_KEY")
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._timeout = httpx.Timeout(timeout, connect=connect_timeout)
        self._headers = headers
        self._httpx = httpx
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=self._timeout,
                                    transport=transport)
        self._async_transport = async_transport
        self._aclients: dict[int, tuple] = {}   # id(loop) -> (AsyncClient, Semaphore)
        self._sync_sem = threading.BoundedSemaphore(max_concurrency)
        self._model_lock = threading.Lock()
        self.retries = 0                        # retried attempts, for tests and reports
        self.model = model or ""
        if not self.model:
            self.model = self._discover_model()

    # ---- helpers
    def _discover_model(self) -> str:
        try:
            r = self._client.get("/models")
            r.raise_for_status()
            data = r.json().get("data") or []
            if data and isinstance(data[0], dict) and data[0].get("id"):
                return str(data[0]["id"])
        except Exception:
            pass
        return "default"

    def _body(self, messages, max_tokens, temperature) -> dict:
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens,
                "temperature": temperature}
        body.update(self.extra_body)
        return body

    def _delay(self, attempt: int, response=None) -> float:
        if response is not None:
            ra = response.headers.get("retry-after")
            if ra:
                try:
                    return min(float(ra), self.max_backoff)
                except ValueError:
                    pass
        d = min(self.backoff * (2 ** attempt), self.max_backoff)
        return d * (0.5 + random.random() / 2)   # "equal jitter": in [d/2, d]

    @staticmethod
    def _parse(data: dict) -> Completion:
        try:
            choice = data["choices"][0]
            msg = choice.get("message") or {}
            text = msg.get("content")
            if text is None:
                text = choice.get("text", "")
        except (KeyError, IndexError, TypeError) as e:
            raise LLMHTTPError(f"malformed chat-completions response: {str(data)[:200]}") from e
        usage = data.get("usage") or {}
        return Completion(text=text or "", prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0),
                          model=str(data.get("model") or ""))

    def _retryable(self, exc_or_status) -> bool:
        if isinstance(exc_or_status, int):
            return exc_or_status in RETRY_STATUS or exc_or_status >= 500
        return isinstance(exc_or_status, self._httpx.TransportError)   # connect/read errors, timeouts

    # ---- sync
    def _generate(self, messages, *, max_tokens, temperature) -> Completion:
        body = self._body(messages, max_tokens, temperature)
        t0 = time.perf_counter()
        with self._sync_sem:
            for attempt in range(self.max_retries + 1):
                last = attempt == self.max_retries
                try:
                    r = self._client.post("/chat/completions", json=body)
                except self._httpx.TransportError as e:
                    if last:
                        raise LLMHTTPError(f"{type(e).__name__} after {attempt + 1} attempts: {e}") from e
                    self.retries += 1
                    time.sleep(self._delay(attempt))
                    continue
                if r.status_code == 200:
                    c = self._parse(r.json())
                    c.seconds = time.perf_counter() - t0
                    return c
                if not self._retryable(r.status_code) or last:
                    raise LLMHTTPError(f"HTTP {r.status_code} from {self.base_url}: {r.text[:300]}", r.status_code)
                self.retries += 1
                time.sleep(self._delay(attempt, r))
        raise AssertionError("unreachable")

    # ---- async
    def _aclient(self):
        loop = asyncio.get_running_loop()
        entry = self._aclients.get(id(loop))
        if entry is None or entry[2] is not loop:
            for k, (_, _, lp) in list(self._aclients.items()):   # clients of finished loops
                if lp.is_closed():
                    del self._aclients[k]
            ac = self._httpx.AsyncClient(base_url=self.base_url, headers=self._headers, timeout=self._timeout,
                                         transport=self._async_transport)
            entry = (ac, asyncio.Semaphore(self.max_concurrency), loop)
            self._aclients[id(loop)] = entry
        return entry[0], entry[1]

    async def _agenerate(self, messages, *, max_tokens, temperature) -> Completion:
        body = self._body(messages, max_tokens, temperature)
        client, sem = self._aclient()
        t0 = time.perf_counter()
        async with sem:
            for attempt in range(self.max_retries + 1):
                last = attempt == self.max_retries
                try:
                    r = await client.post("/chat/completions", json=body)
                except self._httpx.TransportError as e:
                    if last:
                        raise LLMHTTPError(f"{type(e).__name__} after {attempt + 1} attempts: {e}") from e
                    self.retries += 1
                    await asyncio.sleep(self._delay(attempt))
                    continue
                if r.status_code == 200:
                    c = self._parse(r.json())
                    c.seconds = time.perf_counter() - t0
                    return c
                if not self._retryable(r.status_code) or last:
                    raise LLMHTTPError(f"HTTP {r.status_code} from {self.base_url}: {r.text[:300]}", r.status_code)
                self.retries += 1
                await asyncio.sleep(self._delay(attempt, r))
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        for ac, _, _ in list(self._aclients.values()):
            await ac.aclose()
        self._aclients.clear()

    def close(self) -> None:
        self._client.close()
        for ac, _, loop in list(self._aclients.values()):
            if not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(ac.aclose())
        self._aclients.clear()
