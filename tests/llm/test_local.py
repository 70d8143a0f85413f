"""The embedded default: the GGUF model shipped in a PyPI package, run by llama-cpp-python in-process
(skipped cleanly when the `local` extra is not installed)."""
import pytest

from contextrag.llm import CallCache, make_client
from contextrag.llm.local import MODEL_PACKAGES, LocalLlamaClient, find_gguf


def test_find_gguf_rejects_unknown_names():
    with pytest.raises(ValueError, match="name"):
        find_gguf("gpt-5")


def test_find_gguf_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTEXTRAG_LOCAL_GGUF", str(tmp_path / "missing.gguf"))
    with pytest.raises(FileNotFoundError, match="CONTEXTRAG_LOCAL_GGUF"):
        find_gguf()


@pytest.fixture(scope="module")
def local(gguf_path, tmp_path_factory):
    c = LocalLlamaClient(gguf_path, n_ctx=1024,
                         cache=CallCache(tmp_path_factory.mktemp("llm") / "c.sqlite"))
    yield c
    c.close()


def test_embedded_model_generates_counts_tokens_and_caches(local, gguf_path):
    assert gguf_path.suffix == ".gguf" and gguf_path.stat().st_size > 10_000_000
    msgs = [{"role": "user", "content": "What is the capital of France? Answer with one word."}]
    a = local.complete(msgs, stage="answer", max_tokens=12)
    assert "paris" in a.text.lower()                 # SmolLM2-135M-Instruct gets this one
    assert a.prompt_tokens > 5 and 0 < a.completion_tokens <= 12 and a.seconds > 0 and not a.cached
    b = local.complete(msgs, stage="answer", max_tokens=12)
    assert b.cached and b.text == a.text
    d = local.ledger.to_dict()["answer"]
    assert d["calls"] == 1 and d["cached_calls"] == 1 and d["completion_tokens"] == a.completion_tokens


def test_long_prompts_are_trimmed_to_the_context(local):
    long = "word " * 3000                            # ~3000 tokens > n_ctx = 1024
    out = local.complete([{"role": "user", "content": long + "\nSay OK."}], stage="other", max_tokens=4)
    assert out.prompt_tokens <= 1024


def test_make_client_local(gguf_path, tmp_path):
    c = make_client("local", cache=tmp_path / "c.sqlite", n_ctx=512)
    assert isinstance(c, LocalLlamaClient) and c.model.startswith("local:")
    assert c.model == f"local:{next(iter(MODEL_PACKAGES))}" or c.model_path == gguf_path
    with pytest.raises(ValueError, match="n_ctx"):
        LocalLlamaClient(gguf_path, n_ctx=10)
    with pytest.raises(FileNotFoundError, match="model_path"):
        LocalLlamaClient(tmp_path / "none.gguf")
