"""Fixtures for the reliability tests: a few real HotpotQA paragraphs and a tiny index built with
the hash embedder (fast enough to build and reload in many processes)."""
from __future__ import annotations

import json
import shutil
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from hash_embedder import HashEmbedder, tiny_config  # noqa: E402
from shared_data import hotpot_file  # noqa: E402

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def paragraphs():
    seen: dict[str, str] = {}
    for q in json.loads(hotpot_file().read_text()):
        for title, sents in q["context"]:
            seen.setdefault(title, "".join(sents))
        if len(seen) >= 80:
            break
    return [{"id": f"p{i}", "title": t, "text": x} for i, (t, x) in enumerate(list(seen.items())[:80])]


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory, paragraphs):
    from contextrag import ContextRAG
    path = tmp_path_factory.mktemp("tiny") / "idx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ContextRAG.build(paragraphs[:40], path=path, config=tiny_config(), embedder=HashEmbedder())
    return path


@pytest.fixture
def tiny(tiny_dir, tmp_path):
    """A private copy of the tiny index; returns its path."""
    dst = tmp_path / "idx"
    shutil.copytree(tiny_dir, dst)
    return dst
