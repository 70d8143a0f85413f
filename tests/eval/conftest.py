"""Fixtures for the evaluation harness tests: where the shared data sets are, and small real slices."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def data_dir() -> Path | None:
    env = os.environ.get("CONTEXTRAG_DATA")
    for cand in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data", REPO / "shared" / "data"]:
        if (cand / "hotpotqa_500.json").exists():
            return cand
    return None


@pytest.fixture(scope="session")
def data() -> Path:
    d = data_dir()
    if d is None:
        pytest.skip("shared data sets not found: set CONTEXTRAG_DATA or put them in ../shared/data")
    return d


@pytest.fixture(scope="session")
def hotpot(data) -> list[dict]:
    return json.loads((data / "hotpotqa_500.json").read_text())
