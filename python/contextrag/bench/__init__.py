"""The kernel microbenchmarks, shipped with the package so that ``contextrag bench`` runs from any
install: one pytest-benchmark suite per op family (``bench_<family>.py``: kmeans, fcm, semiring,
lattice, spread), each timing every backend this machine has against the peers a user would pick
instead (FAISS, skfuzzy, NumPy, torch) in the same benchmark group. ``harness`` holds what the suites
share, ``peers`` the NumPy peers, ``plugin`` the pytest options and the JSON's machine section.
Needs the ``bench`` extra (pytest-benchmark, faiss-cpu, scikit-fuzzy).
"""
from pathlib import Path

SUITES_DIR = Path(__file__).resolve().parent
FAMILIES = ("kmeans", "fcm", "semiring", "lattice", "spread")


def suite_files(directory: Path = SUITES_DIR) -> list[Path]:
    """The suites in ``directory``, one per family, in a stable order."""
    return sorted(p for p in Path(directory).glob("bench_*.py") if p.stem[len("bench_"):] in FAMILIES)
