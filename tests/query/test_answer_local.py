"""End to end with the embedded model (transformers on the CPU): rewrites, retrieval, answer."""
import pytest

from contextrag import query
from contextrag.llm import CallCache


@pytest.fixture(scope="module")
def local_client(tmp_path_factory):
    from contextrag.llm.local import LocalLLMClient, LocalLLMUnavailable
    try:
        c = LocalLLMClient(n_ctx=2048, cache=CallCache(tmp_path_factory.mktemp("llm") / "c.sqlite"))
    except LocalLLMUnavailable as e:   # `make test` installs it: only a hand-made environment lacks it
        pytest.fail(f"the embedded model is part of the test install: {e}")
    yield c
    c.close()


def test_answer_with_the_embedded_model(index, hotpot, local_client):
    q = hotpot[0][0]
    a = query.answer(index, q["question"], llm=local_client, k=3, rerank=False, style="short")
    assert isinstance(a.text, str) and a.text.strip() and a.style == "short"
    assert len(a.hits) == 3
    assert 1 <= len(a.rewrites) <= 3 and all(r.strip() for r in a.rewrites)
    assert a.cost["rewrite"]["calls"] == 3 and a.cost["answer"]["calls"] == 1
    assert a.cost["total"]["prompt_tokens"] > 100 and a.cost["total"]["completion_tokens"] > 0
    b = query.answer(index, q["question"], llm=local_client, k=3, rerank=False, style="short")   # all cached
    assert b.text == a.text and b.cost["total"]["calls"] == 0 and b.cost["total"]["cached_calls"] == 4
    assert [c["kind"] for c in a.rewrite_calls] == ["paraphrase", "decompose", "entities"]
    assert [c["reply"] for c in a.rewrite_calls if c["used"]] == a.rewrites
    # the tiny embedded model is not asked to write the answer unless told to: extractive by default
    e = query.answer(index, q["question"], llm=local_client, k=3, rerank=False)
    assert local_client.small_model and e.style == "extractive" and "answer" not in e.cost
    assert e.citations and e.cost["rewrite"]["cached_calls"] == 3
