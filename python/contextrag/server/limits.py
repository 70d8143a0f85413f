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

    async def _refuse(self, send):
        body = json.dumps({"detail": f"request body larger than {self.max_bytes} bytes"}).encode()
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
                    return await self._refuse(send)
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
                await self._refuse(send)
