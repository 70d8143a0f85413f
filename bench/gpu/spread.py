"""The GPU check's "spread" group: ``ops.spread_hop`` on CUDA and Triton against the C++ CPU kernel.

A synthetic lexical incidence shaped like the million-chunk one (Zipf-distributed attributes, so
document frequencies span 1 to a large fraction of the corpus; degrees = normalised IDF), a batch of
queries with 5 seeds of distinct documents and a few μ entries each. Each GPU backend's output must
equal the CPU kernel's exactly (max and the same float operations); then queries/s per backend and
batch size. Under --cpu-smoke the shapes are tiny and Triton runs in the interpreter.
"""
from __future__ import annotations

import time

import numpy as np


def _incidence(n: int, M: int, per_row: int, seed: int = 0):
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    cols = (rng.zipf(1.2, size=n * per_row) - 1) % M
    rows = np.repeat(np.arange(n, dtype=np.int64), per_row)
    I = sp.csr_matrix((np.ones(n * per_row, np.float32), (rows, cols)), shape=(n, M))
    I.data[:] = 1.0
    df = np.maximum(np.bincount(I.indices, minlength=M), 1)
    w = np.clip(np.log(n / df) / np.log(n), 0, 1).astype(np.float32)
    I.data = w[I.indices]
    I.eliminate_zeros()
    doc = np.arange(n, dtype=np.int64) // 4          # 4 chunks per document
    return I, doc


def group_spread(ctx) -> None:
    import scipy.sparse as sp
    torch, ops = ctx.torch, ctx.ops
    n, M, per_row, Q = (2000, 1500, 12, 8) if ctx.smoke else (1_000_000, 400_000, 40, 256)
    rng = np.random.default_rng(1)
    t = time.perf_counter()
    I, doc = _incidence(n, M, per_row)
    G = ops.SpreadIncidence(I, doc)
    ctx.out["shape"] = {"chunks": n, "attributes": M, "nnz": G.nnz, "queries": Q,
                        "prepare_s": round(time.perf_counter() - t, 2)}
    seeds = rng.integers(0, n, size=(Q, 5))
    degs = np.tile(np.linspace(1.0, 0.5, 5, dtype=np.float32), (Q, 1))
    mu = sp.random(Q, M, density=3.0 / M, format="csr", random_state=rng, dtype=np.float32)
    t = time.perf_counter()
    want = ops.spread_hop(G, seeds, degs, mu, backend="cpu")
    cpu_s = time.perf_counter() - t
    ctx.out["cpu"] = {"batch": Q, "seconds": cpu_s, "queries_per_s": Q / cpu_s}
    ctx.flush()
    s_dev = torch.from_numpy(seeds).to(ctx.dev)
    d_dev = torch.from_numpy(degs).to(ctx.dev)
    for backend in ctx.backends:
        def run(backend=backend):
            out = ops.spread_hop(G, s_dev, d_dev, mu, backend=backend)
            got = out.cpu().numpy()
            res = {"equal_to_cpu": bool(np.array_equal(got, want)),
                   "max_abs_diff": float(np.abs(got - want).max()) if got.size else 0.0}
            for B in sorted({b for b in (1, 64, Q) if b <= Q}):
                sB, dB, mB = s_dev[:B], d_dev[:B], mu[:B]
                sec = ctx.bench(lambda: ops.spread_hop(G, sB, dB, mB, backend=backend))
                res[f"batch_{B}"] = {"seconds": sec, "queries_per_s": B / sec}
            res["speedup_vs_cpu_full_batch"] = res[f"batch_{Q}"]["queries_per_s"] / ctx.out["cpu"]["queries_per_s"]
            return res
        ctx.step(backend, run)
