"""A soak compressed in time: for ``seconds``, reader threads query while the main thread writes (add,
replace, delete), asks for answers through a scripted LLM that fails one call in three (a server
error, an empty reply, a reply citing passages that do not exist) and reloads the index from disk.
The resident set size is sampled after every step; after a warm-up (the first quarter) its growth per
step (least squares) must stay near 0: an index kept alive by a cache grows it by megabytes a step.

Used by tests/reliability/test_soak.py (a short run) and bench/bench_reliability.py --soak (a long one).
"""
from __future__ import annotations

import gc
import os
import threading
import time
import warnings

QUESTIONS = ["Which magazine was started first?", "Who directed the film?", "Where is the river?",
             "What year was the band formed?", "Which city hosts the university?"]


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _faulty_llm():
    from contextrag.llm.http import LLMHTTPError
    from contextrag.llm.scripted import ScriptedClient
    n = {"calls": 0}

    def script(messages):
        n["calls"] += 1
        k = n["calls"] % 6
        if k == 1:
            raise LLMHTTPError("scripted fault: HTTP 500 from the LLM server after 3 attempts")
        if k == 3:
            return ""
        if k == 5:
            return "It is in [7] and [99], says [0]."
        return "The Glass River [1]."
    return ScriptedClient(script), LLMHTTPError


def run(path, paragraphs, seconds: float, *, readers: int = 2, embedder=None) -> dict:
    """The soak on the index at ``path`` (it is written to); ``paragraphs``: documents to add."""
    from contextrag import ContextRAG
    llm, llm_error = _faulty_llm()
    rag = ContextRAG.load(path, embedder=embedder)
    stop = threading.Event()
    lock = threading.Lock()
    c = {"queries": 0, "query_errors": 0, "writes": 0, "write_errors": 0, "answers": 0, "llm_faults": 0,
         "answer_errors": 0, "reloads": 0}
    errors: list[str] = []

    def fail(key, e):
        with lock:
            c[key] += 1
            if len(errors) < 5:
                errors.append(f"{key}: {type(e).__name__}: {e}"[:400])

    def reader(i):
        while not stop.is_set():
            try:
                hits = rag.retrieve(QUESTIONS[i % len(QUESTIONS)], k=5)
                if not hits:
                    raise AssertionError("no hits")
            except Exception as e:   # noqa: BLE001 - counted
                fail("query_errors", e)
            with lock:
                c["queries"] += 1
            i += 1

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(readers)]
    for t in threads:
        t.start()
    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()
    step = 0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            while time.monotonic() - t0 < seconds:
                p = paragraphs[step % len(paragraphs)]
                doc = {"id": f"soak-{step % 7}", "title": p["title"], "text": p["text"]}
                for what, change in (("add", lambda: rag.add([doc], replace=True)),
                                     ("delete", lambda: rag.delete([doc["id"]]) if step % 3 == 0 else None)):
                    try:
                        change()
                        c["writes"] += what == "add" or step % 3 == 0
                    except Exception as e:   # noqa: BLE001
                        fail("write_errors", e)
                try:
                    c["answers"] += 1
                    rag.answer(QUESTIONS[step % len(QUESTIONS)], llm=llm, style="paragraph", k=5)
                except llm_error:
                    c["llm_faults"] += 1
                except Exception as e:   # noqa: BLE001
                    fail("answer_errors", e)
                if step % 5 == 4:
                    ContextRAG.load(path, embedder=embedder).retrieve(QUESTIONS[0], k=3)
                    c["reloads"] += 1
                gc.collect()
                samples.append((time.monotonic() - t0, rss_mib()))
                step += 1
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    warm = samples[len(samples) // 4:] if len(samples) >= 8 else samples
    steps = list(range(len(samples) - len(warm), len(samples)))
    mean_s, mean_r = sum(steps) / len(steps), sum(r for _, r in warm) / len(warm)
    var = sum((x - mean_s) ** 2 for x in steps)
    slope = sum((x - mean_s) * (r - mean_r) for x, (_, r) in zip(steps, warm)) / var if var else 0.0
    half = len(warm) // 2
    first = max(r for _, r in warm[:half]) if half else warm[0][1]
    last = max(r for _, r in warm[half:]) if half else warm[-1][1]
    return {**c, "steps": step, "seconds": round(time.monotonic() - t0, 1), "errors": errors,
            "rss_mib_start": round(samples[0][1], 1), "rss_mib_first_half_max": round(first, 1),
            "rss_mib_second_half_max": round(last, 1), "rss_growth_mib": round(last - first, 1),
            "rss_mib_per_step": round(slope, 3),
            "rss_samples": [(round(t, 1), round(r, 1)) for t, r in samples[:: max(1, len(samples) // 40)]]}
