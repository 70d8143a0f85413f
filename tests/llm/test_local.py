"""The embedded default: the GGUF model shipped in a PyPI package, run in-process by transformers on
torch's CPU build, with its dequantised copy kept on disk."""
import os

import pytest
import torch

from contextrag.llm import CallCache, make_client
from contextrag.llm import converted as C
from contextrag.llm.local import MODEL_PACKAGES, LocalLLMClient, find_gguf

FRANCE = [{"role": "user", "content": "What is the capital of France? Answer with one word."}]


def test_find_gguf_rejects_unknown_names():
    with pytest.raises(ValueError, match="name"):
        find_gguf("gpt-5")


def test_find_gguf_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTEXTRAG_LOCAL_GGUF", str(tmp_path / "missing.gguf"))
    with pytest.raises(FileNotFoundError, match="CONTEXTRAG_LOCAL_GGUF"):
        find_gguf()


def test_embedded_model_generates_counts_tokens_and_caches(embedded, gguf_path, tmp_path):
    assert gguf_path.suffix == ".gguf" and gguf_path.stat().st_size > 10_000_000
    c = LocalLLMClient(gguf_path, n_ctx=1024, cache=CallCache(tmp_path / "c.sqlite"))
    c._tok, c._lm = embedded._tok, embedded._lm             # the session's loaded model, this client's cache
    a = c.complete(FRANCE, stage="answer", max_tokens=12)
    assert "paris" in a.text.lower()                        # SmolLM2-135M-Instruct gets this one
    assert a.prompt_tokens > 5 and 0 < a.completion_tokens <= 12 and a.seconds > 0 and not a.cached
    b = c.complete(FRANCE, stage="answer", max_tokens=12)
    assert b.cached and b.text == a.text
    d = c.ledger.to_dict()["answer"]
    assert d["calls"] == 1 and d["cached_calls"] == 1 and d["completion_tokens"] == a.completion_tokens


def test_greedy_and_seeded_sampling_are_deterministic(embedded):
    g1 = embedded._generate(FRANCE, max_tokens=8, temperature=0.0)
    g2 = embedded._generate(FRANCE, max_tokens=8, temperature=0.0)
    assert g1.text == g2.text and g1.completion_tokens == g2.completion_tokens
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    hot = [embedded._generate(FRANCE, max_tokens=8, temperature=1.5).text for _ in range(2)]
    assert hot[0] == hot[1]                                 # same seed, same prompt: same sample
    assert torch.equal(torch.rand(1), before)               # the caller's RNG state was left alone


def test_concurrent_calls_are_serialised_and_match_sequential_ones(embedded):
    from concurrent.futures import ThreadPoolExecutor

    qs = [[{"role": "user", "content": f"Name a colour number {i}. One word."}] for i in range(3)]
    seq = [embedded._generate(m, max_tokens=4, temperature=0.0).text for m in qs]
    with ThreadPoolExecutor(3) as ex:
        par = list(ex.map(lambda m: embedded._generate(m, max_tokens=4, temperature=0.0).text, qs))
    assert par == seq


def test_long_prompts_are_trimmed_to_the_context(embedded):
    long = "word " * 3000                                   # ~3000 tokens > n_ctx = 1024
    out = embedded._generate([{"role": "user", "content": long + "\nSay OK."}], max_tokens=4, temperature=0.0)
    assert 900 < out.prompt_tokens <= 1024 - 4 - 64 and out.completion_tokens <= 4


def test_converted_copy_is_written_once_and_gives_the_same_model(gguf_path, tmp_path, monkeypatch, capfd):
    tok, lm, src = C.load_converted(gguf_path, tmp_path)
    assert src == "gguf"
    dest = C.converted_path(gguf_path, tmp_path)
    assert (dest / "model.safetensors").is_file() and (dest / "tokenizer.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [dest.name]      # no temporary folder left behind
    capfd.readouterr()
    tok2, lm2, src2 = C.load_converted(gguf_path, tmp_path)
    assert src2 == "converted cache"
    assert "Loading weights" not in capfd.readouterr().err           # no progress bar on every start
    from transformers.utils import logging as tlog
    assert tlog.is_progress_bar_enabled()                              # the caller's setting is restored
    ids = tok.apply_chat_template(FRANCE, add_generation_prompt=True, tokenize=True)
    ids2 = tok2.apply_chat_template(FRANCE, add_generation_prompt=True, tokenize=True)
    ids, ids2 = (list(x["input_ids"] if hasattr(x, "keys") else x) for x in (ids, ids2))
    assert ids == ids2
    x = torch.tensor([ids])
    with torch.inference_mode():
        assert torch.equal(lm(x).logits, lm2(x).logits)                # float32 both ways: bit-identical
    assert lm2.lm_head.weight.data_ptr() == lm2.model.embed_tokens.weight.data_ptr()   # still tied

    # a damaged copy is replaced, with a warning, not trusted (the GGUF is not converted a third time)
    monkeypatch.setattr(C, "_from_gguf", lambda g: (tok, lm))
    (dest / "model.safetensors").write_bytes(b"truncated")
    with pytest.warns(RuntimeWarning, match="could not be loaded"):
        _, _, src3 = C.load_converted(gguf_path, tmp_path)
    assert src3 == "gguf" and (dest / "model.safetensors").stat().st_size > 100_000_000


def test_converted_key_follows_the_file(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"x" * 10)
    a = C.converted_path(f, tmp_path)
    os.utime(f, ns=(1, 1))
    assert C.converted_path(f, tmp_path) != a
    with pytest.raises(FileNotFoundError, match="gguf"):
        C.load_converted(tmp_path / "none.gguf", tmp_path)


def test_make_client_local(gguf_path, tmp_path):
    c = make_client("local", cache=tmp_path / "c.sqlite", n_ctx=512)
    assert isinstance(c, LocalLLMClient) and c.model.startswith("local:")
    assert c.small_model and LocalLLMClient(gguf_path).small_model      # tiny: extractive answers by default
    assert c.model == f"local:{next(iter(MODEL_PACKAGES))}" or c.model_path == gguf_path
    with pytest.raises(ValueError, match="n_ctx"):
        LocalLLMClient(gguf_path, n_ctx=10)
    with pytest.raises(ValueError, match="seed"):
        LocalLLMClient(gguf_path, seed=1.5)
    with pytest.raises(TypeError, match="convert_cache"):
        LocalLLMClient(gguf_path, convert_cache=3)
    with pytest.raises(FileNotFoundError, match="model_path"):
        LocalLLMClient(tmp_path / "none.gguf")


def test_llama_cpp_client_is_optional_and_says_how_to_build_it(monkeypatch):
    from contextrag.llm import llama_cpp_client as L
    from contextrag.llm.local import LocalLLMUnavailable

    monkeypatch.setattr(L, "llama_cpp_available", lambda: False)
    with pytest.raises(LocalLLMUnavailable, match="GGML_CPU_ALL_VARIANTS=ON"):
        make_client("llama-cpp", cache=False)
    with pytest.raises(ValueError, match="llama-cpp"):
        make_client("llamacpp", cache=False)
