"""Request-size limit as ASGI middleware: a declared Content-Length over the limit is refused before
the body is read, and a chunked body is counted as it arrives (413 either way)."""
from __future__ import annotations

import json

from starlette.exceptions import HTTPException


class _TooLarge(HTTPException):
    """Raised from the counted receive(): FastAPI lets an HTTPException from body reading through,
    so the app answers 413 (other errors there become a generic 400)."""

    def __init__(self, max_bytes: int):
        super().__init__(413, f"request body larger than {max_bytes} bytes")


class BodyLimit:
    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = int(max_bytes)

    async def _refuse(self, scope, send):
        msg = f"request body larger than {self.max_bytes} bytes"
        if scope.get("path", "").startswith("/v1/"):     # OpenAI's error shape there, as app.py's handlers
            payload = {"error": {"message": msg, "type": "invalid_request_error", "param": None, "code": None}}
        else:
            payload = {"detail": msg}
        body = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > self.max_bytes:
                    return await self._refuse(scope, send)
        seen = 0
        started = False

        async def counted():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
            return msg

        async def tracked(msg):
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if not started:
                await self._refuse(scope, send)


# ---------------------------------------------------------------- hosts (DNS rebinding)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def host_patterns(allowed_hosts) -> list[str]:
    """The Host header values the app accepts: loopback names always, plus ``allowed_hosts`` (names or
    addresses, '*.example.org' for subdomains, '*' for any). A page on another site that rebinds its
    name to 127.0.0.1 sends its own name as Host and is refused."""
    if allowed_hosts is None:
        allowed_hosts = ()
    if isinstance(allowed_hosts, str):
        allowed_hosts = (allowed_hosts,)
    extra = []
    for h in allowed_hosts:
        if not isinstance(h, str) or not h.strip():
            raise ValueError(f"allowed_hosts must be host names (str), got {h!r}")
        h = h.strip().lower()
        extra.append(f"[{h}]" if ":" in h and not h.startswith("[") else h)   # an IPv6 address
    return [*LOOPBACK_HOSTS, *extra]


# ---------------------------------------------------------------- LLM work
class LLMBusy(HTTPException):
    def __init__(self, running: int, waiting: int):
        super().__init__(503, f"the LLM is busy ({running} calls running, {waiting} waiting); retry later",
                         headers={"Retry-After": "5"})


class LLMGate:
    """LLM work apart from retrieval: at most ``limit`` calls run (in the gate's own threads, so a hung
    LLM never holds the threads retrieval and /health run in), ``queue`` more wait, the rest get 503.
    An LLM failure becomes 502 (its reason), a deadline passed 504."""

    def __init__(self, limit: int = 4, queue: int = 32):
        from concurrent.futures import ThreadPoolExecutor
        for name, v in (("llm_limit", limit), ("llm_queue", queue)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name == "llm_limit" else 0):
                raise ValueError(f"{name} must be an int >= {1 if name == 'llm_limit' else 0}, got {v!r}")
        self.limit, self.queue = limit, queue
        self.executor = ThreadPoolExecutor(limit, thread_name_prefix="contextrag-llm")
        self.admitted = 0          # running + waiting; touched only on the event loop

    def _admit(self):
        if self.admitted >= self.limit + self.queue:
            raise LLMBusy(min(self.admitted, self.limit), max(self.admitted - self.limit, 0))
        self.admitted += 1

    async def run(self, fn, *args, **kw):
        """``fn(*args, **kw)`` in the gate's threads."""
        import asyncio
        import functools
        self._admit()
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, functools.partial(fn, *args, **kw))
        except Exception as e:  # noqa: BLE001 - mapped or re-raised
            raise llm_failure(e) from None
        finally:
            self.admitted -= 1

    def stream(self, make):
        """An async iterator over the sync generator ``make()``, run in the gate's threads; it holds its
        place in the gate until it ends or is closed."""
        from .streaming import thread_stream
        self._admit()
        released = False

        def release():
            nonlocal released
            if not released:
                released = True
                self.admitted -= 1

        async def items():
            try:
                async for x in thread_stream(make, self.executor):
                    yield x
            except Exception as e:  # noqa: BLE001
                raise llm_failure(e) from None
            finally:
                release()
        return items()


def llm_failure(e: Exception) -> Exception:
    """An LLM client's failure as the HTTP error a caller can act on (others pass through)."""
    from ..llm.http import LLMHTTPError
    if isinstance(e, HTTPException):
        return e
    if isinstance(e, TimeoutError) or (isinstance(e, LLMHTTPError) and e.timed_out):
        return HTTPException(504, f"the LLM did not answer in time: {e}")
    if isinstance(e, (LLMHTTPError, ConnectionError)):
        return HTTPException(502, f"the LLM failed: {e}")
    return e


# ---------------------------------------------------------------- slow request headers
def header_deadline_protocol(seconds: float):
    """uvicorn's h11 protocol with a deadline on each request's headers: a connection that has not
    sent a whole request head within ``seconds`` of connecting (or of its previous response) is
    closed. uvicorn arms its keep-alive timer only after a response, and data cancels it, so a client
    sending a header byte at a time would otherwise hold its connection for ever."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    if not seconds > 0:
        raise ValueError(f"header timeout must be > 0 seconds, got {seconds!r}")

    class HeaderDeadline(H11Protocol):
        header_timeout = float(seconds)
        _head_timer = None

        def _arm(self):
            self._disarm()
            self._head_timer = self.loop.call_later(self.header_timeout, self._head_expired)

        def _disarm(self):
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_expired(self):
            self._head_timer = None
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self.transport.close()

        def connection_made(self, transport):
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self):
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc):
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadline
