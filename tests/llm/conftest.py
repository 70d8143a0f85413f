"""Fixtures for the LLM-layer tests: the embedded model (one load per session) and a real
OpenAI-compatible HTTP server over it on 127.0.0.1."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from contextrag.llm.local import LocalLLMClient, LocalLLMUnavailable, find_gguf


@pytest.fixture(scope="session")
def gguf_path():
    try:
        return find_gguf()[1]
    except LocalLLMUnavailable as e:   # `make test` installs it: only a hand-made environment lacks it
        pytest.fail(f"the embedded model is part of the test install: {e}")


@pytest.fixture(scope="session")
def embedded(gguf_path):
    """One loaded embedded model for the session, without a call cache (tests add their own)."""
    c = LocalLLMClient(gguf_path, n_ctx=1024)
    c.complete([{"role": "user", "content": "Hi"}], max_tokens=1)     # load it once, here
    yield c
    c.close()


class _OpenAIHandler(BaseHTTPRequestHandler):
    """The two routes an OpenAI-compatible server must serve for HTTPClient, over the embedded model."""

    client: LocalLLMClient
    model_id = "embedded"

    def _send(self, status: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.model_id, "object": "model"}]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self):  # noqa: N802
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if req.get("model") != self.model_id:
            self._send(404, {"error": {"message": f"model {req.get('model')!r} not found"}})
            return
        kw = dict(max_tokens=int(req.get("max_tokens") or 16), temperature=float(req.get("temperature") or 0.0))
        if req.get("stream"):
            self._stream(req, kw)
            return
        c = self.client._generate(req["messages"], **kw)
        self._send(200, {"id": "c1", "object": "chat.completion", "model": self.model_id,
                         "choices": [{"index": 0, "finish_reason": "stop",
                                      "message": {"role": "assistant", "content": c.text}}],
                         "usage": {"prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                                   "total_tokens": c.prompt_tokens + c.completion_tokens}})

    def _stream(self, req, kw) -> None:
        """Server-sent events as OpenAI sends them: a chunk per token delta, the finish reason, the
        usage (asked for with stream_options), then [DONE]; the body ends when the connection closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def event(obj):
            self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
            self.wfile.flush()

        base = {"id": "c1", "object": "chat.completion.chunk", "model": self.model_id}
        for x in self.client._stream_generate(req["messages"], **kw):
            if isinstance(x, str):
                event({**base, "choices": [{"index": 0, "delta": {"content": x}, "finish_reason": None}]})
            else:
                event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": x.finish_reason}]})
                if (req.get("stream_options") or {}).get("include_usage"):
                    event({**base, "choices": [], "usage": {"prompt_tokens": x.prompt_tokens,
                                                            "completion_tokens": x.completion_tokens}})
        self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def log_message(self, *args):   # keep the test output clean
        pass


@pytest.fixture(scope="session")
def openai_server(embedded):
    """http://127.0.0.1:PORT/v1 serving the embedded model (chat completions and the model list)."""
    handler = type("Handler", (_OpenAIHandler,), {"client": embedded})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()
    th.join(10)
