"""Incremental add/delete -> bench/results/updates.json

1. ``--index PATH``: ``contextrag add PATH docs.jsonl`` from the command line on fresh copies of a
   HotpotQA-500 index (5,522 chunks, built beforehand with ``contextrag index``; its embedder embeds
   the new chunks), 20 documents (the first paragraphs of MultiHop-RAG articles, which the index does
   not hold) per run, best of ``--repeats``: wall and CPU seconds of the whole process and the add's
   own per-stage seconds (the index's update record). The copy is made before the timer starts.
2. A synthetic curve (in-process, no save): HotpotQA-500 paragraphs repeated under distinct titles up
   to each of ``--sizes`` chunks, indexed with the tests' hashing embedder (every other stage as
   usual), then ``ContextRAG.add`` of 20 documents, interleaved with its peer, the same add
   recomputing the words, BM25 and the lexical families from every chunk's text (what an add did
   before they were stored), and a delete of 20 documents; best of ``--repeats`` each.

The machine is shared and noisy: the JSON records the CPU, the load average around each part and the
library versions; compare the ratios within one run, not absolute seconds across runs.

Usage: python bench/bench_updates.py [--index PATH] [--sizes 5000,20000,50000] [--repeats 3] [--no-bm25] [--merge]
(``--sizes ""`` skips the curve; ``--merge`` keeps the parts of the existing JSON this run does not redo.)
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
DATA = Path(os.environ.get("CONTEXTRAG_DATA", REPO.parent / "shared" / "data"))
N_DOCS = 20


def cpu() -> dict:
    """The machine profile (CPU model, ISA, GEMM rates: contextrag.machine) and the core count."""
    from contextrag.machine import profile
    return {**profile().to_dict(), "cores": os.cpu_count()}


def versions() -> dict:
    import importlib.metadata as md
    out = {"python": platform.python_version()}
    for name in ("contextrag", "numpy", "scipy", "bm25s", "onnxruntime", "safetensors"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def new_docs(k: int, offset: int = 0) -> list:
    arts = json.loads((DATA / "multihoprag_small_corpus.json").read_text())
    out = []
    for i in range(offset, offset + k):
        a = arts[i % len(arts)]
        out.append({"id": f"bench-add-{i}", "title": a["title"], "text": a["body"][:700]})
    return out


def last_update(index_dir: Path) -> dict:
    snap = (index_dir / "CURRENT").read_text().strip()
    con = sqlite3.connect(index_dir / snap / "meta.sqlite")
    try:
        info = json.loads(con.execute("SELECT value FROM kv WHERE key='info'").fetchone()[0])
    finally:
        con.close()
    return info["updates"][-1]


# `contextrag` with the index loaded prepared for queries before the add, as the command once did
# (an ablation, this process only)
PREPARED_CLI = """
import sys
from contextrag import ContextRAG
from contextrag.cli import main
load = ContextRAG.load.__func__
ContextRAG.load = classmethod(lambda cls, path, **kw: load(cls, path, **{**kw, "prepare": True}))
sys.exit(main(sys.argv[1:]))
"""


def cli_add(index: Path, repeats: int, prepared_load: bool = False) -> dict:
    exe = [str(Path(sys.executable).with_name("contextrag"))]
    if prepared_load:
        exe = [sys.executable, "-c", PREPARED_CLI]
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        docs = tmp / "docs.jsonl"
        docs.write_text("".join(json.dumps(d) + "\n" for d in new_docs(N_DOCS)))
        # the first add of an index written before the words were stored migrates it: not timed
        shutil.copytree(index, tmp / "base")
        subprocess.run(exe + ["add", str(tmp / "base"), str(docs), "-q"], check=True, capture_output=True)
        subprocess.run(exe + ["delete", str(tmp / "base")] + [d["id"] for d in new_docs(N_DOCS)] + ["-q"],
                       check=True, capture_output=True)
        for r in range(repeats):
            work = tmp / f"run{r}"
            shutil.copytree(tmp / "base", work)
            load0 = os.getloadavg()[0]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(exe + ["add", str(work), str(docs), "-q"], check=True, capture_output=True)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            rec = last_update(work)
            runs.append({"wall_s": round(wall, 3),
                         "cpu_s": round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 3),
                         "add_stages_s": rec["seconds"], "chunks_added": rec["chunks"], "loadavg_1min": load0})
            shutil.rmtree(work)
        runs_cpu = []
        for r in range(repeats):
            work = tmp / f"cpu{r}"
            shutil.copytree(tmp / "base", work)
            out = subprocess.run([sys.executable, "-c", CPU_PHASES, str(work), json.dumps(new_docs(N_DOCS)),
                                  "prepared" if prepared_load else "unprepared"],
                                 check=True, capture_output=True, text=True)
            runs_cpu.append(json.loads(out.stdout.strip().splitlines()[-1]))
            shutil.rmtree(work)
    best = min(runs, key=lambda r: r["wall_s"])
    return {"what": f"contextrag add INDEX {N_DOCS}-docs.jsonl (whole process: start, imports, load, embed, "
                    "add, save)", "runs": runs, "best_wall_s": best["wall_s"],
            "best_cpu_s": min(r["cpu_s"] for r in runs),
            "best_without_embed_s": round(min(r["wall_s"] - r["add_stages_s"].get("embed", 0.0) for r in runs), 3),
            "cpu_phases": {"what": "process CPU seconds of the same add in one process, phase by phase (the "
                                   "embedder's threads included); the add's own share is add_and_save minus embed "
                                   "(the embedder's CPU time varies with the load: the difference is noisy)",
                           "runs": runs_cpu,
                           "median_add_and_save_without_embed": float(np.median([r["add_and_save_without_embed"]
                                                                                 for r in runs_cpu])),
                           "best_run": min(runs_cpu, key=lambda r: r["load"] + r["embed"] + r["add_and_save"])}}


CPU_PHASES = """
import json, sys, time
c0 = time.process_time()
from contextrag import ContextRAG
c1 = time.process_time()
rag = ContextRAG.load(sys.argv[1], prepare=sys.argv[3] == "prepared")   # as the command line loads
c2 = time.process_time()
docs = json.loads(sys.argv[2])
rag.index.embedder.embed_passages(["warm up"])
c3 = time.process_time()
rag.index.embedder.embed_passages([d["title"] + chr(10) + d["text"] for d in docs])
c4 = time.process_time()
rag.add([dict(d, id=d["id"] + "-cpu") for d in docs])
c5 = time.process_time()
print(json.dumps({"start_and_import": round(c1, 3), "load": round(c2 - c1, 3), "embedder_load": round(c3 - c2, 3),
                  "embed": round(c4 - c3, 3), "add_and_save": round(c5 - c4, 3),
                  "add_and_save_without_embed": round(c5 - c4 - (c4 - c3), 3)}))
