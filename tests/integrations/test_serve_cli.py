"""`contextrag serve` as a user starts it: a subprocess on a free loopback port, the API key from the
environment, retrieval only (--llm none)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from integration_corpus import QUESTION  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_command(index_dir):
    port = _free_port()
    env = {**os.environ, "CONTEXTRAG_API_KEY": "k-123"}
    proc = subprocess.Popen([sys.executable, "-m", "contextrag.cli", "serve", str(index_dir), "--port", str(port),
                             "--llm", "none", "--log-level", "warning"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        t = time.monotonic()
        while True:
            try:
                r = httpx.get(url + "/health", headers={"Authorization": "Bearer k-123"}, timeout=30)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() - t < 120, "server did not come up"
                time.sleep(0.3)
        assert r.status_code == 200 and r.json()["llm"] is None
        assert httpx.get(url + "/health").status_code == 401
        hits = httpx.post(url + "/retrieve", json={"question": QUESTION, "k": 3},
                          headers={"Authorization": "Bearer k-123"}, timeout=120).json()["hits"]
        assert len(hits) == 3
    finally:
        proc.terminate()
        proc.wait(30)


def test_serve_rejects_bad_arguments(index_dir, capsys):
    from contextrag.cli import build_parser, main
    assert build_parser().parse_args(["serve", "idx"]).host == "127.0.0.1"     # loopback unless told
    assert main(["serve", str(index_dir), "--port", "0"]) == 2
    assert "--port" in capsys.readouterr().err
    assert main(["serve", str(index_dir), "--max-body-mb", "0", "--llm", "none"]) == 2
