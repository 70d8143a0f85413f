"""The "scale" group: 10M-row assignment and update, and fuzzy_route at N = 5M (int64 offsets)."""
from __future__ import annotations

from .common import Ctx


def group_scale(ctx: Ctx):
    torch = ctx.torch
    n, d, k = (3000, 16, 8) if ctx.smoke else (10_000_000, 384, 96)
    Q, V, Cn = (3, 8, 5000) if ctx.smoke else (8, 430, 5_000_000)
    g = torch.Generator(device=ctx.dev).manual_seed(7)
    X = torch.empty((n, d), dtype=torch.bfloat16, device=ctx.dev)
    for i in range(0, n, 1 << 20):
        m = min(1 << 20, n - i)
        X[i:i + m] = torch.randn((m, d), generator=g, device=ctx.dev).to(torch.bfloat16)
    C = X[torch.randperm(n, generator=g, device=ctx.dev)[:k]].float()
    rows = torch.cat([torch.randint(0, n, (4096,), generator=g, device=ctx.dev),
                      torch.arange(max(0, n - 2048), n, device=ctx.dev)])
    Xs, Cd = X[rows].double(), C.to(torch.bfloat16).double()
    D = (Xs ** 2).sum(1, keepdim=True) + (Cd ** 2).sum(1)[None] - 2.0 * Xs @ Cd.t()
    scale = (Xs ** 2).sum(1) + (Cd ** 2).sum(1).max()
    ctx.out["shape"] = {"n": n, "d": d, "k": k, "dtype": "bfloat16", "sampled_rows": int(rows.numel())}
    for b in ctx.backends:
        labels_box = {}

        def assign(b=b):
            t, (labels, d2) = ctx.once(lambda: ctx.IMPLS["kmeans_assign"][b](X, C))
            labels_box["labels"] = labels
            lab = labels[rows]
            gap = D.gather(1, lab[:, None]).squeeze(1) - D.min(1).values
            derr = (d2[rows].double() - D.gather(1, lab[:, None]).squeeze(1).clamp_min(0)).abs()
            r = {"s": t, "labels_agree": float((lab == D.argmin(1)).double().mean()),
                 "max_rel_gap": float((gap / (1 + scale)).max()), "max_rel_d2_err": float((derr / (1 + scale)).max())}
            if r["max_rel_gap"] > 1e-3 or r["max_rel_d2_err"] > 1e-3 or int(labels.min()) < 0 or int(labels.max()) >= k:
                r["error"] = "assignment disagrees with torch on sampled rows"
            return r

        ctx.step(f"assign/{b}", assign)

        def update(b=b):
            labels = labels_box.get("labels")
            if labels is None:
                return {"error": "no labels (assign failed)"}
            t, (sums, counts) = ctx.once(lambda: ctx.IMPLS["kmeans_update"][b](X, labels, k))
            want_c = torch.bincount(labels, minlength=k)
            want = torch.zeros((k, d), dtype=torch.float64, device=ctx.dev)
            mag = torch.zeros((k, d), dtype=torch.float64, device=ctx.dev)
            for i in range(0, n, 1 << 20):
                xs = X[i:i + (1 << 20)].double()
                want.index_add_(0, labels[i:i + (1 << 20)], xs)
                mag.index_add_(0, labels[i:i + (1 << 20)], xs.abs())
            rel = float(((sums.double() - want).abs() / (mag + 1e-30)).max())
            r = {"s": t, "counts_exact": bool(torch.equal(counts.cpu(), want_c.cpu())), "max_rel_err": rel}
            if not r["counts_exact"] or rel > 1e-3:
                r["error"] = "update disagrees with torch"
            return r

        ctx.step(f"update/{b}", update)
        labels_box.clear()
    del X, Xs, D
    mu = torch.rand((Q, V), generator=g, device=ctx.dev)
    I = torch.rand((Cn, V), generator=g, device=ctx.dev)
    cols = torch.cat([torch.randint(0, Cn, (512,), generator=g, device=ctx.dev), torch.arange(Cn - 512, Cn, device=ctx.dev)])
    want = torch.clamp_min((mu[:, None, :] + I[cols][None]).amax(dim=2) - 1.0, 0.0)
    for b in ctx.backends:
        def route(b=b):
            t, out = ctx.once(lambda: ctx.IMPLS["fuzzy_route"][b](mu, I))
            return {"Q": Q, "V": V, "N": Cn, "s": t, "max_element_offset": (Cn - 1) * I.stride(0) + V - 1,
                    "offset_beyond_int32": (Cn - 1) * I.stride(0) + V - 1 >= 2 ** 31,
                    "n_tiles_axis0": -(-Cn // 64), "exact_on_sampled_columns": bool(torch.equal(out[:, cols], want))}

        def checked(route=route):
            r = route()
            if not r["exact_on_sampled_columns"]:
                r["error"] = "fuzzy_route at N = 5M differs from torch on sampled columns"
            return r

        ctx.step(f"fuzzy_route_5M/{b}", checked)
