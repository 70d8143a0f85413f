"""An LLM server that fails (5xx, hangs, malformed JSON, a response cut off mid-way): a real HTTP server
on 127.0.0.1 in a thread. The client retries within its deadline, then raises one clear LLMHTTPError;
retrieval without an LLM keeps working."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("httpx")
from contextrag.llm.http import HTTPClient, LLMHTTPError  # noqa: E402

MSG = [{"role": "user", "content": "Say hi"}]
OK = json.dumps({"model": "m", "choices": [{"message": {"role": "assistant", "content": "hi there"}}],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 2}}).encode()


class _LocalServer:
    """A ThreadingHTTPServer on 127.0.0.1 serving ``handler`` while the ``with`` block runs."""

    def _serve(self, handler):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class FaultServer(_LocalServer):
    """Answers each POST with the next behaviour of ``script`` (the last one repeats)."""

    def __init__(self, script):
        self.script, self.calls = list(script), 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                i = owner.calls
                owner.calls += 1
                kind = owner.script[min(i, len(owner.script) - 1)]
                if kind == "ok":
                    self._send(200, OK)
                elif kind == "500":
                    self._send(500, b'{"error": "boom"}')
                elif kind == "garbage":
                    self._send(200, b'{"choices": [{"message": ')          # truncated JSON
                elif kind == "shape":
                    self._send(200, b'{"unexpected": true}')
                elif kind == "hang":
                    time.sleep(3)
                    self._send(200, OK)
                elif kind == "drop":                                       # promise 400 bytes, send 20, close
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "400")
                    self.end_headers()
                    self.wfile.write(OK[:20])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)

            def _send(self, code, body):
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:       # the client gave up (the hang case): nothing to answer
                    pass

        self._serve(Handler)


def _client(url, **kw):
    kw.setdefault("backoff", 0.01)
    kw.setdefault("timeout", 2.0)
    return HTTPClient(url, model="m", **kw)


@pytest.mark.parametrize("fault", ["500", "garbage", "shape", "drop"])
def test_transient_fault_is_retried_then_succeeds(fault):
    with FaultServer([fault, fault, "ok"]) as srv:
        c = _client(srv.url)
        assert c.complete(MSG).text == "hi there"
        assert srv.calls == 3 and c.retries == 2


@pytest.mark.parametrize("fault,why", [("500", "HTTP 500"), ("garbage", "not JSON"), ("shape", "malformed"),
                                       ("drop", "RemoteProtocolError|ReadError")])
def test_persistent_fault_gives_one_clear_error(fault, why):
    with FaultServer([fault]) as srv:
        c = _client(srv.url, max_retries=2)
        with pytest.raises(LLMHTTPError, match=why) as e:
            c.complete(MSG)
        assert srv.calls == 3 and "3 attempts" in str(e.value) and srv.url in str(e.value)


def test_hanging_server_fails_within_the_deadline():
    with FaultServer(["hang"]) as srv:
        c = _client(srv.url, timeout=0.3, deadline=1.2, max_retries=10)
        t = time.monotonic()
        with pytest.raises(LLMHTTPError, match="within 1.2 s.*ReadTimeout"):
            c.complete(MSG)
        assert time.monotonic() - t < 3.0 and srv.calls >= 2


def test_async_path_retries_the_same_faults():
    with FaultServer(["drop", "garbage", "500", "ok"]) as srv:
        c = _client(srv.url)
        assert asyncio.run(c.acomplete(MSG)).text == "hi there"
        assert srv.calls == 4
    with FaultServer(["500"]) as srv:
        c = _client(srv.url, max_retries=1)
        with pytest.raises(LLMHTTPError, match="2 attempts"):
            asyncio.run(c.acomplete(MSG))


def test_deadline_is_validated():
    with pytest.raises(ValueError, match="deadline"):
        HTTPClient("http://127.0.0.1:9/v1", model="m", deadline=0)


class DripServer(_LocalServer):
    """Sends its reply (a JSON body, an SSE stream or the /models list) one byte every ``pause``
    seconds: every read succeeds, so only a deadline on the whole call can end it."""

    def __init__(self, pause=0.2):
        owner = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _drip(self, ctype, body):
                owner.requests += 1
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    for i in range(len(body)):
                        self.wfile.write(body[i:i + 1])
                        self.wfile.flush()
                        time.sleep(pause)
                except OSError:
                    pass

            def do_GET(self):
                self._drip("application/json", b'{"data": [{"id": "dripped-model"}]}' + b" " * 200)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if body.get("stream"):
                    ev = {"choices": [{"delta": {"content": "hi "}}]}
                    self._drip("text/event-stream", b"".join(f"data: {json.dumps(ev)}\n\n".encode() for _ in range(60)))
                else:
                    self._drip("application/json", OK + b" " * 400)

        self._serve(Handler)


@pytest.mark.parametrize("path", ["sync", "stream", "async"])
def test_a_dripping_server_is_cut_at_the_deadline(path):
    with DripServer() as srv:
        c = _client(srv.url, timeout=1.0, deadline=1.5, max_retries=3)
        t = time.monotonic()
        with pytest.raises(LLMHTTPError, match="1.5 s deadline") as e:
            if path == "sync":
                c.complete(MSG)
            elif path == "stream":
                list(c.stream(MSG))
            else:
                asyncio.run(c.acomplete(MSG))
        assert e.value.timed_out and time.monotonic() - t < 3.0    # each byte came within the read timeout


def test_model_discovery_runs_within_the_deadline():
    with DripServer() as srv:
        t = time.monotonic()
        c = HTTPClient(srv.url, timeout=1.0, deadline=1.0)
        assert c.model == "default" and time.monotonic() - t < 2.5 and srv.requests == 1


class HeadDripServer(_LocalServer):
    """Sends its status line and headers one byte every ``pause`` seconds (each byte within the read
    timeout, the head never done before the deadline): only a watch over the whole call can end it."""

    HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + b"".join(b"X-Slow-%d: %s\r\n" % (i, b"x" * 20) for i in range(10)) + b"\r\n")

    def __init__(self, pause=0.2):
        owner = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _drip_head(self):
                owner.requests += 1
                try:
                    for i in range(len(owner.HEAD)):
                        self.wfile.write(owner.HEAD[i:i + 1])
                        self.wfile.flush()
                        time.sleep(pause)
                except OSError:         # the client cut the connection: what the test expects
                    pass
                self.close_connection = True

            def do_GET(self):
                self._drip_head()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if b"quick" in body:            # answered at once: the calls that must not be disturbed
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(OK)))
                    self.end_headers()
                    self.wfile.write(OK)
                    return
                self._drip_head()

        self._serve(Handler)


@pytest.mark.parametrize("path", ["sync", "stream"])
def test_a_server_dripping_its_headers_is_cut_at_the_deadline(path):
    with HeadDripServer() as srv:
        c = _client(srv.url, timeout=1.0, deadline=1.5, max_retries=3)
        t = time.monotonic()
        with pytest.raises(LLMHTTPError, match="1.5 s deadline") as e:
            if path == "sync":
                c.complete(MSG)
            else:
                list(c.stream(MSG))
        assert e.value.timed_out and time.monotonic() - t < 3.0 and srv.requests == 1


def test_model_discovery_from_a_server_dripping_its_headers_runs_within_the_deadline():
    with HeadDripServer() as srv:
        t = time.monotonic()
        c = HTTPClient(srv.url, timeout=1.0, deadline=1.5)
        assert c.model == "default" and time.monotonic() - t < 3.0 and srv.requests == 1


def test_cutting_one_dripping_head_leaves_concurrent_calls_alone():
    """One call stuck on a dripping head is cut at its deadline; calls through the same client at the
    same time, to which the server answers at once, all succeed."""
    with HeadDripServer() as srv:
        c = _client(srv.url, timeout=1.0, deadline=1.5, max_retries=0)
        quick = [{"role": "user", "content": "quick"}]
        results, stop = [], threading.Event()

        def quick_calls():
            while not stop.is_set():
                results.append(c.complete(quick).text)
                time.sleep(0.02)

        th = threading.Thread(target=quick_calls)
        th.start()
        try:
            with pytest.raises(LLMHTTPError) as e:
                c.complete(MSG)
        finally:
            stop.set()
            th.join()
        assert e.value.timed_out and len(results) >= 5 and set(results) == {"hi there"}
