"""`contextrag serve`'s app on a real uvicorn (loopback, free port), driven with httpx and with the
official openai client (streaming included). Answers come from a scripted LLM: fast and deterministic."""
from __future__ import annotations

import shutil
import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from integration_corpus import ANSWER, DOCS, QUESTION  # noqa: E402
from live_server import LiveServer  # noqa: E402

from contextrag import ContextRAG  # noqa: E402
from contextrag.server import create_app  # noqa: E402

KEY = "s3cret-key"
NEW_DOC = {"id": "lumen", "title": "Lumen Watch", "text": "The Lumen Watch is a solar wristwatch made by "
           "Quillon Industries since 2022.", "metadata": {"topic": "product", "year": 2022}}


@pytest.fixture
def served_copy(index_dir, tmp_path):
    """A private copy of the index directory: writes in these tests must not touch the shared one."""
    dst = tmp_path / "idx"
    shutil.copytree(index_dir, dst)
    return dst


@pytest.fixture(scope="module")
def server(index_dir):
    from contextrag.llm.scripted import ScriptedClient
    from integration_corpus import answer_script
    with LiveServer(create_app(ContextRAG.load(index_dir), llm=ScriptedClient(answer_script))) as s:
        yield s


def test_health_counts_and_version(server, rag):
    r = httpx.get(server.url + "/health")
    assert r.status_code == 200
    j = r.json()
    from contextrag import __version__
    from contextrag.index.store import FORMAT_VERSION
    assert j["version"] == __version__ and j["index_format_version"] == FORMAT_VERSION
    assert j["counts"] == {"docs": len(DOCS), "chunks": rag.index.n_chunks, "items": rag.index.n_items,
                           "nodes": rag.index.graph.n_nodes}
    assert j["generation"] == 0 and j["llm"] == "scripted"


def test_retrieve_matches_the_library(server, rag):
    r = httpx.post(server.url + "/retrieve", json={"question": QUESTION, "k": 5})
    assert r.status_code == 200, r.text
    want = rag.retrieve(QUESTION, k=5)
    got = r.json()["hits"]
    assert [h["id"] for h in got] == [h.id for h in want]
    assert got[0]["score"] == pytest.approx(want[0].score, rel=1e-5)
    assert set(got[0]["parts"]) >= {"bm25", "cos", "spread"} and "span" in got[0] and "title" in got[0]
    f = httpx.post(server.url + "/retrieve", json={"question": QUESTION, "k": 20,
                                                   "filter": {"topic": "person"}}).json()["hits"]
    assert f and {d for h in f for d in h["doc_ids"]} == {"veldt", "pettersen"}
    e = httpx.post(server.url + "/retrieve", json={"question": QUESTION, "k": 6, "explain": True}).json()
    assert all("explain" in h for h in e["hits"]) and {n["kind"] for n in e["graph"]["nodes"]} >= {"question", "seed"}


@pytest.mark.parametrize("body, status, text", [
    ({"question": QUESTION, "k": 0}, 422, "greater than or equal"),
    ({"question": ""}, 422, "at least 1"),
    ({"k": 3}, 422, "question"),
    ({"question": QUESTION, "filter": {"year": {"$regex": "1"}}}, 400, "operators must be"),
    ({"question": QUESTION, "overrides": {"w_nothing": 1}}, 400, "unknown query override"),
])
def test_bad_requests_name_the_problem(server, body, status, text):
    r = httpx.post(server.url + "/retrieve", json=body)
    assert r.status_code == status and text in r.text


def test_answer_has_numbered_citations(server):
    r = httpx.post(server.url + "/answer", json={"question": QUESTION, "k": 6, "explain": True})
    assert r.status_code == 200, r.text
    j = r.json()
    assert j["answer"] == ANSWER
    assert j["citations"] and all(ANSWER in j["hits"][n - 1]["text"] for n in j["citations"])
    assert all(ANSWER not in h["text"] for n, h in enumerate(j["hits"], 1) if n not in j["citations"])
    assert j["cost"]["total"]["calls"] >= 1 and "graph" in j
    blind = httpx.post(server.url + "/answer", json={"question": QUESTION, "filter": {"topic": "place"}}).json()
    assert blind["answer"] == "unknown" and blind["citations"] == []


def test_openai_client_chat_and_stream(server):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list()] == ["contextrag"]
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": QUESTION}]
    c = client.chat.completions.create(model="contextrag", messages=msgs)
    text = c.choices[0].message.content
    assert text.startswith(ANSWER + " [") and "Sources:" in text and "Quillon Industries" in text
    assert c.choices[0].finish_reason == "stop" and c.usage.total_tokens > 0
    parts, finish = [], None
    stream = client.chat.completions.create(model="contextrag", messages=msgs, stream=True,
                                            stream_options={"include_usage": True})
    usage = None
    for ch in stream:
        if ch.usage is not None:
            usage = ch.usage
        for choice in ch.choices:
            parts.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert "".join(parts) == text and len([p for p in parts if p]) > 3 and finish == "stop"
    assert usage is not None and usage.total_tokens == c.usage.total_tokens
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="contextrag", messages=[{"role": "system", "content": "x"}])


