"""The "kmeans" group: assignment and update per backend against one torch Lloyd iteration."""
from __future__ import annotations

from .baselines import torch_lloyd_iter
from .common import Ctx


def _kmeans_bounds(ctx, n, d, k, s_assign, s_update):
    info = ctx.out.get("device") or ctx.device_info()
    spec = info.get("spec") if isinstance(info, dict) else None
    out = {}
    if spec:
        t_mem = (n * d * 2 + k * d * 2) / spec["hbm_Bps"]
        t_tc = 2.0 * n * d * k / spec["bf16_flops"]
        out["assign_bound"] = "hbm" if t_mem >= t_tc else "tensor_core"
        out["assign_frac_of_bound"] = max(t_mem, t_tc) / s_assign
        out["update_frac_of_hbm"] = (n * d * 2) / spec["hbm_Bps"] / s_update
    return out


def group_kmeans(ctx: Ctx):
    torch = ctx.torch
    ctx.out["device"] = ctx.device_info()
    X = ctx.data()
    n, d = X.shape
    ctx.out["shape"] = {"n": n, "d": d, "dtype": str(X.dtype)}
    ctx.flush()
    g = torch.Generator(device=ctx.dev).manual_seed(1)
    perm = torch.randperm(n, generator=g, device=ctx.dev)
    Xf = X.float()  # the torch baseline's fp32 copy for its sums, made once (as a torch user would)
    ctx.out["same_work"] = ("one Lloyd iteration on all n rows on every side; the torch baseline's fp32 copy "
                            "of X is made once, outside the timed iteration")
    for k in ctx.ks:
        C0 = X[perm[:k]].float().clone()

        def torch_iter():
            s = ctx.bench(lambda: torch_lloyd_iter(X, C0, Xf))
            return {"s_per_iter": s}

        ctx.step(f"k{k}/torch", torch_iter)
        variants = list(ctx.backends)
        if "cuda" in variants and X.dtype in (torch.float16, torch.bfloat16):
            variants.append("cuda_simt")  # the CUDA-core kernel, for comparison with the WMMA one
        for b in variants:
            def run(b=b):
                from contextrag.ops import _kmeans_gpu
                if b == "cuda_simt":
                    def assign(X_, C_):
                        return _kmeans_gpu._cuda_assign(X_, C_, tensor_cores=False)
                    update = ctx.IMPLS["kmeans_update"]["cuda"]
                else:
                    assign = ctx.IMPLS["kmeans_assign"][b]
                    update = ctx.IMPLS["kmeans_update"][b]
                labels, _ = assign(X, C0)
                s_a = ctx.bench(lambda: assign(X, C0))
                s_u = ctx.bench(lambda: update(X, labels, k))
                ref_lab = (((C0 ** 2).sum(1)[None] - 2.0 * (X @ C0.to(X.dtype).t()).float()).argmin(1))
                r = {"s_assign": s_a, "s_update": s_u, "s_per_iter": s_a + s_u,
                     "labels_agree_with_torch": float((labels == ref_lab).float().mean())}
                tb = ctx.out.get(f"k{k}/torch", {}).get("s_per_iter")
                if tb:
                    r["speedup_vs_torch"] = tb / r["s_per_iter"]
                r.update(_kmeans_bounds(ctx, n, d, k, s_a, s_u))
                if b == "cuda_simt":
                    return r
                t, res = ctx.once(lambda: ctx.ops.kmeans_fit(X, k, n_iter=ctx.fit_iter, tol=0.0, init=C0, backend=b))
                r["kmeans_fit"] = {"s": t, "n_iter": res.n_iter, "s_per_iter_incl_final_assign": t / (res.n_iter + 1),
                                   "inertia": res.inertia}
                return r

            ctx.step(f"k{k}/{b}", run)
