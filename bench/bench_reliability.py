"""Retrieval under load -> bench/results/reliability.json

Concurrent clients (threads; no server exists yet) each ask the HotpotQA-500 questions through
``ContextRAG.retrieve`` (question embedding with the real model, BM25, cosine, fuzzy routing,
spreading, ranking) on one HotpotQA-500 index: latency p50/p95/p99 and errors, with 8 and 32 clients,
then the same while a writer thread adds 100 documents (paragraphs of MultiHop-RAG articles, which the
index does not hold) through ``ContextRAG.add`` on a copy of the index. Afterwards the index is
reloaded from disk and every added document must be there (lost writes). The harness is
contextrag.eval.load.run_load (its small shape runs in CI: tests/reliability/test_load.py).

Usage: python bench/bench_reliability.py [--clients 8,32] [--questions 500] [--max-queries N]
                                         [--writer-docs 100] [--writer-batch 1] [--embedder model|hash]
       python bench/bench_reliability.py --soak SECONDS [--race-rounds 10]
``--max-queries`` caps clients x questions per run (each client then asks the first N/clients
questions); the JSON records what ran. ``--embedder hash`` swaps the sentence-transformers model for
the hashing embedder of the tests (tests/reliability/hash_embedder.py) in the index and the queries:
every other stage runs as usual, so concurrency, snapshot swaps and writes are exercised the same,
at a fraction of the CPU (retrieval quality is then meaningless and not reported). On a shared
2-core machine: the JSON records the load average.

``--soak SECONDS`` runs the soak of tests/reliability/soak.py for that long instead (reader threads,
writes, reloads and a scripted LLM failing one call in three, interleaved; resident memory sampled)
on a 200-document HotpotQA index with the hashing embedder, then ``--race-rounds`` fresh processes
querying during their first write (over HTTP and in-process, tests/reliability/first_write_race.py)
-> bench/results/reliability_soak.json.
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
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
DATA = Path(os.environ.get("CONTEXTRAG_DATA", REPO.parent / "shared" / "data"))
INDEX_DIR = Path(os.environ.get("CONTEXTRAG_BENCH_INDEX", Path(tempfile.gettempdir()) / "contextrag_bench"
                                / "hotpot500_index"))


def cpu() -> dict:
    """The CPU model and the ISA flags that matter to the kernels (Linux; empty elsewhere)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    model = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), None)
    flags = next((ln.split(":", 1)[1].split() for ln in info.splitlines() if ln.startswith("flags")), [])
    return {"model": model, "flags": sorted(f for f in flags if f.startswith(("avx", "amx", "fma")))}


