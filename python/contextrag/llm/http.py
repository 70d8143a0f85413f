"""OpenAI-compatible HTTP client (vLLM's ``vllm serve``, llama.cpp's server, Ollama, hosted APIs).

``POST {base_url}/chat/completions`` with httpx. Timeouts, retries with exponential backoff (and
``Retry-After`` when the server sends one) on 429, 5xx, connection errors, timeouts, a response cut
off mid-way and a body that is not a chat completion, all within one ``deadline`` per call, the whole
call: a server that hangs or sends its headers or body a byte at a time costs at most that long, then a
clear LLMHTTPError (the model discovery of ``GET /models`` too); and a concurrency limit shared by the
sync and async paths. ``acomplete`` is truly asynchronous (httpx.AsyncClient),
so the three query rewrites go out at the same time. ``stream`` sends ``"stream": true`` and reads the
server-sent events as token deltas; a failure before the first delta is retried like any other, a
stream cut after it raises LLMHTTPError (the text already delivered cannot be taken back).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import threading
import time

from .base import Completion, LLMClient

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class LLMHTTPError(RuntimeError):
    """A request failed for good: a non-retryable status, or retries exhausted. ``timed_out``: the
    call's deadline passed (a server answers 504 for it, 502 for the rest)."""

    def __init__(self, message: str, status: int | None = None, timed_out: bool = False):
        super().__init__(message)
        self.status = status
        self.timed_out = timed_out


class _PastDeadline(Exception):
    """The call's deadline passed while a response was still arriving (internal to HTTPClient)."""


class _Watchdog:
    """Shuts the socket of one sync attempt down when the call's deadline passes, so a read blocked on a
    server that sends its response head a byte at a time (each byte within the read timeout) fails at
    once. The socket is learnt from httpcore's ``trace`` request extension when the attempt connects
    (the client keeps no idle connections, so every attempt does; a ``transport`` passed in that pools
    its own is watched on the attempts that connect); only that connection is touched, so concurrent
    calls keep theirs. It fires ``GRACE`` s after the deadline: a read whose timeout was cut
    to the deadline ends by that timeout first, with its own reason."""

    GRACE = 0.25

    def __init__(self, t_end: float):
        self.fired = False
        self._sock = None
        self._lock = threading.Lock()
        self._live = True
        self._timer = threading.Timer(max(t_end - time.monotonic(), 0.0) + self.GRACE, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict) -> None:
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with self._lock:
                    self._sock = sock
                    late = self.fired and self._live
                if late:
                    self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            if not self._live:
                return
            self.fired = True
            sock = self._sock
        if sock is not None:
            self._shut(sock)

    @staticmethod
    def _shut(sock) -> None:
        try:   # the plain socket call (a TLS socket's own shutdown would drop its SSL state under the reader)
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def stop(self) -> None:
        with self._lock:
            self._live = False
        self._timer.cancel()


