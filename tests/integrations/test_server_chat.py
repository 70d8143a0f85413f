"""/v1/chat/completions reads the conversation: with an LLM the system message and earlier turns are
condensed into a standalone question; without one the earlier turns' names are carried into the query.
An unknown model is a 404 in OpenAI's error shape."""
from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from integration_corpus import answer_script  # noqa: E402
from live_server import LiveServer  # noqa: E402

from contextrag import ContextRAG  # noqa: E402
from contextrag.server import create_app  # noqa: E402

TURNS = [{"role": "system", "content": "You answer questions about companies."},
         {"role": "user", "content": "Who founded Halvorsen Labs?"},
         {"role": "assistant", "content": "Ivo Pettersen founded it."},
         {"role": "user", "content": "What does it build?"}]
STANDALONE = "What does Halvorsen Labs build?"


@pytest.fixture(scope="module")
def condensing(index_dir):
    from contextrag.llm.scripted import ScriptedClient
    seen = []

    def script(messages):
        if "standalone question" in messages[0]["content"]:
            seen.append(messages)
            return STANDALONE
        return answer_script(messages)

    with LiveServer(create_app(ContextRAG.load(index_dir), llm=ScriptedClient(script))) as s:
        s.seen = seen
        yield s


def _chat(url, messages, **kw):
    return httpx.post(url + "/v1/chat/completions", json={"model": "contextrag", "messages": messages, **kw},
                      timeout=120)


def test_llm_condenses_the_conversation(condensing):
    r = _chat(condensing.url, TURNS)
    assert r.status_code == 200, r.text
    j = r.json()["contextrag"]
    assert j["question"] == STANDALONE and j["hits"][0]["doc_id"] == "halvorsen"
    prompt = condensing.seen[-1]
    assert "You answer questions about companies." in prompt[0]["content"]        # the system message
    assert "Who founded Halvorsen Labs?" in prompt[1]["content"] and "What does it build?" in prompt[1]["content"]
    one = _chat(condensing.url, TURNS[-1:]).json()["contextrag"]                   # no history: no call
    assert one["question"] == "What does it build?" and len(condensing.seen) == 1


def test_llm_condenses_a_streamed_chat_too(condensing):
    with httpx.stream("POST", condensing.url + "/v1/chat/completions", timeout=120,
                      json={"model": "contextrag", "messages": TURNS, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["x-contextrag-question"] == STANDALONE
        body = r.read().decode()
    assert body.rstrip().endswith("data: [DONE]")


def test_without_llm_the_earlier_names_are_carried(index_dir):
    with LiveServer(create_app(ContextRAG.load(index_dir))) as s:
        j = _chat(s.url, TURNS).json()["contextrag"]
        assert j["question"] == "What does it build? (Halvorsen Labs)"
        assert j["hits"][0]["doc_id"] == "halvorsen"


def test_unknown_model_is_an_openai_404(condensing):
    r = _chat(condensing.url, TURNS[-1:], model="gpt-4o")
    err = r.json()["error"]
    assert r.status_code == 404 and "gpt-4o" in err["message"] and err["code"] == "model_not_found"
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=condensing.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="gpt-4o"):
        client.chat.completions.create(model="gpt-4o", messages=TURNS[-1:])
    bad = _chat(condensing.url, [{"role": "user"}], k=0)
    assert bad.status_code == 400 and "k" in bad.json()["error"]["message"]


def test_a_question_with_line_breaks_and_accents_streams(condensing):
    q = [{"role": "user", "content": "Wer gründete\r\nHalvorsen Labs?\x00"}]
    with httpx.stream("POST", condensing.url + "/v1/chat/completions", timeout=120,
                      json={"model": "contextrag", "messages": q, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["x-contextrag-question"] == "Wer gr\\xfcndete Halvorsen Labs?\\x00"
        assert r.read().decode().rstrip().endswith("data: [DONE]")
