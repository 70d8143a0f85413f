"""Where the public QA data sets live for tests: $CONTEXTRAG_DATA, else ../shared/data beside the repo."""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def data_dir() -> Path | None:
    """The folder holding hotpotqa_500.json, or None (callers skip with a message)."""
    env = os.environ.get("CONTEXTRAG_DATA")
    for p in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data"]:
        if (p / "hotpotqa_500.json").is_file():
            return p
    return None
