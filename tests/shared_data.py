"""Where the public QA data sets live for tests.

In order: ``$CONTEXTRAG_DATA``, then ``../shared/data`` beside the repository (the full sets the
benchmarks use), then the compact fixture shipped in ``tests/data`` (the first 201 HotpotQA-500
questions and the small MultiHop-RAG set), so a plain clone runs every data-dependent test.
"""
from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "data"
HOTPOT_FILES = ("hotpotqa_500.json", "hotpotqa_500_first201.json")   # the full sample, the fixture's slice


def _hotpot_in(d: Path) -> Path | None:
    return next((d / f for f in HOTPOT_FILES if (d / f).is_file()), None)


def data_dir() -> Path:
    """The first folder holding a HotpotQA file: $CONTEXTRAG_DATA, ../shared/data, tests/data."""
    env = os.environ.get("CONTEXTRAG_DATA")
    for p in ([Path(env)] if env else []) + [REPO.parent / "shared" / "data", FIXTURES]:
        if _hotpot_in(p) is not None:
            return p
    raise FileNotFoundError(f"the test fixtures are missing from {FIXTURES}")


def hotpot_file(d: Path | None = None) -> Path:
    """The HotpotQA questions file in ``d`` (default: :func:`data_dir`): the full 500 or the fixture's 201."""
    d = data_dir() if d is None else d
    p = _hotpot_in(d)
    if p is None:
        raise FileNotFoundError(f"no HotpotQA file ({' or '.join(HOTPOT_FILES)}) in {d}")
    return p
