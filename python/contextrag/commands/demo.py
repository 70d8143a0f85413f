"""`contextrag demo`: the main job on the embedded defaults, offline.

Until the index lands this is a kernel demo: RQ-KMeans → FCM memberships → Łukasiewicz closures
→ meet cardinality → fuzzy routing on synthetic clustered embeddings, with the backend used.
"""
from __future__ import annotations

import time


def add_arguments(p):
    p.add_argument("--n", type=int, default=20000, help="number of synthetic embeddings")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--seed", type=int, default=0)


def run(args) -> int:
    import numpy as np
    from contextrag import ops

    rng = np.random.default_rng(args.seed)
    centers = rng.standard_normal((64, args.dim)).astype(np.float32)
    X = centers[rng.integers(64, size=args.n)] + 0.3 * rng.standard_normal((args.n, args.dim)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    print("backends:", {k: v["available"] for k, v in ops.backends().items()})
    t = time.perf_counter()
    rq = ops.rq_kmeans(X, (96, 24, 12), n_iter=20, seed=args.seed)
    print(f"rq_kmeans {X.shape} sizes={rq.sizes}: {time.perf_counter() - t:.2f}s, inertia per level "
          + ", ".join(f"{v:.1f}" for v in rq.inertia))
    t = time.perf_counter()
    I = ops.fcm_memberships(X, rq.codebooks[0], m=2.0)
    print(f"fcm_memberships {I.shape}: {time.perf_counter() - t:.2f}s, mean max membership {I.max(1).mean():.3f}")
    t = time.perf_counter()
    attr = np.eye(I.shape[1], dtype=np.float32)
    extents = ops.luk_down(attr, I)          # attribute concepts: {m}↓
    closed, intents = ops.luk_closure(extents, I)
    print(f"closures of {attr.shape[0]} attribute concepts over {I.shape[0]} chunks: {time.perf_counter() - t:.2f}s, "
          f"closed: {bool(np.allclose(closed, extents, atol=1e-6))}")
    t = time.perf_counter()
    card = ops.meet_cardinality(extents, extents)
    print(f"meet_cardinality {card.shape}: {time.perf_counter() - t:.2f}s")
    mu = np.clip(I[:5] / I[:5].max(axis=1, keepdims=True), 0, 1)   # queries' activation of each cluster
    scores = ops.fuzzy_route(mu, I)
    print(f"fuzzy_route {scores.shape}: best chunk per query {scores.argmax(1).tolist()}")
    return 0