"""


def synthetic_docs(n_chunks: int) -> list:
    data = json.loads((DATA / "hotpotqa_500.json").read_text())
    paras = {}
    for q in data:
        for t, s in q["context"]:
            paras.setdefault(t, "".join(s))
    base = list(paras.items())
    out, r = [], 0
    while len(out) < n_chunks:
        for t, x in base:
            out.append({"id": f"s{r}-{len(out)}", "title": t if r == 0 else f"{t} {r}", "text": x})
            if len(out) == n_chunks:
                break
        r += 1
    return out


def curve(sizes, repeats: int) -> list:
    sys.path.insert(0, str(REPO / "tests" / "reliability"))
    from hash_embedder import HashEmbedder

    from contextrag import Config, ContextRAG
    from contextrag.index import build
    cfg = Config(n_summaries=0, seed=0, chunk_tokenizer="regex")
    out = []
    for n in sizes:
        docs = synthetic_docs(n)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rag = ContextRAG.build(docs, config=cfg, embedder=HashEmbedder())
        built = time.perf_counter() - t
        add = new_docs(N_DOCS, offset=0)
        inc, full, dele, cpu_inc, cpu_full = [], [], [], [], []
        for r in range(repeats):
            for mode in ("incremental", "retokenise"):
                work = ContextRAG(rag.index)
                if mode == "retokenise":
                    orig_fam, orig_bm25, orig_chunk = build._families_after_add, build.build_bm25, build._chunk_bm25

                    def from_text(ix, _orig=orig_bm25):
                        ix.words = None
                        return _orig(ix)
                    build._families_after_add, build.build_bm25 = (lambda *a, **k: None), from_text
                    build._chunk_bm25 = (lambda *a, **k: None)      # no postings kept: BM25 from every text
                try:
                    t, c = time.perf_counter(), time.process_time()
                    work.add(add)
                    dt, dc = time.perf_counter() - t, time.process_time() - c
                finally:
                    if mode == "retokenise":
                        build._families_after_add, build.build_bm25, build._chunk_bm25 = orig_fam, orig_bm25, orig_chunk
                (inc if mode == "incremental" else full).append(dt)
                (cpu_inc if mode == "incremental" else cpu_full).append(dc)
                if mode == "incremental":
                    stages = work.index.info["updates"][-1]["seconds"]
                    t = time.perf_counter()
                    work.delete([d["id"] for d in add])
                    dele.append(time.perf_counter() - t)
        out.append({"chunks": rag.index.n_chunks, "build_s": round(built, 1), "loadavg_1min": os.getloadavg()[0],
                    "add_s": round(min(inc), 3), "add_retokenise_s": round(min(full), 3),
                    "speedup": round(min(full) / min(inc), 2), "add_cpu_s": round(min(cpu_inc), 3),
                    "add_retokenise_cpu_s": round(min(cpu_full), 3), "delete_s": round(min(dele), 3),
                    "add_stages_s": stages})
        print(json.dumps(out[-1]), flush=True)
    return out


def bm25_build(repeats: int) -> dict:
    """BM25 over the HotpotQA-500 paragraphs: ours (words tokenised, then postings of counts) against
    bm25s (the same tokenisation, then ``BM25.index``), interleaved, best of ``repeats``."""
    import bm25s

    from contextrag.index.bm25_index import chunk_counts, from_counts, word_terms
    from contextrag.index.core import bm25_tokenize_ids
    from contextrag.index.lexical import words as lw
    docs = synthetic_docs(4986)
    titles, texts = [d["title"] for d in docs], [d["text"] for d in docs]
    ours, peer = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        W = lw.from_chunks(titles, texts)
        from_counts(chunk_counts(W), word_terms(W)[1], len(texts))
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        r = bm25s.BM25()
        r.index(bm25_tokenize_ids(lw.search_texts(titles, texts)), show_progress=False)
        peer.append(time.perf_counter() - t)
    return {"what": "BM25 index over 4,986 HotpotQA-500 paragraphs, tokenisation included; ours also stores the "
                    "words and counts updates need", "ours_s": round(min(ours), 3), "bm25s_s": round(min(peer), 3),
            "speedup": round(min(peer) / min(ours), 2), "loadavg_1min": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, default=None, help="a HotpotQA-500 index directory (5,522 chunks)")
    ap.add_argument("--sizes", default="5000,20000,50000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "updates.json")
    ap.add_argument("--no-bm25", action="store_true", help="skip the BM25 build comparison")
    ap.add_argument("--merge", action="store_true", help="keep the parts of --out this run does not redo")
    ap.add_argument("--cli-key", default="cli_add_20_docs", help="the key of the command-line add's record")
    ap.add_argument("--prepared-load", action="store_true",
                    help="the command line's add with the index loaded prepared for queries, as it once "
                         "did (an ablation)")
    a = ap.parse_args()
    res = json.loads(a.out.read_text()) if a.merge and a.out.exists() else {}
    res.update({"machine": {"cpu": cpu(), "loadavg_start": list(os.getloadavg()),
                            "note": "shared 2-core machine, other jobs running: noisy; compare ratios within the run"},
                "versions": versions()})
    if a.index is not None:
        res[a.cli_key] = {"index_chunks": json.loads((a.index / (a.index / "CURRENT").read_text().strip()
                                                       / "manifest.json").read_text())["counts"]["chunks"],
                          "prepared_load": a.prepared_load, "machine": res["machine"], "versions": res["versions"],
                          **cli_add(a.index, a.repeats, a.prepared_load)}
        print(json.dumps(res[a.cli_key]), flush=True)
    if not a.no_bm25:
        res["bm25_build"] = bm25_build(a.repeats)
        print(json.dumps(res["bm25_build"]), flush=True)
    if a.sizes:
        res["synthetic_curve"] = {"what": f"ContextRAG.add of {N_DOCS} documents in-process (no save), hashing "
                                          "embedder; peer: the same add recomputing words, BM25 and the lexical "
                                          "families from every chunk's text",
                                  "points": curve([int(x) for x in a.sizes.split(",")], a.repeats)}
    res["machine"]["loadavg_end"] = list(os.getloadavg())
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
