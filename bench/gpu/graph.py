"""The "graph" group: stages 2–3 of the index build (RQ-KMeans → fuzzy context → closures → meets)."""
from __future__ import annotations

from .common import Ctx

import time


def graph_stages(ctx: Ctx, X, b: str) -> dict:
    """Stages 2–3 on the vectors X with backend b: seconds per stage and in total."""
    torch, ops, sizes = ctx.torch, ctx.ops, ctx.sizes
    times = {}
    ctx.sync()
    t0 = time.perf_counter()
    t, rq = ctx.once(lambda: ops.rq_kmeans(X, sizes, n_iter=ctx.graph_iter, max_points_per_centroid=256,
                                                 backend=b))
    times["rq_kmeans"] = t

    def fuzzy_context():
        R = X.float()
        Us = []
        for lvl, C in enumerate(rq.codebooks):
            Us.append(ops.fcm_memberships(R.to(X.dtype), C, 2.0, backend=b))
            R = R - C[rq.codes[:, lvl]]
        return torch.cat(Us, dim=1).contiguous()

    t, I = ctx.once(fuzzy_context)
    times["fcm_context"] = t
    E = I.t().contiguous()  # attribute concepts' extents {m}↓ = I[:, m]

    def closures():
        intent = ops.luk_up(E, I, backend=b)
        return ops.luk_down(intent, I, backend=b), intent

    t, (ext, _) = ctx.once(closures)
    times["closures"] = t
    t, card = ctx.once(lambda: ops.meet_cardinality(ext, ext, backend=b))
    times["meet_cardinality"] = t

    def joins():
        c = card.clone()
        c.fill_diagonal_(-1.0)
        top = torch.topk(c.flatten(), k=min(64, c.numel())).indices
        i, j = top // c.shape[0], top % c.shape[0]
        J = torch.maximum(ext[i], ext[j])
        return ops.luk_down(ops.luk_up(J, I, backend=b), I, backend=b)

    t, _ = ctx.once(joins)
    times["join_closures"] = t
    ctx.sync()
    return {"n": X.shape[0], "d": X.shape[1], "sizes": list(rq.sizes), "attributes": int(I.shape[1]),
            "seconds": times, "total_s": time.perf_counter() - t0}


def group_graph(ctx: Ctx):
    """Stages 2–3 of §4.1 on the device for n precomputed embeddings: RQ-KMeans, FCM memberships of
    each level's residuals (the fuzzy context I), attribute-concept closures, meet cardinality of
    the closed extents, and closures of the top soft joins."""
    X = ctx.data()
    for b in ctx.backends:
        def run(b=b):
            r = graph_stages(ctx, X, b)
            return {**r, "goal_s": 10.0, "meets_goal": r["total_s"] < 10.0}

        ctx.step(f"graph/{b}", run)
