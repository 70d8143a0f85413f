"""contextrag as a LangChain retriever, run inside a LangChain runnable chain with a scripted chat model."""
from __future__ import annotations

import pytest

pytest.importorskip("langchain_core")

from integration_corpus import ANSWER, QUESTION  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.output_parsers import StrOutputParser  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402

from contextrag.integrations.langchain import ContextRAGRetriever  # noqa: E402
from integration_corpus import DOCS  # noqa: E402

TOPIC = {i: m["topic"] for i, _, _, m in DOCS}


def docs_of(docs):
    """The documents whose text the returned LangChain documents show (virtual items: several)."""
    return {d for x in docs for d in x.metadata["doc_ids"]}


def test_documents_carry_the_hit(rag):
    r = ContextRAGRetriever(index=rag, k=5)
    docs = r.invoke(QUESTION)
    hits = rag.retrieve(QUESTION, k=5)
    assert len(docs) == 5 and all(isinstance(d, Document) for d in docs)
    for n, (d, h) in enumerate(zip(docs, hits), 1):
        assert d.page_content == h.text and d.id == h.id
        m = d.metadata
        assert m["score"] == pytest.approx(h.relevance) and m["rank_score"] == pytest.approx(h.score)
        assert 0.0 <= m["score"] <= 1.0 and m["doc_id"] == h.doc_id and m["kind"] == h.kind
        assert m["title"] == h.title and m["rank"] == n and m["parts"]["cos"] == pytest.approx(h.parts["cos"])
        assert m["span"] == (None if h.span is None else list(h.span))
        assert m["doc_metadata"] == h.metadata
        if h.kind == "chunk":
            assert m["topic"] == h.metadata["topic"] and m["start_char"] == h.span[0]


def test_from_path_k_doc_ids_and_filter(index_dir):
    r = ContextRAGRetriever(index=str(index_dir), k=3)
    assert len(r.invoke(QUESTION)) == 3
    assert len(r.invoke(QUESTION, k=1)) == 1                                 # per-call k
    only = r.invoke(QUESTION, doc_ids=["veldt", "orvane"], k=10)
    assert only and docs_of(only) <= {"veldt", "orvane"}
    f = ContextRAGRetriever(index=index_dir, k=10, filter={"topic": "place"})
    assert {TOPIC[d] for d in docs_of(f.invoke(QUESTION))} == {"place"}
    assert docs_of(f.invoke(QUESTION, filter={"year": {"$lt": 1300}})) == {"orvane"}


def test_bad_arguments(rag, tmp_path):
    with pytest.raises(ValueError, match="k must be"):
        ContextRAGRetriever(index=rag, k=0)
    with pytest.raises(TypeError, match="index must be"):
        ContextRAGRetriever(index=42)
    with pytest.raises(FileNotFoundError):
        ContextRAGRetriever(index=tmp_path / "nothing")
    with pytest.raises(TypeError, match="unknown retriever argument"):
        ContextRAGRetriever(index=rag).invoke(QUESTION, top_k=3)


def _scripted_chat(prompt_value):
    """A chat model that answers from the passages in its prompt: the founder's name if it is there."""
    text = prompt_value.to_string()
    return GenericFakeChatModel(messages=iter([ANSWER if ANSWER in text else "unknown"])).invoke(prompt_value)


def test_runnable_chain_answers_from_retrieved_documents(rag):
    retriever = ContextRAGRetriever(index=rag, k=4)
    prompt = ChatPromptTemplate.from_messages([
        ("system", "Answer from the passages."),
        ("human", "Passages:\n{context}\n\nQuestion: {question}")])
    fmt = RunnableLambda(lambda docs: "\n".join(f"[{d.metadata['rank']}] {d.page_content}" for d in docs))
    chain = {"context": retriever | fmt, "question": RunnablePassthrough()} | prompt | \
        RunnableLambda(_scripted_chat) | StrOutputParser()
    assert chain.invoke(QUESTION) == ANSWER
    # the same chain restricted to documents without the founder cannot answer
    blind = {"context": ContextRAGRetriever(index=rag, k=4, filter={"topic": {"$ne": "company"}}) | fmt,
             "question": RunnablePassthrough()} | prompt | RunnableLambda(_scripted_chat) | StrOutputParser()
    assert blind.invoke(QUESTION) == "unknown"
    # batch and async go through the same retriever
    assert chain.batch([QUESTION, QUESTION]) == [ANSWER, ANSWER]


def test_async_invoke(rag):
    import asyncio
    docs = asyncio.run(ContextRAGRetriever(index=rag, k=2).ainvoke(QUESTION))
    assert [d.id for d in docs] == [h.id for h in rag.retrieve(QUESTION, k=2)]
