"""`contextrag mcp`: retrieve and answer as MCP tools, through the mcp package's own client (in memory,
and over stdio the way an MCP host starts the command)."""
from __future__ import annotations

import asyncio
import sys

import pytest

pytest.importorskip("mcp.server.mcpserver")
from mcp.client.client import Client  # noqa: E402

from integration_corpus import ANSWER, QUESTION, answer_script  # noqa: E402

from contextrag.llm.scripted import ScriptedClient  # noqa: E402
from contextrag.server.mcp_tools import create_mcp  # noqa: E402


def _structured(res):
    assert not res.is_error, res
    return res.structured_content


def test_tools_in_memory(rag):
    async def go():
        async with Client(create_mcp(rag, llm=ScriptedClient(answer_script))) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            r = _structured(await c.call_tool("retrieve", {"question": QUESTION, "k": 3}))
            f = _structured(await c.call_tool("retrieve", {"question": QUESTION, "k": 20,
                                                          "filter": {"topic": "person"}}))
            a = _structured(await c.call_tool("answer", {"question": QUESTION, "k": 6}))
            bad = await c.call_tool("retrieve", {"question": QUESTION, "k": 0})
            return names, r, f, a, bad
    names, r, f, a, bad = asyncio.run(go())
    assert names == {"retrieve", "answer"}
    assert [h["id"] for h in r["hits"]] == [h.id for h in rag.retrieve(QUESTION, k=3)]
    assert {d for h in f["hits"] for d in h["doc_ids"]} == {"veldt", "pettersen"}
    assert a["answer"] == ANSWER and a["citations"]
    assert all(ANSWER in a["hits"][n - 1]["text"] for n in a["citations"])
    assert bad.is_error and "k must be" in str(bad.content)


def test_mcp_command_over_stdio(index_dir):
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "contextrag.cli", "mcp", str(index_dir)])

    async def go():
        async with Client(params, read_timeout_seconds=300) as c:
            r = _structured(await c.call_tool("retrieve", {"question": QUESTION, "k": 2}))
            a = _structured(await c.call_tool("answer", {"question": QUESTION, "k": 2}))
            return r, a
    r, a = asyncio.run(go())
    assert len(r["hits"]) == 2 and r["hits"][0]["title"]
    assert a["answer"] and a["style"] == "extractive" and a["citations"] and len(a["hits"]) == 2   # no LLM
    assert all(0.0 <= h["relevance"] <= 1.0 for h in a["hits"])
