"""The "semiring" group: the four semiring ops per backend against torch's broadcasting form."""
from __future__ import annotations

from .baselines import torch_semiring
from .common import Ctx


def group_semiring(ctx: Ctx):
    torch = ctx.torch
    info = ctx.device_info()
    ctx.out["device"] = info
    ceiling = None
    if info.get("sms") and isinstance(info.get("clock_mhz"), float):
        ceiling = info["sms"] * info["clock_mhz"] * 1e6 * 64  # half the FP32 FMA issue rate
        ctx.out["ceiling_terms_per_s"] = ceiling
        ctx.out["ceiling_note"] = "SMs × max SM clock × 64: one add and one min per term at half the FMA rate"
    g = torch.Generator(device=ctx.dev).manual_seed(3)

    def R(*s):
        return torch.rand(*s, generator=g, device=ctx.dev)

    S = ctx.square
    s_, G, M = ctx.index_shape
    cases = {
        "square": {"luk_up": (R(S, S), R(S, S)), "luk_down": (R(S, S), R(S, S)),
                   "fuzzy_route": (R(S, S), R(S, S)), "meet_cardinality": (R(S, S), R(S, S))},
        "index": {"luk_up": (R(s_, G), R(G, M)), "luk_down": (R(s_, M), R(G, M)),
                  "fuzzy_route": (R(s_, M), R(G, M)), "meet_cardinality": (R(s_, G), R(M, G))},
    }
    for shape_name, ops_ in cases.items():
        for op, (A, B) in ops_.items():
            fn = getattr(ctx.ops, op)
            # as (M, K) × (K, N) for the baseline
            if op == "luk_up":
                a, bm = A, B
            elif op == "luk_down":
                a, bm = A, B.t()
            else:
                a, bm = A, B.t()
            Mr, K = a.shape
            N = bm.shape[1]
            terms = Mr * K * N

            def base(a=a, bm=bm, op=op, K=K, N=N):
                rows = max(1, min(a.shape[0], (1 << 27) // max(K * N, 1)))
                kind = "luk_up" if op in ("luk_up", "luk_down") else op
                s = ctx.bench(lambda: torch_semiring(kind, a[:rows], bm))
                return {"rows_measured": rows, "s_measured": s, "terms_per_s": rows * K * N / s}

            ctx.step(f"{shape_name}/{op}/torch", base)
            for b in ctx.backends:
                def run(b=b, fn=fn, A=A, B=B, op=op, a=a, bm=bm, terms=terms):
                    impl = ctx.IMPLS[op][b]
                    out = impl(A, B)
                    s = ctx.bench(lambda: impl(A, B))
                    r = {"M": Mr, "K": K, "N": N, "s": s, "terms_per_s": terms / s,
                         "s_via_api": ctx.bench(lambda: fn(A, B, backend=b))}  # + input validation passes
                    if ceiling:
                        r["frac_of_ceiling"] = r["terms_per_s"] / ceiling
                    tb = ctx.out.get(f"{shape_name}/{op}/torch", {}).get("terms_per_s")
                    if tb:
                        r["speedup_vs_torch_broadcast"] = r["terms_per_s"] / tb
                    rows = max(1, min(a.shape[0], (1 << 27) // max(a.shape[1] * bm.shape[1], 1)))
                    kind = "luk_up" if op in ("luk_up", "luk_down") else op
                    want = torch_semiring(kind, a[:rows], bm)
                    if op == "meet_cardinality":
                        r["max_abs_err_vs_torch"] = float((out[:rows] - want).abs().max())
                    else:
                        r["exact_vs_torch"] = bool(torch.equal(out[:rows], want))
                    return r

                ctx.step(f"{shape_name}/{op}/{b}", run)

    # meet cardinality of memberships quantised to 16 levels on int8 tensor cores (Triton)
    if "triton" in ctx.backends:
        for shape_name in ("square", "index"):
            A, B = cases[shape_name]["meet_cardinality"]
            L = 16

            def levels(A=A, B=B, shape_name=shape_name):
                from contextrag.ops.semiring import meet_cardinality_levels
                Aq, Bq = torch.round(A * L) / L, torch.round(B * L) / L
                out = meet_cardinality_levels(Aq, Bq, L)
                s = ctx.bench(lambda: meet_cardinality_levels(Aq, Bq, L))
                terms = A.shape[0] * A.shape[1] * B.shape[0]
                exact = ctx.IMPLS["meet_cardinality"]["triton"](Aq, Bq)
                r = {"levels": L, "s": s, "terms_per_s": terms / s,
                     "max_abs_diff_vs_minsum": float((out - exact).abs().max())}
                plain = ctx.out.get(f"{shape_name}/meet_cardinality/triton", {}).get("s")
                if plain:
                    r["speedup_vs_minsum_kernel"] = plain / s
                return r

            ctx.step(f"{shape_name}/meet_cardinality_int8_L16/triton", levels)
