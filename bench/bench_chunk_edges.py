"""Chunk edges between words against edges at token boundaries, in one run -> bench/results/chunk_edges.json

    python bench/bench_chunk_edges.py [--no-answers]

The library moves each window's edges to word boundaries (index/chunking.py, ``windows``); the
ablation ("tokens") patches ``chunking.windows`` in this process with the plain token windows, the rule
before. For each rule, on fresh index caches: the retrieval evaluation of both shared sets
(``contextrag.eval.run``, the systems of bench/multihop/eval_sets.py, no LLM), the answer styles of
bench/bench_answer_styles.py (its indexes and outputs in a temporary folder), and how many chunk edges
of the shared corpora fall inside a word (a character other than whitespace on both sides).
Data from $CONTEXTRAG_DATA (default ../shared/data beside the repository).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CONTEXTRAG_DATA", REPO.parent / "shared" / "data"))
OUT = REPO / "bench" / "results" / "chunk_edges.json"
SETS = {"hotpotqa_500": ("hotpotqa_500.json", "hotpotqa"), "multihoprag_small": ("multihoprag_small.json", "multihoprag")}
SYSTEMS = ["bm25", "dense", "hybrid", "contextrag", "contextrag_paper"]


def plain_windows(toks, size: int, overlap: int):
    """The token windows without moving their edges: the rule the library's ``windows`` replaced."""
    n, step = len(toks), size - overlap
    return [(s, min(s + size, n)) for s in range(0, max(n - overlap, 1), step)]


def machine() -> dict:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    import contextrag
    return {"cpu": model, "amx": "amx_bf16" in flags, "avx512": "avx512f" in flags, "cores": os.cpu_count(),
            "python": platform.python_version(), "contextrag": contextrag.__version__, "git_commit": commit,
            "loadavg_start": [round(x, 2) for x in os.getloadavg()]}


def corpora() -> dict:
    """The shared corpora's documents, as the evaluation indexes them."""
    hp = json.loads((DATA / "hotpotqa_500.json").read_text())
    seen: dict = {}
    for q in hp:
        for title, sents in q["context"]:
            seen.setdefault(title, "".join(sents))
    mh = json.loads((DATA / "multihoprag_small_corpus.json").read_text())
    ud = json.loads((DATA / "ultradomain_mix_contexts.json").read_text())
    return {"hotpotqa_500": list(seen.values()), "multihoprag_small": [a["body"] for a in mh],
            "ultradomain_mix": [t for t in ud if t.strip()]}


def edges_inside_words(texts) -> dict:
    """Chunks of the default configuration's chunker, and how many of their edges cut a word."""
    from contextrag import Config
    from contextrag.embed.embedder import Embedder
    from contextrag.index.build import make_chunker
    from contextrag.index.chunking import Document
    cfg = Config()
    ch = make_chunker(cfg, Embedder.from_config(cfg))
    n = cut = 0
    for i, t in enumerate(texts):
        for c in ch.split(Document(str(i), t)):
            n += 1
            cut += (c.start_char > 0 and not t[c.start_char - 1].isspace()) \
                + (c.end_char < len(t) and not t[c.end_char].isspace())
    return {"chunks": n, "edges_inside_a_word": cut}


def retrieval(cache: Path) -> dict:
    from contextrag.eval import run
    out = {}
    for name, (f, fmt) in SETS.items():
        res = run(str(DATA / f), format=fmt, out=str(cache / f"eval_{name}"), systems=SYSTEMS, llm=None,
                  cache_dir=str(cache / "indexes"))
        out[name] = {s: {f"recall@{k}": res["systems"][s][f"recall@{k}"] for k in (2, 5, 10)} for s in SYSTEMS}
    return out


def answers(folder: Path) -> dict:
    spec = importlib.util.spec_from_file_location("bench_answer_styles", REPO / "bench" / "bench_answer_styles.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.RESULTS, mod.INDEX_DIR = folder, folder / "hotpot500_index"
    mod.SENT_CACHE = folder / "sentence_embeddings.sqlite"
    argv, sys.argv = sys.argv, [sys.argv[0]]
    try:
        mod.main()
    finally:
        sys.argv = argv
    got = json.loads((folder / "answer_styles.json").read_text())
    keep = ("em", "f1", "gold_in_answer", "gold_in_sentences")
    return {name: {"gold_answer_in_the_12_hits": got[name]["gold_answer_in_the_12_hits"],
                   **{style: {k: v for k, v in fig.items() if k in keep} for style, fig in got[name]["styles"].items()}}
            for name in SETS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-answers", action="store_true", help="the retrieval evaluation and edge counts only")
    args = ap.parse_args()
    from contextrag.index import chunking
    library = chunking.windows
    record = {"benchmark": "chunk edges: between words (the library) against token boundaries (the rule before)",
              "machine": machine(), "rules": {}}
    texts = corpora()
    for rule in ("words", "tokens"):
        chunking.windows = library if rule == "words" else plain_windows
        with tempfile.TemporaryDirectory(prefix="chunk_edges_") as tmp:
            got = {"edges": {name: edges_inside_words(t) for name, t in texts.items()},
                   "retrieval": retrieval(Path(tmp))}
            if not args.no_answers:
                got["answers"] = answers(Path(tmp) / "answers")
        record["rules"][rule] = got
        print(rule, json.dumps(got["retrieval"]), flush=True)
    chunking.windows = library
    record["machine"]["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(f"-> {OUT}")


if __name__ == "__main__":
    main()