def machine() -> dict:
    import contextrag
    import torch
    return {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "cpu": cpu(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "contextrag": contextrag.__version__, "loadavg_start": list(os.getloadavg()),
            "note": "shared machine: other jobs ran at the same time (see loadavg)"}


def hotpot():
    data = json.loads((DATA / "hotpotqa_500.json").read_text())
    docs: dict[str, str] = {}
    for q in data:
        for title, sents in q["context"]:
            docs.setdefault(title, "".join(sents))
    return [q["question"] for q in data], [{"id": t, "title": t, "text": x} for t, x in docs.items()]


def new_documents(n: int) -> list[dict]:
    """n paragraphs (>= 200 characters) of the MultiHop-RAG articles: real text the index lacks."""
    arts = json.loads((DATA / "multihoprag_small_corpus.json").read_text())
    out = []
    for a in arts:
        for j, para in enumerate(p.strip() for p in a["body"].split("\n")):
            if len(para) >= 200:
                out.append({"id": f"mhr:{a['url']}#{j}", "title": a["title"], "text": para})
            if len(out) == n:
                return out
    raise SystemExit(f"the MultiHop-RAG corpus has only {len(out)} paragraphs of >= 200 characters")


def index(where: Path, embedder):
    from contextrag import Config, ContextRAG
    if where.is_dir():
        try:
            return ContextRAG.load(where, embedder=embedder), False
        except Exception as e:  # noqa: BLE001
            print(f"cannot load {where} ({e}); rebuilding")
    _, docs = hotpot()
    where.parent.mkdir(parents=True, exist_ok=True)
    cfg = Config(n_summaries=0) if embedder is None else Config(n_summaries=0, chunk_tokenizer="regex")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ContextRAG.build(docs, path=where, config=cfg, embedder=embedder), True


def soak_main(seconds: float, race_rounds: int) -> None:
    import subprocess
    import sys
    sys.path.insert(0, str(REPO / "tests" / "reliability"))
    from hash_embedder import HashEmbedder, tiny_config
    from soak import run

    from contextrag import ContextRAG
    _, docs = hotpot()
    out = {"machine": machine(), "embedder": "hash", "soak": None, "race": []}
    work = Path(tempfile.mkdtemp(prefix="contextrag_soak_"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ContextRAG.build(docs[:200], path=work / "base", config=tiny_config(), embedder=HashEmbedder())
        shutil.copytree(work / "base", work / "idx")
        load0 = list(os.getloadavg())
        res = run(work / "idx", docs[200:400], seconds, embedder=HashEmbedder())
        res["loadavg_before"], res["loadavg_after"] = load0, list(os.getloadavg())
        out["soak"] = res
        print(json.dumps({k: v for k, v in res.items() if k != "rss_samples"}), flush=True)
        for mode in ("server", "threads"):
            for i in range(race_rounds):
                idx = work / f"race-{mode}-{i}"
                shutil.copytree(work / "base", idx)
                r = subprocess.run([sys.executable, str(REPO / "tests" / "reliability" / "first_write_race.py"),
                                    mode, str(idx)], capture_output=True, text=True, timeout=600)
                row = (json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0
                       else {"mode": mode, "crashed": r.stderr[-500:]})
                out["race"].append(row)
                shutil.rmtree(idx, ignore_errors=True)
            print(json.dumps({"race": mode, "rounds": race_rounds,
                              "query_errors": sum(x.get("query_errors", 1) for x in out["race"] if x["mode"] == mode),
                              "write_errors": sum(x.get("write_errors", 1) for x in out["race"] if x["mode"] == mode)}),
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out["machine"]["loadavg_end"] = list(os.getloadavg())
    RESULTS.mkdir(parents=True, exist_ok=True)
    p = RESULTS / "reliability_soak.json"
    p.write_text(json.dumps(out, indent=1, default=float))
    print(f"-> {p}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", default="8,32")
    ap.add_argument("--questions", type=int, default=500)
    ap.add_argument("--max-queries", type=int, default=None)
    ap.add_argument("--writer-docs", type=int, default=100)
    ap.add_argument("--writer-batch", type=int, default=1)
    ap.add_argument("-k", type=int, default=12)
    ap.add_argument("--embedder", choices=("model", "hash"), default="model")
    ap.add_argument("--soak", type=float, default=None, metavar="SECONDS")
    ap.add_argument("--race-rounds", type=int, default=10)
    a = ap.parse_args()
    if a.soak is not None:
        return soak_main(a.soak, a.race_rounds)
    import torch
    torch.set_num_threads(1)          # clients are the parallelism; one intra-op thread each
    from contextrag import ContextRAG
    from contextrag.eval.load import run_load

    embedder, where = None, INDEX_DIR
    if a.embedder == "hash":
        import sys
        sys.path.insert(0, str(REPO / "tests" / "reliability"))
        from hash_embedder import HashEmbedder
        embedder, where = HashEmbedder(), INDEX_DIR.with_name(INDEX_DIR.name + "_hash")
    t = time.perf_counter()
    base, built = index(where, embedder)
    questions, _ = hotpot()
    out = {"machine": machine(), "embedder": a.embedder, "index": {"docs": len(base.index.docs), "chunks": base.index.n_chunks,
                                           "items": base.index.n_items, "built_now": built,
                                           "seconds": time.perf_counter() - t},
           "k": a.k, "runs": []}
    base.retrieve("warm up the embedder and the caches", k=a.k)
    extra = new_documents(a.writer_docs)
    for clients in (int(c) for c in a.clients.split(",")):
        n = a.questions if a.max_queries is None else max(1, min(a.questions, a.max_queries // clients))
        qs = questions[:n]
        for with_writer in (False, True):
            work = Path(tempfile.mkdtemp(prefix="contextrag_load_"))
            try:
                shutil.copytree(where, work / "idx")
                rag = ContextRAG.load(work / "idx", embedder=base.index.embedder)
                rag.retrieve("warm up", k=a.k)
                load0 = list(os.getloadavg())
                res = run_load(rag, qs, clients, k=a.k, writer_docs=extra if with_writer else None,
                               writer_batch=a.writer_batch)
                res["loadavg_before"], res["loadavg_after"] = load0, list(os.getloadavg())
                res["with_writer"] = with_writer
                print(json.dumps({k: res[k] for k in ("clients", "questions_per_client", "queries", "errors",
                                                      "latency_ms", "with_writer")}
                                 | ({"writer": res["writer"]} if with_writer else {}), default=float), flush=True)
                out["runs"].append(res)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    out["machine"]["loadavg_end"] = list(os.getloadavg())
    out["totals"] = {"queries": sum(r["queries"] for r in out["runs"]),
                     "errors": sum(r["errors"] for r in out["runs"]),
                     "documents_added": sum(r["writer"]["docs"] for r in out["runs"] if "writer" in r),
                     "lost_writes": sum(r["writer"]["lost_writes"] for r in out["runs"] if "writer" in r),
                     "failed_adds": sum(len(r["writer"]["failures"]) for r in out["runs"] if "writer" in r)}
    RESULTS.mkdir(parents=True, exist_ok=True)
    p = RESULTS / "reliability.json"
    p.write_text(json.dumps(out, indent=1, default=float))
    print(f"-> {p}")


if __name__ == "__main__":
    main()
