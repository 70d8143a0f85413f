"""Request bodies of the HTTP API (pydantic models: FastAPI validates them and lists them in OpenAPI)."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ..config import DEFAULT_K

MODEL_NAME = "contextrag"

STYLE = ("answer style: short (a few words), paragraph (cites passages as [n]), extractive (the "
         "sentences that answer, no generation), span (the name, date or number that answers); default: "
         "extractive without an LLM or with the tiny embedded one, else short")


class _Query(BaseModel):
    question: str = Field(min_length=1, description="the question")
    k: int = Field(DEFAULT_K, ge=1, le=1000, description="hits to return")
    doc_ids: list[str] | None = Field(None, description="only these documents (§4.6 doc_id filter)")
    filter: dict[str, Any] | None = Field(None, description="metadata conditions: {key: value | [values] | "
                                                            "{$eq|$ne|$in|$nin|$gt|$gte|$lt|$lte: ...}}")
    explain: bool = Field(False, description="add why each hit came and the graph that connected them")


class RetrieveRequest(_Query):
    overrides: dict[str, Any] = Field(default_factory=dict, description="Config query fields (w_bm25, ...)")


class AnswerRequest(_Query):
    rewrite: bool = Field(True, description="LLM query rewrites")
    rerank: bool = Field(True, description="LLM rerank")
    style: str | None = Field(None, description=STYLE)
    max_tokens: int | None = Field(None, ge=1, le=8192, description="answer length cap (default: the style's)")


class Document(BaseModel):
    id: str | None = None
    text: str = Field(min_length=1)
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AddRequest(BaseModel):
    documents: list[Document] = Field(min_length=1)


class ChatMessage(BaseModel):
    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(BaseModel):
    model: str = MODEL_NAME
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    k: int = Field(DEFAULT_K, ge=1, le=1000, description="contextrag: passages the answer is drawn from")
    style: str | None = Field(None, description="contextrag: " + STYLE)
    model_config = {"extra": "allow"}   # temperature, max_tokens, ...: accepted, the index's prompt decides
