"""Fixtures for the evaluation harness tests: where the shared data sets are, and small real slices."""
from __future__ import annotations

import json
from pathlib import Path

import pytest



from shared_data import data_dir, hotpot_file  # noqa: E402


@pytest.fixture(scope="session")
def data() -> Path:
    return data_dir()


@pytest.fixture(scope="session")
def hotpot(data) -> list[dict]:
    return json.loads(hotpot_file(data).read_text())
