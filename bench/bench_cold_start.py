#!/usr/bin/env python
"""Cold start of a query from the command line -> bench/results/cold_start.json

    python bench/bench_cold_start.py INDEX [--repeats 3]

INDEX: an index directory (e.g. HotpotQA-500's, kept by ``bench_index.py throughput --keep DIR``).
Each run is a fresh process, timed from its start to its exit:

* ``cli``: ``contextrag query INDEX "question" --no-llm`` with the index's own embedder;
* ``torch``: the same load and retrieval in Python with the embedder forced to sentence-transformers
  on torch (what every query paid before the ONNX default);

plus one ``python -X importtime`` run of the CLI query, whose top-level imports (cumulative
seconds) show where the start-up goes, and one run that reports which heavy modules (torch,
transformers, sentence-transformers) the CLI query imported. The children run with Python's bytecode
cache as an installed package has it (PYTHONDONTWRITEBYTECODE dropped, one untimed warm-up run first).
The machine may be shared: load averages are recorded.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import machine, write  # noqa: E402

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
HEAVY = ("torch", "transformers", "sentence_transformers")
# an installed package has its bytecode compiled (pip does it); a shell that forbids writing it would
# time Python's compiler instead of the start-up
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child, all threads): on a shared machine the CPU time is the
    figure the neighbours disturb least."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV)
    if out.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {out.stderr[-1500:]}")
    w = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return w, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def top_imports(index: str, n: int = 12) -> dict:
    """Seconds of import per top-level package (its not-nested imports summed), largest first."""
    cmd = [sys.executable, "-X", "importtime", "-m", "contextrag.cli", "query", index, QUESTION, "--no-llm"]
    err = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=ENV).stderr
    rows: dict = {}
    for ln in err.splitlines():
        if not ln.startswith("import time:") or "|" not in ln:
            continue
        _, cum, name = (x for x in ln[len("import time:"):].split("|"))
        name = name[1:] if name.startswith(" ") else name      # one space follows the bar
        if cum.strip().isdigit() and not name.startswith(" "):  # not nested: these rows never overlap
            root = name.strip().split(".")[0]                   # scipy.sparse, contextrag.query -> package
            rows[root] = rows.get(root, 0) + int(cum)
    top = sorted(rows.items(), key=lambda kv: -kv[1])[:n]
    return {k: round(v / 1e6, 3) for k, v in top}


def heavy_modules(index: str) -> list[str]:
    """The heavy modules in sys.modules after the CLI query ran in a fresh interpreter."""
    code = ("import io, sys, contextlib\nfrom contextrag.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    main(['query', {index!r}, {QUESTION!r}, '--no-llm'])\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=ENV)
    return eval(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else [f"failed: {out.stderr[-300:]}"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("index")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    cli = [sys.executable, "-m", "contextrag.cli", "query", args.index, QUESTION, "--no-llm"]
    forced = [sys.executable, "-c",
              "import sys; from contextrag import ContextRAG; from contextrag.embed.embedder import Embedder; "
              f"r = ContextRAG.load({args.index!r}, embedder=Embedder(backend='torch', device='cpu')); "
              f"r.retrieve({QUESTION!r}, k=12)"]
    out = {"benchmark": "cold_start_query", "machine": machine(), "index": Path(args.index).name,
           "question": QUESTION, "bytecode_cache": True, "runs": {}}
    for name, cmd in (("cli", cli), ("torch", forced)):
        try:
            wall(cmd)                                        # warm-up: bytecode, page cache
            runs = [wall(cmd) for _ in range(args.repeats)]
        except RuntimeError as e:     # e.g. torch's 384-d vectors on an index of the static model
            out["runs"][name] = {"error": str(e).strip().splitlines()[-1][-300:]}
            continue
        out["runs"][name] = {"seconds": [round(w, 3) for w, _ in runs], "best": round(min(w for w, _ in runs), 3),
                             "cpu_seconds": [round(c, 3) for _, c in runs], "loadavg": os.getloadavg(),
                             "niceness": os.nice(0)}
        if name == "cli":     # the largest child so far: the CLI runs came first
            out["runs"][name]["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
        print(name, out["runs"][name], flush=True)
    out["cli_top_level_imports_seconds"] = top_imports(args.index)
    out["cli_heavy_modules_imported"] = heavy_modules(args.index)
    write("cold_start.json", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