class _Retry(Exception):
    """An attempt failed in a way another attempt may not (internal to HTTPClient)."""

    def __init__(self, why: str, response=None, status: int | None = None):
        super().__init__(why)
        self.why, self.response, self.status = why, response, status


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
                 async_transport=None, ledger=None, cache=None, extra_body: dict | None = None,
                 deadline: float = 300.0):
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
        if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not deadline > 0:
            raise ValueError(f"deadline must be > 0 seconds, got {deadline!r}")
        self.deadline = float(deadline)
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
        # no idle connections kept: every attempt opens its own, whose socket its _Watchdog can shut
        # without touching a connection another call is using
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=self._timeout,
                                    transport=transport, limits=httpx.Limits(max_keepalive_connections=0))
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
        """The first model the server lists; within the call deadline (a server that hangs or drips
        its reply costs at most that long), "default" when it cannot say."""
        t_end = time.monotonic() + self.deadline
        try:
            with self._send("GET", "/models", t_end, _Watchdog(t_end)) as r:
                r = self._whole(r, t_end)
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
                          model=str(data.get("model") or ""),
                          finish_reason="length" if choice.get("finish_reason") == "length" else "stop")

    def _retryable(self, exc_or_status) -> bool:
        if isinstance(exc_or_status, int):
            return exc_or_status in RETRY_STATUS or exc_or_status >= 500
        return isinstance(exc_or_status, self._httpx.TransportError)   # connect/read errors, timeouts

    # ---- one attempt's outcome, shared by the sync and async paths
    def _outcome(self, r, t0):
        """A Completion, or raise _Retry (worth another attempt) or LLMHTTPError (final)."""
        if r.status_code == 200:
            try:
                data = r.json()
            except ValueError:
                raise _Retry(f"a body that is not JSON ({r.text[:120]!r})", r) from None
            try:
                c = self._parse(data)
            except LLMHTTPError as e:
                raise _Retry(str(e), r) from None
            c.seconds = time.perf_counter() - t0
            return c
        if self._retryable(r.status_code):
            raise _Retry(f"HTTP {r.status_code}: {r.text[:200]}", r, r.status_code)
        raise LLMHTTPError(f"HTTP {r.status_code} from {self.base_url}: {r.text[:300]}", r.status_code)

    def _next(self, attempt, t_end, why, response=None, status=None) -> float:
        """Seconds to wait before the next attempt; LLMHTTPError when none is left."""
        left = t_end - time.monotonic()
        pause = self._delay(attempt, response)
        if attempt >= self.max_retries or pause >= left:
            n = attempt + 1
            raise LLMHTTPError(f"{self.base_url} failed {n} attempt{'s' if n > 1 else ''} within "
                               f"{self.deadline:g} s; last: {why}", status,
                               timed_out=pause >= left or "Timeout" in why)
        self.retries += 1
        return pause

    def _whole(self, r, t_end):
        """The streamed response ``r`` read whole, checking the deadline after every piece: each read
        has its own timeout, so a server sending a byte at a time would otherwise outlast any deadline."""
        parts = []
        for b in r.iter_bytes():
            parts.append(b)
            if time.monotonic() > t_end:
                raise _PastDeadline()
        return self._httpx.Response(r.status_code, headers=r.headers, content=b"".join(parts), request=r.request)

    async def _awhole(self, r, t_end):
        parts = []
        async for b in r.aiter_bytes():
            parts.append(b)
            if time.monotonic() > t_end:
                raise _PastDeadline()
        return self._httpx.Response(r.status_code, headers=r.headers, content=b"".join(parts), request=r.request)

    def _timed_lines(self, r, t_end):
        """``r.iter_lines()`` with the deadline checked after every read (a '\\n' byte never occurs
        inside a UTF-8 sequence, so splitting the bytes first is safe)."""
        buf = b""
        for b in r.iter_bytes():
            if time.monotonic() > t_end:
                raise _PastDeadline()
            buf += b
            *lines, buf = buf.split(b"\n")
            for ln in lines:
                yield ln.rstrip(b"\r").decode("utf-8", "replace")
        if buf:
            yield buf.rstrip(b"\r").decode("utf-8", "replace")

    def _past_deadline(self, attempt) -> LLMHTTPError:
        return LLMHTTPError(f"{self.base_url} did not finish within the {self.deadline:g} s deadline "
                            f"(attempt {attempt + 1})", timed_out=True)

    def _attempt_timeout(self, t_end):
        left = max(t_end - time.monotonic(), 0.001)
        return self._httpx.Timeout(min(self._timeout.read, left), connect=min(self._timeout.connect, left))

    @contextlib.contextmanager
    def _send(self, method, path, t_end, dog, **kw):
        """``self._client.stream(...)`` for one sync attempt, watched by ``dog`` until it is closed."""
        try:
            with self._client.stream(method, path, timeout=self._attempt_timeout(t_end),
                                     extensions={"trace": dog.trace}, **kw) as r:
                yield r
        finally:
            dog.stop()

    # ---- sync
    def _generate(self, messages, *, max_tokens, temperature) -> Completion:
        body = self._body(messages, max_tokens, temperature)
        t0 = time.perf_counter()
        t_end = time.monotonic() + self.deadline
        with self._sync_sem:
            for attempt in range(self.max_retries + 1):
                dog = _Watchdog(t_end)
                try:
                    with self._send("POST", "/chat/completions", t_end, dog, json=body) as r:
                        r = self._whole(r, t_end)
                    return self._outcome(r, t0)
                except _PastDeadline:
                    raise self._past_deadline(attempt) from None
                except self._httpx.TransportError as e:
                    if dog.fired:
                        raise self._past_deadline(attempt) from None
                    time.sleep(self._next(attempt, t_end, f"{type(e).__name__}: {e}"))
                except _Retry as e:
                    if dog.fired:       # the cut connection made the body look broken
                        raise self._past_deadline(attempt) from None
                    time.sleep(self._next(attempt, t_end, e.why, e.response, e.status))
        raise AssertionError("unreachable")

    # ---- sync, streamed (server-sent events)
    def _stream_generate(self, messages, *, max_tokens, temperature):
        body = self._body(messages, max_tokens, temperature)
        body.update(stream=True, stream_options={"include_usage": True})
        t0 = time.perf_counter()
        t_end = time.monotonic() + self.deadline
        with self._sync_sem:
            for attempt in range(self.max_retries + 1):
                sent = []
                dog = _Watchdog(t_end)
                try:
                    with self._send("POST", "/chat/completions", t_end, dog, json=body) as r:
                        if r.status_code != 200 or "text/event-stream" not in r.headers.get("content-type", ""):
                            c = self._outcome(self._whole(r, t_end), t0)   # an error, or "stream" ignored
                            if c.text:
                                yield c.text
                            yield c
                            return
                        final = Completion(text="")
                        for delta in self._events(self._timed_lines(r, t_end), final):
                            sent.append(delta)
                            yield delta
                    final.text = "".join(sent)
                    final.seconds = time.perf_counter() - t0
                    yield final
                    return
                except _PastDeadline:
                    raise self._past_deadline(attempt) from None
                except self._httpx.TransportError as e:
                    if dog.fired:
                        raise self._past_deadline(attempt) from None
                    if sent:
                        raise LLMHTTPError(f"{self.base_url} cut the stream after {len(''.join(sent))} "
                                           f"characters: {type(e).__name__}: {e}") from None
                    time.sleep(self._next(attempt, t_end, f"{type(e).__name__}: {e}"))
                except _Retry as e:
                    if dog.fired:
                        raise self._past_deadline(attempt) from None
                    if sent:
                        raise LLMHTTPError(f"{self.base_url} sent a broken stream after "
                                           f"{len(''.join(sent))} characters: {e.why}") from None
                    time.sleep(self._next(attempt, t_end, e.why, e.response, e.status))
        raise AssertionError("unreachable")

    @staticmethod
    def _events(lines, final: Completion):
        """The content deltas of an SSE chat-completions stream (its ``lines``); usage, model and finish
        reason go into ``final``. A stream that ends without ``[DONE]`` or a finish reason was cut."""
        done = False
        for line in lines:
            if not line.startswith("data:"):
                continue                            # comments, event names, keep-alives
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            try:
                ev = json.loads(data)
            except ValueError:
                raise _Retry(f"an event that is not JSON ({data[:120]!r})") from None
            if not isinstance(ev, dict):
                raise _Retry(f"an event that is not an object ({data[:120]!r})")
            if isinstance(ev.get("error"), (dict, str)):
                raise _Retry(f"the server reported an error mid-stream: {str(ev['error'])[:200]}")
            final.model = str(ev.get("model") or final.model)
            usage = ev.get("usage") or {}
            if usage:
                final.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                final.completion_tokens = int(usage.get("completion_tokens") or 0)
            for ch in ev.get("choices") or []:
                if not isinstance(ch, dict):
                    continue
                fr = ch.get("finish_reason")
                if fr:
                    final.finish_reason = "length" if fr == "length" else "stop"
                    done = True
                text = (ch.get("delta") or {}).get("content")
                if text:
                    yield text
        if not done:
            raise _Retry("the stream ended before its last event")

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
        t_end = time.monotonic() + self.deadline
        async with sem:
            for attempt in range(self.max_retries + 1):
                try:
                    # the whole attempt, response head included, under the time left
                    r = await asyncio.wait_for(self._apost(client, body, t_end), max(t_end - time.monotonic(), 0.001))
                    return self._outcome(r, t0)
                except (_PastDeadline, asyncio.TimeoutError):
                    raise self._past_deadline(attempt) from None
                except self._httpx.TransportError as e:
                    await asyncio.sleep(self._next(attempt, t_end, f"{type(e).__name__}: {e}"))
                except _Retry as e:
                    await asyncio.sleep(self._next(attempt, t_end, e.why, e.response, e.status))
        raise AssertionError("unreachable")

    async def _apost(self, client, body, t_end):
        async with client.stream("POST", "/chat/completions", json=body, timeout=self._attempt_timeout(t_end)) as r:
            return await self._awhole(r, t_end)

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
