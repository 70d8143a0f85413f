"""Retrieval under load: concurrent clients querying one ``ContextRAG`` while a writer adds documents.

``run_load(rag, questions, clients)`` starts ``clients`` threads that each ask every question (each
client from its own starting point, so they do not move in lockstep) and records per-query latency
and errors. With ``writer_docs`` one more thread adds those documents meanwhile (``writer_batch`` per
``add``), and afterwards the index is reloaded from disk to count lost writes. A result counts as an
error if the call raises or returns something that is not a whole answer (no hits, more than k, a
non-finite score, or a document the index it came from does not hold).
"""
from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np

from ..config import DEFAULT_K


def _pcts(xs) -> dict[str, float | None]:
    if not xs:
        return {"p50": None, "p95": None, "p99": None, "mean": None, "max": None}
    a = np.asarray(xs, dtype=np.float64) * 1e3
    return {"p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "p99": float(np.percentile(a, 99)), "mean": float(a.mean()), "max": float(a.max())}


def _check(hits, k, ix) -> str | None:
    if not hits:
        return "no hits"
    if len(hits) > k:
        return f"{len(hits)} hits for k={k}"
    for h in hits:
        if not math.isfinite(float(h.score)):
            return f"non-finite score {h.score!r}"
        if h.doc_id is not None and h.doc_id not in ix.docs:
            return f"hit from document {h.doc_id!r} that its index does not hold"
    return None


def run_load(rag, questions: list[str], clients: int, *, k: int = DEFAULT_K, writer_docs: list | None = None,
             writer_batch: int = 1, max_error_samples: int = 5) -> dict[str, Any]:
    if isinstance(clients, bool) or not isinstance(clients, int) or clients < 1:
        raise ValueError(f"clients must be an int >= 1, got {clients!r}")
    if not questions:
        raise ValueError("questions is empty")
    if isinstance(writer_batch, bool) or not isinstance(writer_batch, int) or writer_batch < 1:
        raise ValueError(f"writer_batch must be an int >= 1, got {writer_batch!r}")
    lat: list[list[float]] = [[] for _ in range(clients)]
    errs: list[list[str]] = [[] for _ in range(clients)]
    start = threading.Barrier(clients + (1 if writer_docs else 0))
    n = len(questions)

    def client(c):
        order = questions[(c * n) // clients:] + questions[:(c * n) // clients]
        start.wait()
        for q in order:
            t = time.perf_counter()
            try:
                hits = rag.retrieve(q, k=k)
                # the writer only adds, so every index a query may have run on is within the current one
                bad = _check(hits, k, rag.index)
            except Exception as e:  # noqa: BLE001 - counted and reported
                bad = f"{type(e).__name__}: {e}"
            lat[c].append(time.perf_counter() - t)
            if bad:
                errs[c].append(bad)

    writer: dict[str, Any] = {}

    def write():
        adds, failures = [], []
        start.wait()
        for i in range(0, len(writer_docs), writer_batch):
            t = time.perf_counter()
            try:
                rag.add(writer_docs[i:i + writer_batch])
            except Exception as e:  # noqa: BLE001 - counted and reported
                failures.append(f"{type(e).__name__}: {e}")
            adds.append(time.perf_counter() - t)
        writer.update(adds=len(adds), add_ms=_pcts(adds), failures=failures)

    threads = [threading.Thread(target=client, args=(c,), name=f"client-{c}") for c in range(clients)]
    if writer_docs:
        threads.append(threading.Thread(target=write, name="writer"))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    all_lat = [x for xs in lat for x in xs]
    all_err = [x for xs in errs for x in xs]
    out: dict[str, Any] = {"clients": clients, "questions_per_client": n, "queries": len(all_lat), "k": k,
                           "errors": len(all_err), "error_samples": all_err[:max_error_samples],
                           "latency_ms": _pcts(all_lat), "wall_s": wall,
                           "queries_per_s": len(all_lat) / wall if wall > 0 else None}
    if writer_docs:
        want = [d["id"] if isinstance(d, dict) else None for d in writer_docs]
        if rag.path is not None:
            from contextrag.rag import ContextRAG
            on_disk = ContextRAG.load(rag.path, embedder=rag.index.embedder, prepare=False).index.docs
        else:
            on_disk = rag.index.docs
        lost = [d for d in want if d is not None and d not in on_disk]
        writer.update(docs=len(writer_docs), batch=writer_batch, lost_writes=len(lost), lost_sample=lost[:5])
        out["writer"] = writer
    return out
