"""Load time of the embedded LLM (transformers on the CPU): from the GGUF (dequantise + convert the
tokenizer) against the converted copy kept on disk, each in a fresh process, imports included, then
12 greedy tokens. Writes bench/results/llm_load.json.

    python bench/bench_llm_load.py [--reps 2]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
MSG = [{"role": "user", "content": "What is the capital of France? Answer with one word."}]

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch, transformers
from contextrag.llm.local import LocalLLMClient
t1 = time.perf_counter()
c = LocalLLMClient(convert_cache=sys.argv[1])
c._load()
t2 = time.perf_counter()
r = c._generate(json.loads(sys.argv[2]), max_tokens=12, temperature=0.0)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "loaded_from": c.loaded_from,
                  "generate_12_s": t3 - t2, "completion_tokens": r.completion_tokens, "reply": r.text,
                  "torch_threads": torch.get_num_threads()}))
"""


def child(cache: str) -> dict:
    la = os.getloadavg()[0]
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, cache, json.dumps(MSG)], capture_output=True, text=True,
                       check=True)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out.update(wall_s=time.perf_counter() - t, loadavg_1min_before=la, loadavg_1min_after=os.getloadavg()[0])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    a = ap.parse_args()
    import torch
    import transformers

    res = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                       "torch": torch.__version__, "transformers": transformers.__version__,
                       "loadavg_start": list(os.getloadavg()),
                       "note": "2-core machine shared with other jobs: read the load averages beside each run"},
           "runs": []}
    with tempfile.TemporaryDirectory() as d:
        for rep in range(a.reps):
            for mode in ("gguf", "converted cache"):
                cache = str(Path(d) / f"rep{rep}")
                r = child(cache)         # first call per rep converts (fresh folder), the second reads the copy
                assert r["loaded_from"] == mode, r
                res["runs"].append({"rep": rep, **r})
                print(json.dumps(res["runs"][-1]))
    by = {m: sorted(x["load_s"] for x in res["runs"] if x["loaded_from"] == m) for m in ("gguf", "converted cache")}
    res["summary"] = {"load_s_median": {m: v[len(v) // 2] for m, v in by.items()},
                      "speedup_median": by["gguf"][len(by["gguf"]) // 2] / by["converted cache"][len(by["converted cache"]) // 2]}
    res["machine"]["loadavg_end"] = list(os.getloadavg())
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "llm_load.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
