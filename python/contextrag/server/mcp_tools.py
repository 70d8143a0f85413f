"""``contextrag mcp IDX``: the index's ``retrieve`` and ``answer`` as Model Context Protocol tools
(extra ``contextrag[mcp]``: the ``mcp`` package, 2.x), over stdio by default, so an MCP host (an agent,
an IDE) can search the index."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class HitOut(BaseModel):
    n: int
    id: str
    doc_id: str | None
    doc_ids: list[str]
    title: str
    kind: str
    score: float        # the rank score (eq. 13), as the CLI, the server and the web page show it
    relevance: float | None     # the absolute relevance in [0, 1] (contextrag.query.relevance)
    span: list[int] | None
    metadata: dict[str, Any]
    text: str


class RetrieveOut(BaseModel):
    hits: list[HitOut]


class AnswerOut(BaseModel):
    answer: str
    style: str
    citations: list[int]
    hits: list[HitOut]


def create_mcp(rag, *, llm=None, name: str = "contextrag"):
    """An MCPServer with the tools ``retrieve`` and ``answer`` over ``rag`` (a ContextRAG)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as e:
        raise ImportError("contextrag mcp needs the mcp package (2.x): pip install 'contextrag[mcp]'") from e

    server = MCPServer(name, instructions="Search and answer from a contextrag graph-RAG index. Use retrieve "
                                          "for passages with their scores, answer for a short cited answer.")

    @server.tool(structured_output=True,
                 description="The k passages of the index most relevant to a question, best first, with their "
                             "document id, title, kind, score and character span. doc_ids and filter (metadata "
                             "conditions, e.g. {\"year\": {\"$gte\": 2020}}) restrict them.")
    def retrieve(question: str, k: int = 8, doc_ids: list[str] | None = None,
                 filter: dict[str, Any] | None = None) -> RetrieveOut:
        try:
            hits = rag.retrieve(question, k=k, doc_ids=doc_ids, filter=filter)
        except (ValueError, TypeError) as e:
            raise ToolError(str(e)) from None    # the caller sees the message (other errors stay hidden)
        return RetrieveOut(hits=[_hit(n, h) for n, h in enumerate(hits, 1)])

    @server.tool(structured_output=True,
                 description="An answer to a question from the index (with no LLM: the sentences of the passages "
                             "that answer it), the numbers of the passages it cites and the passages themselves.")
    def answer(question: str, k: int = 8) -> AnswerOut:
        try:     # the same answer as the CLI and the server (contextrag.query.answer_style picks the style)
            ans = rag.answer(question, llm=llm if llm is not None else "none", k=k)
        except (ValueError, TypeError) as e:
            raise ToolError(str(e)) from None
        return AnswerOut(answer=ans.text, style=ans.style, citations=list(ans.citations),
                         hits=[_hit(n, h) for n, h in enumerate(ans.hits, 1)])

    return server


def _hit(n: int, h) -> HitOut:
    return HitOut(n=n, id=h.id, doc_id=h.doc_id, doc_ids=list(h.doc_ids), title=h.title, kind=h.kind,
                  score=float(h.score), relevance=h.relevance, span=None if h.span is None else [int(x) for x in h.span],
                  metadata=dict(h.metadata), text=h.text)