def test_api_key_and_open_pages(index_dir):
    with LiveServer(create_app(ContextRAG.load(index_dir), api_key=KEY)) as s:
        assert httpx.get(s.url + "/health").status_code == 401
        r = httpx.get(s.url + "/health", headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert httpx.get(s.url + "/health", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200
        assert httpx.post(s.url + "/retrieve", json={"question": QUESTION}).status_code == 401
        assert httpx.post(s.url + "/documents", json={"documents": [NEW_DOC]}).status_code == 401
        page = httpx.get(s.url + "/")
        assert page.status_code == 200 and 'id="question"' in page.text
        assert httpx.get(s.url + "/docs").status_code == 200
        spec = httpx.get(s.url + "/openapi.json").json()
        assert {"/retrieve", "/answer", "/health", "/documents", "/documents/{doc_id}",
                "/v1/chat/completions"} <= set(spec["paths"])
        openai = pytest.importorskip("openai")
        client = openai.OpenAI(base_url=s.url + "/v1", api_key=KEY, max_retries=0)
        reply = client.chat.completions.create(model="contextrag", messages=[{"role": "user", "content": QUESTION}])
        chat_text = reply.choices[0].message.content        # no LLM: the extractive answer, then its sources
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=s.url + "/v1", api_key="nope", max_retries=0).models.list()
        j = httpx.post(s.url + "/answer", json={"question": QUESTION},
                       headers={"Authorization": f"Bearer {KEY}"}).json()
        assert j["answer"] and j["style"] == "extractive" and j["citations"] and j["hits"]
        assert chat_text.startswith(j["answer"]) and "Sources:" in chat_text     # one answer everywhere
        assert all(0.0 <= h["relevance"] <= 1.0 for h in j["hits"])


def test_request_size_limit(served_copy):
    with LiveServer(create_app(ContextRAG.load(served_copy), max_body_bytes=4096)) as s:
        big = {"documents": [{"id": "big", "text": "word " * 2000}]}
        r = httpx.post(s.url + "/documents", json=big)
        assert r.status_code == 413 and "4096" in r.text
        chunks = (b'{"documents": [{"id": "big", "text": "' + b"w" * 1000, *[b"w" * 1000] * 5, b'"}]}')
        r = httpx.post(s.url + "/documents", content=iter(chunks), headers={"Content-Type": "application/json"})
        assert r.status_code == 413                       # chunked: counted as it arrives
        assert "big" not in ContextRAG.load(served_copy).index.docs
        assert httpx.post(s.url + "/retrieve", json={"question": QUESTION, "k": 2}).status_code == 200


def test_add_and_delete_documents(served_copy):
    with LiveServer(create_app(ContextRAG.load(served_copy))) as s:
        r = httpx.post(s.url + "/documents", json={"documents": [NEW_DOC]}, timeout=120)
        assert r.status_code == 201, r.text
        assert r.json()["generation"] == 1 and r.json()["docs"] == len(DOCS) + 1
        hits = httpx.post(s.url + "/retrieve", json={"question": "solar wristwatch", "k": 3}).json()["hits"]
        assert hits[0]["doc_id"] == "lumen" and hits[0]["metadata"] == NEW_DOC["metadata"]
        assert "lumen" in ContextRAG.load(served_copy).index.docs            # saved before the reply
        dup = httpx.post(s.url + "/documents", json={"documents": [NEW_DOC]}, timeout=120)
        assert dup.status_code == 400 and "already in the index" in dup.text
        assert httpx.delete(s.url + "/documents/lumen", timeout=120).status_code == 200
        assert httpx.delete(s.url + "/documents/lumen").status_code == 404
        h = httpx.get(s.url + "/health").json()
        assert h["generation"] == 2 and h["counts"]["docs"] == len(DOCS)
        assert "lumen" not in ContextRAG.load(served_copy).index.docs


class GatedRAG(ContextRAG):
    """add() applies and saves the change, then waits at a gate: the moment just before the swap."""
    applied = threading.Event()
    gate = threading.Event()

    def add(self, docs):
        out = super().add(docs)
        GatedRAG.applied.set()
        assert GatedRAG.gate.wait(60)
        return out


def test_writes_queue_behind_a_running_write_and_reads_go_on(served_copy):
    rag = GatedRAG.load(served_copy)
    with LiveServer(create_app(rag)) as s:
        result = {}

        def post(name, body):
            result[name] = httpx.post(s.url + "/documents", json=body, timeout=120)

        t = threading.Thread(target=post, args=("first", {"documents": [NEW_DOC]}))
        t.start()
        try:
            assert GatedRAG.applied.wait(120)
            # the change is applied and saved on a copy; the served index is still the old one, whole
            r = httpx.post(s.url + "/retrieve", json={"question": "solar wristwatch", "k": 20})
            assert r.status_code == 200 and "lumen" not in {h["doc_id"] for h in r.json()["hits"]}
            h = httpx.get(s.url + "/health").json()
            assert h["generation"] == 0 and h["counts"]["docs"] == len(DOCS)
            # a second write waits for the writer instead of being refused
            t2 = threading.Thread(target=post, args=("second", {"documents": [{"text": "another document"}]}))
            t2.start()
            t2.join(0.5)
            assert t2.is_alive() and "second" not in result
        finally:
            GatedRAG.gate.set()
            t.join(120)
            t2.join(120)
        assert result["first"].status_code == 201 and result["first"].json()["ids"] == ["lumen"]
        second = result["second"].json()
        assert result["second"].status_code == 201 and len(second["ids"]) == 1, second
        r = httpx.post(s.url + "/retrieve", json={"question": "solar wristwatch", "k": 3}).json()
        assert r["hits"][0]["doc_id"] == "lumen" and r["generation"] == 2
        assert second["ids"][0] in ContextRAG.load(served_copy).index.docs
