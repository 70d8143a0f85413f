"""contextrag as a LlamaIndex retriever, inside a RetrieverQueryEngine with a scripted LLM."""
from __future__ import annotations

import pytest

pytest.importorskip("llama_index.core")

from integration_corpus import ANSWER, QUESTION  # noqa: E402
from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata  # noqa: E402
from llama_index.core.llms import CustomLLM  # noqa: E402
from llama_index.core.llms.callbacks import llm_completion_callback  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import NodeRelationship  # noqa: E402
from llama_index.core.vector_stores.types import (  # noqa: E402
    FilterCondition, FilterOperator, MetadataFilter, MetadataFilters)

from contextrag.integrations.llamaindex import ContextRAGRetriever  # noqa: E402


def docs_of(nodes):
    """The documents whose text the returned nodes show (virtual items: several)."""
    return {d for n in nodes for d in n.node.metadata["doc_ids"]}


class ScriptedLLM(CustomLLM):
    """Answers with the founder's name when the prompt's context holds it, else 'unknown'."""
    prompts: list = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=4096, num_output=64, model_name="scripted")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kw) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text=ANSWER if ANSWER in prompt else "unknown")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kw):
        yield self.complete(prompt)


def test_nodes_carry_the_hit(rag):
    nodes = ContextRAGRetriever(rag, k=5).retrieve(QUESTION)
    hits = rag.retrieve(QUESTION, k=5)
    assert len(nodes) == 5
    for n, h in zip(nodes, hits):
        assert n.node.node_id == h.id and n.node.get_content() == h.text
        assert n.score == pytest.approx(h.relevance) and 0.0 <= n.score <= 1.0
        m = n.node.metadata
        assert m["doc_id"] == h.doc_id and m["title"] == h.title and m["kind"] == h.kind
        if h.kind == "chunk":
            assert (n.node.start_char_idx, n.node.end_char_idx) == tuple(h.span)
            assert n.node.relationships[NodeRelationship.SOURCE].node_id == h.doc_id
            assert m["topic"] == h.metadata["topic"]
            # the LLM sees the title, not the bookkeeping
            from llama_index.core.schema import MetadataMode
            shown = n.node.get_content(metadata_mode=MetadataMode.LLM)
            assert h.title in shown and "parts" not in shown


def test_query_engine_answers_with_source_nodes(index_dir):
    llm = ScriptedLLM()
    engine = RetrieverQueryEngine.from_args(ContextRAGRetriever(str(index_dir), k=4), llm=llm)
    resp = engine.query(QUESTION)
    assert str(resp) == ANSWER
    assert any(ANSWER in s.node.get_content() for s in resp.source_nodes)
    assert len(resp.source_nodes) == 4 and llm.prompts
    blind = RetrieverQueryEngine.from_args(
        ContextRAGRetriever(index_dir, k=4, filters={"topic": {"$nin": ["company", "person"]}}), llm=ScriptedLLM())
    assert str(blind.query(QUESTION)) == "unknown"


def test_llamaindex_metadata_filters(rag):
    f = MetadataFilters(filters=[MetadataFilter(key="topic", value="place"),
                                 MetadataFilter(key="year", value=1300, operator=FilterOperator.GT)])
    got = docs_of(ContextRAGRetriever(rag, k=20, filters=f).retrieve(QUESTION))
    assert got == {"tessaly", "glass"}
    f = MetadataFilters(filters=[MetadataFilter(key="topic", value=["event", "household"], operator=FilterOperator.IN),
                                 MetadataFilter(key="year", value=2019)], condition=FilterCondition.OR)
    got = docs_of(ContextRAGRetriever(rag, k=20, filters=f).retrieve(QUESTION))
    assert got == {"boats", "kettle", "zorblat"}
    nested = MetadataFilters(filters=[MetadataFilter(key="lang", value="de"),
                                      MetadataFilters(filters=[MetadataFilter(key="topic", value="event")],
                                                      condition=FilterCondition.NOT)])
    got = docs_of(ContextRAGRetriever(rag, k=20, filters=nested).retrieve(QUESTION))
    assert got == {"glass"}
    with pytest.raises(ValueError, match="not supported"):
        ContextRAGRetriever(rag, filters=MetadataFilters(filters=[
            MetadataFilter(key="topic", value="x", operator=FilterOperator.TEXT_MATCH)]))
    nodes = ContextRAGRetriever(rag, k=10, doc_ids="veldt").retrieve(QUESTION)
    assert nodes and docs_of(nodes) == {"veldt"}


def test_in_filter_with_one_str_value_means_that_value_not_its_characters():
    from contextrag.integrations.llamaindex import to_filter
    one = MetadataFilters(filters=[MetadataFilter(key="lang", value="en", operator=FilterOperator.IN)])
    pred = to_filter(one)
    assert pred("d1", {"lang": "en"}) and not pred("d2", {"lang": "e"}) and not pred("d3", {"lang": "n"})
    none_of = to_filter(MetadataFilters(filters=[MetadataFilter(key="lang", value="en", operator=FilterOperator.NIN)]))
    assert not none_of("d1", {"lang": "en"}) and none_of("d2", {"lang": "e"})
