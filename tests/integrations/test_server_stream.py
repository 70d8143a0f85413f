"""The chat endpoint streams the answer as the LLM writes it (not a finished answer cut into pieces),
and /answer takes the answer style — on a real uvicorn, with a scripted LLM whose stream waits for the
client to have seen the first sentence before it writes the second."""
from __future__ import annotations

import json
import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

from integration_corpus import QUESTION, answer_script  # noqa: E402
from live_server import LiveServer  # noqa: E402

from contextrag import ContextRAG  # noqa: E402
from contextrag.llm import Completion  # noqa: E402
from contextrag.llm.scripted import ScriptedClient  # noqa: E402
from contextrag.server import create_app  # noqa: E402

FIRST = "Mara Veldt founded Quillon Industries [2]."
SECOND = " She started it in 1987 [2][99]."


class GatedClient(ScriptedClient):
    """Writes the paragraph answer in two parts and waits, between them, for ``gate``."""

    def __init__(self):
        super().__init__(self.reply)
        self.gate = threading.Event()
        self.waited = None

    @staticmethod
    def reply(messages):
        return FIRST + SECOND if "Answer the question" in messages[-1]["content"] else answer_script(messages)

    def _stream_generate(self, messages, *, max_tokens, temperature):
        if "Answer the question" not in messages[-1]["content"]:
            yield from super()._stream_generate(messages, max_tokens=max_tokens, temperature=temperature)
            return
        yield FIRST + " "
        self.waited = self.gate.wait(120)     # generous: a loaded machine may be slow to deliver
        yield SECOND.lstrip()
        yield Completion(text=FIRST + SECOND, prompt_tokens=10, completion_tokens=12)


@pytest.fixture(scope="module")
def gated(index_dir):
    llm = GatedClient()
    with LiveServer(create_app(ContextRAG.load(index_dir), llm=llm)) as s:
        yield s, llm


def _content(events):
    return [c["delta"].get("content") or "" for e in events for c in e.get("choices", [])]


def test_chat_stream_delivers_sentences_as_they_are_written(gated):
    server, llm = gated
    body = {"model": "contextrag", "messages": [{"role": "user", "content": QUESTION}], "stream": True,
            "style": "paragraph", "k": 6, "stream_options": {"include_usage": True}}
    events = []
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=180) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            events.append(json.loads(line[6:]))
            if FIRST in "".join(_content(events)):
                llm.gate.set()          # only now may the model write its second sentence
    assert llm.waited is True           # the first sentence reached the client while the model was waiting
    parts = _content(events)
    assert parts[1] == FIRST and parts[2] == " She started it in 1987 [2]."      # [99] names no passage
    assert events[-1]["usage"]["completion_tokens"] >= 12      # the answer call, plus rewrites and rerank
    whole = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": False}, timeout=60).json()
    content = whole["choices"][0]["message"]["content"]
    assert "".join(parts) == content and content.startswith(FIRST + " She started it in 1987 [2].\n\nSources:")
    assert whole["contextrag"]["citations"] == [2]


def test_answer_endpoint_takes_the_style(gated):
    server, _ = gated
    r = httpx.post(server.url + "/answer", json={"question": QUESTION, "k": 6, "style": "extractive"}, timeout=60)
    j = r.json()
    assert r.status_code == 200 and j["style"] == "extractive" and j["citations"]
    assert all(1 <= n <= len(j["hits"]) for n in j["citations"])
    assert any(s in j["hits"][j["citations"][0] - 1]["text"] for s in j["answer"].split(". "))
    bad = httpx.post(server.url + "/answer", json={"question": QUESTION, "style": "essay"})
    assert bad.status_code == 400 and "style" in bad.text
    s = httpx.post(server.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": QUESTION}],
                                                              "stream": True, "style": "essay"})
    assert s.status_code == 400 and "style" in s.text
