"""The "rq_kmeans" group: RQ-KMeans per backend against torch, and batched against sequential."""
from __future__ import annotations

from .baselines import torch_rq
from .common import Ctx


def group_rq(ctx: Ctx):
    X = ctx.data()
    sizes, n_iter = ctx.sizes, ctx.n_iter
    # the same work on both sides: every row at every level (no sample), n_iter iterations (tol = 0)
    ctx.out["same_work"] = ("rq_kmeans and the torch baseline both train on all rows "
                            "(max_points_per_centroid=None), n_iter iterations per level (tol=0); the baseline "
                            "converts each level's residual once, not per iteration")

    def base():
        t, _ = ctx.once(lambda: torch_rq(X, sizes, n_iter))
        return {"s": t, "iterations": len(sizes) * n_iter, "s_per_iter": t / (len(sizes) * n_iter)}

    ctx.step("torch", base)
    for b in ctx.backends:
        def run(b=b):
            t, res = ctx.once(lambda: ctx.ops.rq_kmeans(X, sizes, n_iter=n_iter, tol=0.0, init="random",
                                                        max_points_per_centroid=None, backend=b))
            r = {"s": t, "max_iterations": len(sizes) * n_iter, "s_per_iter_upper": t / (len(sizes) * n_iter),
                 "inertia": res.inertia}
            tb = ctx.out.get("torch", {}).get("s")
            if tb:
                r["speedup_vs_torch"] = tb / t
            return r

        ctx.step(f"rq_kmeans/{b}", run)
    P, m = ctx.batched
    probs = [ctx.data(n=m, seed=10 + i) for i in range(P)]
    for b in ctx.backends:
        def batched(b=b):
            fn = ctx.IMPLS["rq_kmeans_batched"][b]  # the batched implementation itself (also on CPU tensors)
            t, res = ctx.once(lambda: fn(probs, sizes, n_iter=n_iter, tol=1e-4, seed=0, max_points_per_centroid=None))
            few = min(4, P)
            t_seq, _ = ctx.once(lambda: [ctx.ops.rq_kmeans(p, sizes, n_iter=n_iter, tol=1e-4, seed=0,
                                                           max_points_per_centroid=None, backend=b)
                                         for p in probs[:few]])
            return {"problems": P, "rows_each": m, "s_batched": t, "s_sequential_est": t_seq * P / few,
                    "speedup": t_seq * P / few / t,
                    "same_work": "both sides: all rows (max_points_per_centroid=None), tol=1e-4, seed=0"}

        ctx.step(f"rq_kmeans_batched/{b}", batched)
