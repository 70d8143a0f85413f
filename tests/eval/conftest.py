"""Fixtures for the evaluation harness tests: where the shared data sets are, and small real slices."""
from __future__ import annotations

import json
from pathlib import Path

import pytest



from shared_data import data_dir  # noqa: E402


@pytest.fixture(scope="session")
def data() -> Path:
    d = data_dir()
    if d is None:
        pytest.skip("shared data sets not found: set CONTEXTRAG_DATA or put them in ../shared/data")
    return d


@pytest.fixture(scope="session")
def hotpot(data) -> list[dict]:
    return json.loads((data / "hotpotqa_500.json").read_text())
