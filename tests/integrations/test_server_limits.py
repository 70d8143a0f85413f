"""The server's limits: LLM work apart from retrieval (48 hanging answers leave /retrieve and /health
answering; an unreachable LLM is a 502 with the reason), the Host check (DNS rebinding), the API key's
alphabet, refused filters and weights, and connections whose request head never ends."""
from __future__ import annotations

import socket
import threading
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from integration_corpus import QUESTION  # noqa: E402
from live_server import LiveServer  # noqa: E402

from contextrag import ContextRAG  # noqa: E402
from contextrag.server import create_app  # noqa: E402


def test_hanging_llm_calls_leave_retrieval_and_health_answering(index_dir):
    from contextrag.llm.scripted import ScriptedClient
    release = threading.Event()
    llm = ScriptedClient(lambda m: release.wait(60) and "unknown")
    with LiveServer(create_app(ContextRAG.load(index_dir), llm=llm, llm_limit=2, llm_queue=6)) as s:
        codes = []

        def ask():
            try:
                codes.append(httpx.post(s.url + "/answer", json={"question": QUESTION, "rewrite": False,
                                                                  "rerank": False}, timeout=90).status_code)
            except httpx.HTTPError as e:
                codes.append(type(e).__name__)

        threads = [threading.Thread(target=ask) for _ in range(48)]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 30
            while len(codes) < 40 and time.monotonic() < deadline:   # 8 admitted hang, the rest refused
                time.sleep(0.05)
            t0 = time.monotonic()
            assert httpx.get(s.url + "/health", timeout=10).status_code == 200
            r = httpx.post(s.url + "/retrieve", json={"question": QUESTION, "k": 3}, timeout=10)
            assert r.status_code == 200 and time.monotonic() - t0 < 10
            assert codes.count(503) == 40 and llm.max_in_flight <= 2
        finally:
            release.set()
            for t in threads:
                t.join(90)
        assert codes.count(200) == 8


def test_unreachable_llm_is_a_502_with_the_reason(index_dir):
    from contextrag.llm.http import HTTPClient
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()                                   # nothing listens there
    llm = HTTPClient(f"http://127.0.0.1:{port}/v1", model="m", max_retries=0, deadline=5)
    with LiveServer(create_app(ContextRAG.load(index_dir), llm=llm)) as s:
        r = httpx.post(s.url + "/answer", json={"question": QUESTION, "rewrite": False, "rerank": False}, timeout=30)
        assert r.status_code == 502 and f"127.0.0.1:{port}" in r.json()["detail"]
        c = httpx.post(s.url + "/v1/chat/completions", timeout=30,
                       json={"model": "contextrag", "messages": [{"role": "user", "content": QUESTION}]})
        assert c.status_code == 502 and "ConnectError" in c.json()["error"]["message"]
        assert httpx.post(s.url + "/retrieve", json={"question": QUESTION}).status_code == 200


def test_only_loopback_hosts_unless_configured(index_dir):
    rag = ContextRAG.load(index_dir)
    with LiveServer(create_app(rag)) as s:
        assert httpx.get(s.url + "/health").status_code == 200
        for host in ("localhost", f"localhost:{s.port}", "[::1]:80"):
            assert httpx.get(s.url + "/health", headers={"Host": host}).status_code == 200
        r = httpx.post(s.url + "/documents", headers={"Host": "attacker.example"},
                       json={"documents": [{"text": "x"}]})
        assert r.status_code == 400 and "host" in r.text.lower()
    with LiveServer(create_app(rag, allowed_hosts=["rag.internal"])) as s:
        assert httpx.get(s.url + "/health", headers={"Host": "rag.internal:8000"}).status_code == 200
        assert httpx.get(s.url + "/health", headers={"Host": "other.internal"}).status_code == 400


@pytest.mark.parametrize("key", ["schlüssel", "two words", "tab\tkey"])
def test_a_key_no_client_can_send_is_refused_at_start(rag, key):
    with pytest.raises(ValueError, match="api_key must be printable ASCII"):
        create_app(rag, api_key=key)


@pytest.fixture(scope="module")
def plain(index_dir):
    with LiveServer(create_app(ContextRAG.load(index_dir))) as s:
        yield s


@pytest.mark.parametrize("body, text", [
    ({"filter": {"$or": [{"topic": "person"}, {"topic": "place"}]}}, "top-level operators"),
    ({"filter": {"$where": "1"}}, "$where"),
    ({"overrides": {"w_bm25": 1e308}}, "overrides.w_bm25"),
    ({"overrides": {"w_cos": -1}}, "overrides.w_cos"),
])
def test_refused_filters_and_weights(plain, body, text):
    for route in ("/retrieve", "/answer") if "filter" in body else ("/retrieve",):
        r = httpx.post(plain.url + route, json={"question": QUESTION, **body})
        assert r.status_code == 400 and text in r.text, r.text


def test_a_request_head_that_never_ends_is_closed(index_dir):
    import uvicorn
    from contextrag.server.limits import header_deadline_protocol
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(create_app(ContextRAG.load(index_dir)), log_level="warning", lifespan="off",
                            http=header_deadline_protocol(0.5))
    server = uvicorn.Server(config)
    th = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    th.start()
    try:
        while not server.started:
            time.sleep(0.02)
        slow = socket.create_connection(("127.0.0.1", port))
        slow.settimeout(5)
        t0 = time.monotonic()
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        got = b"x"
        while got and time.monotonic() - t0 < 5:           # one header byte every 0.1 s, never finishing
            try:
                slow.sendall(b"X")
                time.sleep(0.1)
            except OSError:
                break
        try:
            got = slow.recv(100)
        except OSError:
            got = b""
        assert got == b"" and time.monotonic() - t0 < 3    # closed by the server, long before 5 s
        slow.close()
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200   # a whole request still works
    finally:
        server.should_exit = True
        th.join(10)
        sock.close()


def test_serve_hosts_from_the_command_line(index_dir):
    import argparse

    from contextrag.commands import serve
    p = argparse.ArgumentParser()
    serve.add_arguments(p)
    args = p.parse_args([str(index_dir), "--llm", "none", "--host", "10.1.2.3", "--allow-host", "rag.lan"])
    with LiveServer(serve.make_app(args)) as s:
        for host, code in (("10.1.2.3:8000", 200), ("rag.lan", 200), ("127.0.0.1", 200), ("evil.example", 400)):
            assert httpx.get(s.url + "/health", headers={"Host": host}).status_code == code, host
    with pytest.raises(SystemExit):
        p.parse_args([str(index_dir), "--header-timeout", "soon"])


def test_a_body_too_large_under_v1_is_an_openai_error(index_dir):
    with LiveServer(create_app(ContextRAG.load(index_dir), max_body_bytes=2048)) as s:
        msgs = [{"role": "user", "content": "word " * 1000}]
        r = httpx.post(s.url + "/v1/chat/completions", json={"model": "contextrag", "messages": msgs})
        assert r.status_code == 413 and "2048" in r.json()["error"]["message"]
        r = httpx.post(s.url + "/retrieve", json={"question": "word " * 1000})
        assert r.status_code == 413 and "2048" in r.json()["detail"]
