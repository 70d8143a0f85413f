"""Queries during a process's first write: the write imports torch (the query path never does), and
no query may see torch half-imported. Each round is a fresh process, so torch's import really
happens during the write."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

HERE = Path(__file__).parent
PARTIAL_TORCH = """
import sys, types
import numpy as np, scipy.sparse as sp
torch = types.ModuleType("torch")             # what another thread's import leaves in sys.modules meanwhile
torch.__spec__ = types.SimpleNamespace(name="torch", _initializing=True)
sys.modules["torch"] = torch
from contextrag.ops import spread_hop, SpreadIncidence
from contextrag.ops._tensor import as_csr, is_sparse
I = sp.random(30, 12, density=0.3, format="csr", random_state=0, dtype=np.float32)
inc = SpreadIncidence(I, doc=np.arange(30) // 3)
out = spread_hop(inc, np.array([[0, 4]]), np.array([[0.9, 0.7]], np.float32))
assert out.shape == (1, 30) and isinstance(out, np.ndarray)
assert is_sparse(I) and as_csr(I, "I").shape == (30, 12)
print("ok")
"""


def test_ops_never_read_a_half_imported_torch():
    run = subprocess.run([sys.executable, "-c", PARTIAL_TORCH], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def _round(mode: str, tiny_dir, idx) -> dict:
    shutil.copytree(tiny_dir, idx)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    try:
        run = subprocess.run([sys.executable, str(HERE / "first_write_race.py"), mode, str(idx)],
                             capture_output=True, text=True, timeout=300, env=env)
    finally:
        shutil.rmtree(idx, ignore_errors=True)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


# Fresh processes, 3 at a time (each spends most of its time importing): 3 servers and 1 in-process run
# by default (about 12 s of CPU each on 2 cores); CONTEXTRAG_RACE_ROUNDS=10 runs 10 of each, as does
# bench/bench_reliability.py --soak.
ROUNDS = int(os.environ.get("CONTEXTRAG_RACE_ROUNDS", "0")) or None


@pytest.mark.parametrize("mode,rounds", [("server", ROUNDS or 3), ("threads", ROUNDS or 1)])
def test_queries_during_the_first_write(mode, rounds, tiny_dir, tmp_path):
    pytest.importorskip("httpx")
    pytest.importorskip("uvicorn")
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda i: _round(mode, tiny_dir, tmp_path / f"idx{i}"), range(rounds)))
    for r in results:
        assert not r["torch_before_write"] and r["torch_after"], r    # the write did import torch
        assert r["queries"] > 0
        assert r["query_errors"] == 0 and r["write_errors"] == 0, r["first_errors"]
