"""Query-stage benchmark -> bench/results/query_*.json

  retrieval   latency of contextrag.query.retrieve without an LLM (p50/p95 over the 500 HotpotQA
              questions on the HotpotQA-500 index: question embedding + BM25 + cosine + fuzzy + spreading
              + ranking), also split into "embed the question" and "score and rank", and recall@2/5 of
              the gold titles as a sanity check; default config and Config.paper() (no spreading).
  e2e         end-to-end query.answer with the embedded GGUF model (rewrites, rerank, answer) on a
              handful of questions: seconds and LLM calls per query by stage; then the same questions
              again with the same on-disk cache (the cache-hit effect).
  rewrites    concurrency of the three rewrites against one-after-another: (a) the embedded model
              (one in-process model: calls are serialised, so no speed-up is expected),
              (b) a real HTTP endpoint on 127.0.0.1 (stdlib threaded server) answering after a fixed
              per-call latency, through contextrag.llm.http.HTTPClient (threads and asyncio paths).

Usage: python bench/bench_query.py [retrieval] [e2e] [rewrites] [--questions N] [--e2e-questions N]
Runs on a shared 2-core CPU machine: every JSON records the load average around the run.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")     # one thread per pool: oversubscribed pools are 20x slower here
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import http.server  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
DATA = Path(os.environ.get("CONTEXTRAG_DATA", REPO.parent / "shared" / "data"))
INDEX_DIR = Path(os.environ.get("CONTEXTRAG_BENCH_INDEX",
                                Path.home() / ".cache" / "contextrag" / "bench" / "hotpot500_index"))
EMBED_CACHE = Path(os.environ.get("CONTEXTRAG_EMBED_CACHE",
                                  Path.home() / ".cache" / "contextrag" / "eval-indexes" / "embeddings.sqlite"))


def machine() -> dict:
    import torch
    out = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
           "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
           "loadavg_start": list(os.getloadavg())}
    import transformers
    out["transformers"] = transformers.__version__
    return out


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q))


def write(name: str, obj: dict):
    obj.setdefault("machine", {})["loadavg_end"] = list(os.getloadavg())
    RESULTS.mkdir(parents=True, exist_ok=True)
    p = RESULTS / f"query_{name}.json"
    p.write_text(json.dumps(obj, indent=1, default=float))
    print(f"-> {p}")


def hotpot():
    data = json.loads((DATA / "hotpotqa_500.json").read_text())
    docs: dict[str, str] = {}
    for q in data:
        for title, sents in q["context"]:
            docs.setdefault(title, "".join(sents))
    return data, [{"id": t, "title": t, "text": x} for t, x in docs.items()]


def hotpot_index():
    """The HotpotQA-500 index (built once with the real pipeline, then loaded from INDEX_DIR)."""
    from contextrag import Config, ContextRAG
    if INDEX_DIR.is_dir():
        try:
            return ContextRAG.load(INDEX_DIR), False
        except Exception as e:
            print(f"cannot load {INDEX_DIR} ({e}); rebuilding")
    _, docs = hotpot()
    cfg = Config(n_summaries=0)
    kw = {}
    if EMBED_CACHE.parent.is_dir():
        from contextrag.eval.embed_cache import caching_embedder
        emb = caching_embedder(cfg, EMBED_CACHE)
        if emb is not None:
            kw["embedder"] = emb
    INDEX_DIR.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ContextRAG.build(docs, path=INDEX_DIR, config=cfg, **kw), True


# ---------------------------------------------------------------- retrieval latency
def bench_retrieval(n_questions: int):
    import torch
    torch.set_num_threads(1)
    from contextrag import Config, query
    from contextrag.query import view_of
    from contextrag.query.hybrid import score_all, top_indices
    from contextrag.query.dense import embed_queries

    t = time.perf_counter()
    rag, built = hotpot_index()
    t_index = time.perf_counter() - t
    ix = rag.index
    data, _ = hotpot()
    data = data[:n_questions]
    v = view_of(ix)
    query.retrieve(ix, "warm up the embedder and caches")
    out = {"machine": machine(), "index": {"path": INDEX_DIR.name, "built_now": built, "seconds": t_index,
                                           "chunks": ix.n_chunks, "items": ix.n_items, "nodes": ix.graph.n_nodes},
           "questions": len(data), "k": 12, "systems": {}}
    systems = {"default": {}, "paper (w_spread=0)": {"w_spread": 0.0}, "hybrid no graph (w_fuzzy=0, w_spread=0)":
               {"w_fuzzy": 0.0, "w_spread": 0.0}}
    for name, ov in systems.items():
        cfg = Config(**{**ix.config.to_dict(), **ov}) if ov else ix.config
        total, emb, score, r2, r5 = [], [], [], [], []
        for q in data:
            t0 = time.perf_counter()
            hits = query.retrieve(ix, q["question"], k=12, **ov)
            total.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            Q = embed_queries(v, [q["question"]])
            t1 = time.perf_counter()
            parts = score_all(v, q["question"], Q, cfg)
            top_indices(parts["score"], 12)
            t2 = time.perf_counter()
            emb.append(t1 - t0)
            score.append(t2 - t1)
            gold = {t for t, _ in q["supporting_facts"]}
            titles = []
            for h in hits:
                for d in h.doc_ids:
                    if d not in titles:
                        titles.append(d)
            r2.append(len(gold & set(titles[:2])) / len(gold))
            r5.append(len(gold & set(titles[:5])) / len(gold))
        out["systems"][name] = {
            "overrides": ov,
            "retrieve_ms": {"p50": 1e3 * pct(total, 50), "p95": 1e3 * pct(total, 95), "mean": 1e3 * float(np.mean(total))},
            "embed_question_ms": {"p50": 1e3 * pct(emb, 50), "p95": 1e3 * pct(emb, 95)},
            "score_and_rank_ms": {"p50": 1e3 * pct(score, 50), "p95": 1e3 * pct(score, 95)},
            "recall@2": float(np.mean(r2)), "recall@5": float(np.mean(r5)),
        }
        print(name, json.dumps(out["systems"][name]))
    write("retrieval", out)


# ---------------------------------------------------------------- end to end with the embedded model
def bench_e2e(n_questions: int):
    import torch
    torch.set_num_threads(1)
    from contextrag import query
    from contextrag.llm import CallCache
    from contextrag.llm.local import LocalLLMClient

    rag, _ = hotpot_index()
    ix = rag.index
    data, _ = hotpot()
    data = data[:n_questions]
    with tempfile.TemporaryDirectory() as d:
        client = LocalLLMClient(cache=CallCache(Path(d) / "llm.sqlite"))
        client.complete([{"role": "user", "content": "hi"}], max_tokens=1)     # load the model
        runs = {}
        for run in ("cold cache", "repeated (warm cache)"):
            rows = []
            for q in data:
                t = time.perf_counter()
                a = query.answer(ix, q["question"], llm=client, k=12)
                rows.append({"question": q["question"], "gold": q["answer"], "answer": a.text,
                             "seconds": time.perf_counter() - t, "cost": a.cost, "rewrites": a.rewrites,
                             "reranked": a.reranked})
                print(run, round(rows[-1]["seconds"], 1), a.text[:80], flush=True)
            secs = [r["seconds"] for r in rows]
            calls = [r["cost"]["total"]["calls"] for r in rows]
            cached = [r["cost"]["total"]["cached_calls"] for r in rows]
            per_stage = {}
            for r in rows:
                for k, c in r["cost"].items():
                    if k != "total":
                        per_stage.setdefault(k, []).append(c["calls"] + c["cached_calls"])
            runs[run] = {"seconds_per_query": {"mean": float(np.mean(secs)), "p50": pct(secs, 50), "max": max(secs)},
                         "llm_calls_per_query": float(np.mean(calls)), "cached_calls_per_query": float(np.mean(cached)),
                         "llm_calls_by_stage_per_query": {k: float(np.mean(v)) for k, v in per_stage.items()},
                         "prompt_tokens_per_query": float(np.mean([r["cost"]["total"]["prompt_tokens"] for r in rows])),
                         "completion_tokens_per_query": float(np.mean([r["cost"]["total"]["completion_tokens"] for r in rows])),
                         "rows": rows}
        cold, warm = runs["cold cache"], runs["repeated (warm cache)"]
        out = {"machine": machine(), "model": client.model, "model_path": str(client.model_path),
               "n_threads": client.n_threads, "questions": len(data), "runs": runs,
               "cache_speedup": cold["seconds_per_query"]["mean"] / max(warm["seconds_per_query"]["mean"], 1e-9)}
    write("e2e", out)


# ---------------------------------------------------------------- rewrite concurrency
class _SlowOpenAI(http.server.BaseHTTPRequestHandler):
    latency = 0.8

    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(n))
        time.sleep(self.latency)
        text = "rewritten: " + body["messages"][-1]["content"][-40:]
        data = json.dumps({"model": "slow", "choices": [{"message": {"role": "assistant", "content": text}}],
                           "usage": {"prompt_tokens": 30, "completion_tokens": 6}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def _time_rewrites(client, question, reps):
    """Sequential vs concurrent on the *same* prompts (the clients here have no cache), so the model
    generates the same text in every mode; the question changes per rep."""
    from contextrag.query import rewrite as rw
    seq, thr, asy, toks = [], [], [], {"sequential": 0, "threads": 0, "async": 0}

    def tokens():
        return client.ledger.snapshot().get("rewrite").completion_tokens if "rewrite" in client.ledger.snapshot() else 0

    def run_seq(q):
        for kind in rw.KINDS:
            client.complete(rw.messages_for(kind, q), stage="rewrite", max_tokens=rw.MAX_TOKENS)

    modes = [("sequential", run_seq, seq), ("threads", lambda q: rw.rewrites(client, q), thr),
             ("async", lambda q: asyncio.run(rw.arewrites(client, q)), asy)]
    for i in range(reps):
        q = f"{question} (variant {i})"
        for name, fn, times in modes[i % 3:] + modes[:i % 3]:     # the order rotates: no mode is always first
            t0 = tokens()
            t = time.perf_counter()
            fn(q)
            times.append(time.perf_counter() - t)
            toks[name] += tokens() - t0
    s, tt, a = float(np.median(seq)), float(np.median(thr)), float(np.median(asy))
    return {"sequential_s": s, "concurrent_threads_s": tt, "concurrent_async_s": a,
            "speedup_threads": s / tt, "speedup_async": s / a, "reps": reps, "completion_tokens": toks,
            "all_runs_s": {"sequential": seq, "threads": thr, "async": asy}}


def bench_rewrites(reps: int):
    import torch

    from contextrag.llm.http import HTTPClient
    out = {"machine": machine(), "question": "In what year was the university where Sergei Aleksandrovich "
                                             "Tokarev was a professor founded?"}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowOpenAI)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        c = HTTPClient(f"http://127.0.0.1:{srv.server_address[1]}/v1", model="slow")
        out["http_endpoint"] = {"per_call_latency_s": _SlowOpenAI.latency, **_time_rewrites(c, out["question"], reps)}
        print("http", out["http_endpoint"])
    finally:
        srv.shutdown()
    try:
        from contextrag.llm.local import LocalLLMClient
        lc = LocalLLMClient()
        lc.complete([{"role": "user", "content": "hi"}], max_tokens=1)
        out["embedded_model"] = {"model": lc.model, "torch_threads": torch.get_num_threads(),
                                 "note": "one in-process transformers model: calls are serialised by a lock",
                                 **_time_rewrites(lc, out["question"], reps)}
        print("embedded", out["embedded_model"])
    except ImportError as e:
        out["embedded_model"] = {"skipped": str(e)}
    write("rewrites", out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("parts", nargs="*", default=["retrieval", "e2e", "rewrites"])
    p.add_argument("--questions", type=int, default=500)
    p.add_argument("--e2e-questions", type=int, default=3)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    for part in a.parts:
        if part == "retrieval":
            bench_retrieval(a.questions)
        elif part == "e2e":
            bench_e2e(a.e2e_questions)
        elif part == "rewrites":
            bench_rewrites(a.reps)
        else:
            raise SystemExit(f"unknown part {part!r}")


if __name__ == "__main__":
    main()
