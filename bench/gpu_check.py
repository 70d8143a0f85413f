#!/usr/bin/env python
"""One prepared GPU check: GPU tests, GPU benchmarks, then the slow checks, JSON written as it goes.

    python bench/gpu_check.py OUTDIR                 # on a CUDA machine (≤ 7 minutes on one H200)
    python bench/gpu_check.py OUTDIR --cpu-smoke     # same logic, tiny shapes, Triton interpreter, CPU

Each group (tests_cuda, tests_triton, peaks, kmeans, semiring, graph, rq_kmeans, spread, cupy, then the
slow ones: compile_sweep, scale, sanitizer) runs in its own subprocess with a timeout, so a crash (an illegal
address poisons a CUDA context), a hang or a failed assertion in one group is recorded and the next
group still runs. Every group writes its partial results after each
measurement; the parent merges them into OUTDIR/gpu_check.json after every group (atomically), so
whatever finished is on disk even if the machine is taken away mid-run.

Timing: triton.testing.do_bench (CUDA events, median) for kernels; one synchronised wall-clock run
for whole pipelines (kmeans_fit, rq_kmeans, graph construction). Under --cpu-smoke: perf_counter.

Reported per benchmark: seconds, the same work done by plain torch on the same device, the ratio,
and the fraction of the bound (HBM bandwidth or bf16 tensor-core rate for k-means; the FP32 add+min
ceiling, SMs × clock × 64 terms/s = half the FP32 FMA issue rate, for semiring products).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# in run order: tests and headline benchmarks first, the slow checks last
GROUPS = ("tests_cuda", "tests_triton", "peaks", "kmeans", "semiring", "graph", "rq_kmeans", "spread", "cupy",
          "embedding", "compile_sweep", "scale", "sanitizer")
ALIASES = {"tests": ("tests_cuda", "tests_triton"), "slow": ("compile_sweep", "scale", "sanitizer")}
# seconds each group may take on the GPU; --budget-s (default 420) clips the later ones and skips
# groups once it is spent, so the whole check (after a 1–2 minute build) stays within 9 minutes.
# Triton compiling is most of tests_triton, cached on disk for the later groups.
GROUP_TIMEOUT = {"tests_cuda": 50, "tests_triton": 100, "peaks": 15, "kmeans": 50, "semiring": 40, "graph": 40,
                 "rq_kmeans": 35, "spread": 40, "cupy": 40, "embedding": 45,
                 "compile_sweep": 45, "scale": 60, "sanitizer": 90}
# set (to the reason) by gpu_device.sh when the CUDA extension cannot run a kernel: the CUDA groups
# are skipped and every benchmark measures Triton only
NO_CUDA_ENV = "CONTEXTRAG_CHECK_NO_CUDA"
KERNEL_NAMES = ("assign_kernel", "assign_wmma_kernel", "update_kernel", "fcm_kernel", "semiring_kernel",
                "fold_splits", "probe_kernel")

# vendor figures (dense, no sparsity): HBM bytes/s, bf16 tensor-core FLOP/s
SPECS = {
    "H200": {"hbm_Bps": 4.8e12, "bf16_flops": 989e12, "sm_clock_mhz": 1980},
    "H100": {"hbm_Bps": 3.35e12, "bf16_flops": 989e12, "sm_clock_mhz": 1980},
    "A100": {"hbm_Bps": 2.0e12, "bf16_flops": 312e12, "sm_clock_mhz": 1410},
}


def _run(cmd, timeout, *, own_group=True, **kw):
    """(returncode or None on timeout, combined output). With ``own_group`` the command leads a new
    process group and a timeout kills the whole group, so no grandchild keeps the GPU busy
    afterwards; without it (a group's own helpers) it stays in the caller's group, which the parent
    kills as a whole."""
    import signal
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=os.setpgrp if own_group else None, **kw)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        try:
            if own_group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        return None, (out or "") + f"\nTIMEOUT after {timeout:.0f}s"


def _atomic_write(path: Path, obj) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str))
    os.replace(tmp, path)


# =============================================================================================
# child side: one group per process
# =============================================================================================

class Ctx:
    """Shapes, device and timing for one group; results flushed to the part file after each step."""

    def __init__(self, smoke: bool, part: Path):
        import torch
        self.torch = torch
        self.smoke = smoke
        self.part = part
        self.out: dict = {}
        self.dev = torch.device("cpu" if smoke else "cuda")
        if smoke:
            self.n, self.d, self.ks, self.sizes = 300, 16, (8, 4, 2), (8, 4, 2)
            self.square, self.index_shape = 32, (5, 150, 6)
            self.n_iter, self.batched = 2, (3, 100)
            self.fit_iter, self.graph_iter = 1, 2
        else:
            self.n, self.d, self.ks, self.sizes = 1_000_000, 1024, (96, 24, 12), (96, 24, 12)
            self.square, self.index_shape = 4096, (132, 1_000_000, 132)
            self.n_iter, self.batched = 10, (64, 15_625)
            self.fit_iter, self.graph_iter = 5, 20
        import contextrag.ops as ops
        from contextrag.ops._registry import IMPLS
        self.ops, self.IMPLS = ops, IMPLS
        av = ops.backends()
        self.backends = [b for b in ("triton", "cuda") if av[b]["available"]]
        if os.environ.get(NO_CUDA_ENV) and "cuda" in self.backends:
            self.backends.remove("cuda")
            av["cuda"] = {"available": False, "detail": f"skipped: {os.environ[NO_CUDA_ENV]}"}
        self.out["backends"] = {b: av[b] for b in ("triton", "cuda")}
        self.flush()

    def flush(self):
        _atomic_write(self.part, self.out)

    def sync(self):
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()

    def bench(self, fn) -> float:
        """Median seconds of fn()."""
        if self.dev.type == "cuda":
            try:
                import triton.testing
                return float(triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")) / 1e3
            except Exception:
                pass
            torch = self.torch
            fn()
            torch.cuda.synchronize()
            ts = []
            for _ in range(5):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b) / 1e3)
            return sorted(ts)[len(ts) // 2]
        fn()
        ts = []
        for _ in range(2):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return min(ts)

    def once(self, fn):
        """(seconds, result) of one synchronised run."""
        self.sync()
        t = time.perf_counter()
        r = fn()
        self.sync()
        return time.perf_counter() - t, r

    def step(self, name, fn):
        """Run one measurement; record its result or its error, then flush."""
        t = time.perf_counter()
        try:
            self.out[name] = fn()
        except Exception as e:  # keep going: later measurements may still work
            self.out[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        if isinstance(self.out[name], dict):
            self.out[name]["wall_s"] = round(time.perf_counter() - t, 3)
        self.flush()

    def device_info(self):
        torch = self.torch
        info = {"device": str(self.dev)}
        if self.dev.type == "cuda":
            p = torch.cuda.get_device_properties(0)
            info.update(name=p.name, sms=p.multi_processor_count, mem_GiB=round(p.total_memory / 2**30, 1))
            spec = next((v for k, v in SPECS.items() if k in p.name), None)
            info["spec"] = spec
            clock = _smi("clocks.max.sm")
            if not isinstance(clock, float) and spec:
                clock = float(spec["sm_clock_mhz"])  # vendor boost clock when nvidia-smi cannot say
            info["clock_mhz"] = clock
        return info

    def data(self, n=None, d=None, dtype=None, seed=0):
        torch = self.torch
        g = torch.Generator(device=self.dev).manual_seed(seed)
        n, d = n or self.n, d or self.d
        dtype = dtype or (torch.float32 if self.smoke else torch.bfloat16)
        X = torch.empty((n, d), device=self.dev, dtype=torch.float32)
        # a few hundred loose Gaussian blobs: enough structure for k-means to do real work
        centers = torch.randn((256, d), generator=g, device=self.dev) * 2.0
        step = 1 << 16
        for i in range(0, n, step):
            m = min(step, n - i)
            idx = torch.randint(0, 256, (m,), generator=g, device=self.dev)
            X[i:i + m] = centers[idx] + torch.randn((m, d), generator=g, device=self.dev)
        return X.to(dtype) if dtype != torch.float32 else X


def _smi(field: str):
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
        v = out.stdout.strip().splitlines()[0].strip()
        return float(v) if v.replace(".", "", 1).isdigit() else v
    except Exception:
        return None


# ---- plain torch baselines -------------------------------------------------------------------

def torch_lloyd_iter(X, C):
    """One Lloyd iteration in plain torch: matmul + argmin, index_add sums. Returns new centroids."""
    import torch
    k = C.shape[0]
    Cx = C.to(X.dtype)
    cn = (Cx.float() ** 2).sum(1)
    labels = (cn[None, :] - 2.0 * (X @ Cx.t()).float()).argmin(dim=1)
    sums = torch.zeros((k, X.shape[1]), dtype=torch.float32, device=X.device).index_add_(0, labels, X.float())
    counts = torch.bincount(labels, minlength=k).clamp_min(1)
    return sums / counts[:, None]


def torch_rq(X, sizes, n_iter):
    import torch
    R = X.float()
    codes = []
    for lvl, k in enumerate(sizes):
        g = torch.Generator(device=X.device).manual_seed(lvl)
        C = R[torch.randperm(R.shape[0], generator=g, device=X.device)[:k]].clone()
        for _ in range(n_iter):
            C = torch_lloyd_iter(R.to(X.dtype), C)
        cn = (C ** 2).sum(1)
        lab = (cn[None, :] - 2.0 * (R.to(X.dtype) @ C.to(X.dtype).t()).float()).argmin(dim=1)
        R = R - C[lab]
        codes.append(lab)
    return codes


def torch_semiring(op, A, B):
    """Broadcasting form (what a user writes in torch), A (M,K) and B (K,N)."""
    import torch
    if op == "luk_up":
        return torch.clamp_max(1.0 + (B[None, :, :] - A[:, :, None]).amin(dim=1), 1.0)
    if op == "fuzzy_route":
        return torch.clamp_min((A[:, :, None] + B[None, :, :]).amax(dim=1) - 1.0, 0.0)
    return torch.minimum(A[:, :, None], B[None, :, :]).sum(dim=1)


# ---- groups --------------------------------------------------------------------------------

def group_peaks(ctx: Ctx):
    torch = ctx.torch
    ctx.step("device", ctx.device_info)

    def bw():
        n = (1 << 20) if ctx.smoke else (1 << 28)
        x = torch.empty(n, dtype=torch.float32, device=ctx.dev).fill_(1.0)
        y = torch.empty_like(x)
        s = ctx.bench(lambda: y.copy_(x))
        return {"bytes": 8 * n, "s": s, "GBps": 8 * n / s / 1e9}

    def mm():
        n = 256 if ctx.smoke else 8192
        dt = torch.float32 if ctx.smoke else torch.bfloat16
        a = torch.randn(n, n, device=ctx.dev).to(dt)
        b = torch.randn(n, n, device=ctx.dev).to(dt)
        s = ctx.bench(lambda: a @ b)
        return {"n": n, "dtype": str(dt), "s": s, "TFLOPs": 2 * n ** 3 / s / 1e12}

    ctx.step("copy_bandwidth", bw)
    ctx.step("matmul", mm)


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
    for k in ctx.ks:
        C0 = X[perm[:k]].float().clone()

        def torch_iter():
            s = ctx.bench(lambda: torch_lloyd_iter(X, C0))
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


def group_rq(ctx: Ctx):
    torch = ctx.torch
    X = ctx.data()
    sizes, n_iter = ctx.sizes, ctx.n_iter

    def base():
        t, _ = ctx.once(lambda: torch_rq(X, sizes, n_iter))
        return {"s": t, "iterations": len(sizes) * n_iter, "s_per_iter": t / (len(sizes) * n_iter)}

    ctx.step("torch", base)
    for b in ctx.backends:
        def run(b=b):
            t, res = ctx.once(lambda: ctx.ops.rq_kmeans(X, sizes, n_iter=n_iter, tol=0.0, init="random", backend=b))
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
            t_seq, _ = ctx.once(lambda: [ctx.ops.rq_kmeans(p, sizes, n_iter=n_iter, backend=b) for p in probs[:few]])
            return {"problems": P, "rows_each": m, "s_batched": t, "s_sequential_est": t_seq * P / few,
                    "speedup": t_seq * P / few / t}

        ctx.step(f"rq_kmeans_batched/{b}", batched)


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


EMBED_TEXTS = {True: 48, False: 50_000}      # texts embedded: smoke, device
EMBED_BATCH = {True: 16, False: 1024}


def embedding_texts(n: int) -> list[str]:
    """n chunk-sized texts ("title\ntext") from HotpotQA passages ($CONTEXTRAG_DATA, the shared
    data beside the repository, or the test fixture), repeated with a numbered suffix past the
    corpus (a repeat must not be an exact duplicate that a cache could serve)."""
    sys.path.insert(0, str(REPO / "tests"))
    from shared_data import hotpot_file
    base = []
    for q in json.loads(hotpot_file().read_text()):
        for title, sents in q["context"]:
            base.append(f"{title}\n{''.join(sents)}")
    base = list(dict.fromkeys(base))
    return [base[i % len(base)] + ("" if i < len(base) else f" ({i // len(base)})") for i in range(n)]


def group_embedding(ctx: Ctx):
    """Stage 1b on the device: the packaged MiniLM through sentence-transformers in fp16 at a large
    batch (chunks/s), then stages 2–3 on the same vectors, for one end-to-end build rate
    (chunks / (embed + graph seconds)). CPU smoke: fp32 on the CPU, tiny batch, graph on "cpu"."""
    try:
        from contextrag.embed.embedder import Embedder
        emb = Embedder(backend="torch", device=str(ctx.dev))
        st = emb.load().model
    except ImportError as e:
        ctx.out["skipped"] = f"the embedder is not installed here ({e}); pip install 'contextrag[index]'"
        return
    torch = ctx.torch
    fp16 = ctx.dev.type == "cuda"
    if fp16:
        st.half()
    texts = embedding_texts(EMBED_TEXTS[ctx.smoke])
    bs = EMBED_BATCH[ctx.smoke]
    holder = {}

    def embed():
        st.encode(texts[:bs], batch_size=bs)            # warm-up: kernels, allocator
        ctx.sync()
        t0 = time.perf_counter()
        E = st.encode(texts, batch_size=bs, convert_to_tensor=True, normalize_embeddings=True)
        ctx.sync()
        s = time.perf_counter() - t0
        holder["X"] = torch.nn.functional.normalize(E.float(), dim=1).contiguous()
        return {"texts": len(texts), "batch": bs, "dtype": "float16" if fp16 else "float32",
                "seconds": s, "chunks_per_s": len(texts) / s, "dim": int(E.shape[1])}

    ctx.step("embed", embed)
    if "X" not in holder:
        return
    e = ctx.out["embed"]
    # the smoke run checks the wiring on the CPU kernels; the Triton interpreter is the graph group's
    for b in (["cpu"] if ctx.smoke else (ctx.backends or ["cpu"])):
        def run(b=b):
            r = graph_stages(ctx, holder["X"], b)
            total = e["seconds"] + r["total_s"]
            return {**r, "embed_s": e["seconds"], "end_to_end_s": total,
                    "end_to_end_chunks_per_s": len(texts) / total}

        ctx.step(f"build/{b}", run)


# ---- tests: CUDA and Triton in separate processes -------------------------------------------

_OUTCOME = re.compile(r"(\S+::\S+)\s+(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)|"
                      r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+::\S+)")
_STARTED = re.compile(r"^(\S+::\S+)\s*$")


def parse_pytest_verbose(text: str) -> dict:
    """Outcome counts, failed/errored test ids and the test still running when the output stops
    (a timeout or a crash), from ``pytest -v`` output (plain or pytest-xdist)."""
    counts: dict = {}
    failed, seen, started = [], set(), []
    for line in text.splitlines():
        m = _OUTCOME.search(line)
        if m:
            node, outcome = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
            if node in seen:
                continue
            seen.add(node)
            counts[outcome.lower()] = counts.get(outcome.lower(), 0) + 1
            if outcome in ("FAILED", "ERROR"):
                failed.append(f"{outcome} {node}")
            continue
        m = _STARTED.match(line.strip())
        if m:
            started.append(m.group(1))
    # -v prints "node" then the outcome on the same line; a node without one was running at the end
    unfinished = [n for n in started if n not in seen]
    return {"counts": counts, "failed": failed[:80], "unfinished": unfinished[-3:]}


def group_tests(which: str, smoke: bool, part: Path) -> None:
    import importlib.util
    out: dict = {}
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-rfE", "-o", "faulthandler_timeout=60"]
    if which == "tests_cuda":
        if os.environ.get(NO_CUDA_ENV):
            out["skipped"] = f"CUDA kernels cannot run: {os.environ[NO_CUDA_ENV]}"
            _atomic_write(part, out)
            return
        cmd += ["-k", "cuda", "tests/kernels/gpu", "tests/kernels/test_cuda_build.py"]
    else:
        cmd += ["-k", "not cuda", "tests/kernels/gpu"]
    if not smoke:
        # Triton compiling is most of the Triton tests' time: spread it over processes when xdist is
        # there, and let a hanging test fail alone when pytest-timeout is
        if which == "tests_triton" and importlib.util.find_spec("xdist") is not None:
            cmd += ["-n", "8"]
        if importlib.util.find_spec("pytest_timeout") is not None:
            cmd += ["--timeout", "60"]
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    t = time.perf_counter()
    rc, text = _run(cmd, GROUP_TIMEOUT[which] - 5, own_group=False, cwd=REPO, env=env)
    out["returncode"] = "timeout" if rc is None else rc
    out["seconds"] = round(time.perf_counter() - t, 2)
    lines = text.strip().splitlines()
    out["summary"] = lines[-1] if lines else ""
    out.update(parse_pytest_verbose(text))
    if rc not in (0, 5):  # 5: nothing collected/selected (no device, all deselected)
        out["error"] = (f"pytest {out['returncode']}: {len(out['failed'])} failed"
                        + (f", running at the end: {out['unfinished']}" if out["unfinished"] else ""))
    out["tail"] = "\n".join(lines[-40:])
    (part.parent / f"pytest_{which}.txt").write_text(text)
    _atomic_write(part, out)


# ---- compile sweep: every production Triton configuration ------------------------------------

def _sweep_cases(torch, dev):
    """(name, thunk) for every Triton configuration the ops pick in production, on tiny inputs."""
    from contextrag.kernels import fcm, kmeans, semiring
    g = torch.Generator(device=dev).manual_seed(0)

    def R(*shape, dtype=torch.float32):
        return torch.rand(*shape, generator=g, device=dev).to(dtype)

    cases = []
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
        for k in (12, 24, 96, 130):
            cases.append((f"assign/{str(dtype)[6:]}/k{k}", lambda dtype=dtype, k=k: kmeans.assign(R(300, 64, dtype=dtype), R(k, 64))))
        cases.append((f"assign_segmented/{str(dtype)[6:]}", lambda dtype=dtype: kmeans.assign_segmented(
            R(300, 64, dtype=dtype), [0, 100, 300], R(36, 64), [0, 12, 36])))
    for dtype in (torch.bfloat16, torch.float32):
        for k in (12, 24, 96, 200, 256):
            cases.append((f"update/{str(dtype)[6:]}/k{k}", lambda dtype=dtype, k=k: kmeans.update(
                R(500, 96, dtype=dtype), torch.randint(0, k, (500,), device=dev), k)))
        for c in (5, 24, 96, 132, 256, 512, 1024):
            cases.append((f"fcm/{str(dtype)[6:]}/c{c}", lambda dtype=dtype, c=c: fcm.memberships(
                R(40, 64, dtype=dtype), R(c, 64), 2.0)))
    for dtype in (torch.float32, torch.float64):
        for op in ("minplus", "maxplus", "minsum"):
            for (M, K, N) in ((132, 3000, 132), (200, 64, 200), (5, 100_000, 7)):  # 32/64 tiles, split
                cases.append((f"semiring/{str(dtype)[6:]}/{op}/{M}x{K}x{N}", lambda dtype=dtype, op=op, M=M, K=K, N=N:
                              semiring.semiring_mm(R(M, K, dtype=dtype), R(K, N, dtype=dtype), op)))
    cases.append(("meet_levels/L16", lambda: semiring.meet_cardinality_levels(R(70, 300), R(50, 300), 16)))
    return cases


def group_compile_sweep(ctx: Ctx):
    """Compile and launch every production configuration: registers, spills, shared memory per
    kernel; OutOfResources caught and named; no precision fallback allowed."""
    torch = ctx.torch
    if ctx.smoke:
        # no device: compile one kernel for sm_90 the way the device would (no interpreter here)
        from contextrag.kernels import resources
        k, sig, ce = resources.semiring_kernel_args("float32", op=1)
        rep = resources.compile_report(k, sig, ce, arch=90, num_warps=8)
        ttir = rep.pop("ttir")
        rep["offsets"] = sorted(resources.addptr_offset_types(ttir))
        ctx.out["offline/semiring/float32/maxplus/sm_90"] = rep
        ctx.out["cases"] = [name for name, _ in _sweep_cases(torch, torch.device("cpu"))]
        ctx.flush()
        return
    from triton.runtime.errors import OutOfResources
    from contextrag.kernels import fcm, kmeans
    kmeans.COMPILE_LOG = []
    for name, thunk in _sweep_cases(torch, ctx.dev):
        def run(thunk=thunk):
            start = len(kmeans.COMPILE_LOG)
            try:
                thunk()
                ctx.sync()
            except OutOfResources as e:
                return {"error": f"OutOfResources: {e}"}
            comp = kmeans.COMPILE_LOG[start:]
            r = {"launches": len(comp), "compiled": comp}
            spills = [c for c in comp if c.get("spills")]
            if spills:
                r["spilling"] = [(c["kernel"], c["spills"]) for c in spills]
            return r

        ctx.step(name, run)
    if kmeans.PRECISION_FALLBACKS:
        ctx.out["precision"] = {"error": f"tf32x3 fell back to ieee: {kmeans.PRECISION_FALLBACKS}"}
    else:
        ctx.out["precision"] = {"fallbacks": 0}
    if fcm.FALLBACKS:
        ctx.out["fcm_plans"] = {"error": f"FCM plans that did not fit despite the estimate: {fcm.FALLBACKS}"}
    ctx.flush()


# ---- scale probe: 10M rows, int64 offsets, N beyond 4M ---------------------------------------

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


# ---- compute-sanitizer over the CUDA kernels -------------------------------------------------

def sanitize_payload(smoke: bool) -> int:
    """Every CUDA kernel (Triton under --cpu-smoke) on small ragged shapes, checked against torch;
    the sanitizer group runs this under compute-sanitizer. Prints a JSON line of the checks."""
    if smoke:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import contextrag.ops as ops
    from contextrag.ops import _kmeans_gpu
    from contextrag.ops._registry import IMPLS
    backend, dev = ("triton", "cpu") if smoke else ("cuda", "cuda")
    g = torch.Generator().manual_seed(0)

    def R(*shape, dtype=torch.float32):
        return torch.rand(*shape, generator=g, dtype=torch.float64).to(dtype).to(dev)

    checks = {}
    # ragged shapes across the tiles (66/128 rows and columns, 8-step slabs, 64-row blocks) and a
    # split reduction; the interpreter gets the small ones only
    semi = ((7, 33, 65), (5, 300, 3)) if smoke else ((7, 33, 65), (130, 300, 131), (5, 2000, 3))
    assign_shapes = ((1, 8, 1), (37, 20, 7)) if smoke else ((1, 8, 1), (97, 20, 7), (130, 64, 130))
    upd_shapes = ((70, 9, 7),) if smoke else ((300, 40, 7), (257, 33, 400))  # shared-memory, global atomics
    fcm_shapes = ((1, 3, 1), (20, 9, 5)) if smoke else ((1, 3, 1), (70, 9, 5), (65, 33, 200))
    for s_, G, M in semi:
        A, I = R(s_, G), R(G, M)
        checks[f"luk_up/{s_}x{G}x{M}"] = torch.equal(
            ops.luk_up(A, I, backend=backend), torch.clamp_max(1.0 + (I[None] - A[:, :, None]).amin(dim=1), 1.0))
        mu, J = R(s_, G), R(M, G)
        checks[f"route/{s_}x{G}x{M}"] = torch.equal(
            ops.fuzzy_route(mu, J, backend=backend), torch.clamp_min((mu[:, None, :] + J[None]).amax(dim=2) - 1.0, 0.0))
        mc = ops.meet_cardinality(mu, J, backend=backend)
        checks[f"meet/{s_}x{G}x{M}"] = bool(((mc - torch.minimum(mu[:, None], J[None]).sum(2)).abs() < 1e-3 * G).all())
    A64, I64 = R(9, 70 if smoke else 700, dtype=torch.float64), R(70 if smoke else 700, 11, dtype=torch.float64)
    checks["luk_up/float64"] = torch.equal(ops.luk_up(A64, I64, backend=backend),
                                           torch.clamp_max(1.0 + (I64[None] - A64[:, :, None]).amin(dim=1), 1.0))
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        for n, d, k in assign_shapes:
            X, C = R(n, d, dtype=dtype) - 0.5, R(k, d) - 0.5
            Xd, Cd = X.double(), C.to(dtype).double()
            D = (Xd ** 2).sum(1, keepdim=True) + (Cd ** 2).sum(1)[None] - 2 * Xd @ Cd.t()
            paths = [None, False] if backend == "cuda" and dtype in (torch.bfloat16, torch.float16) else [None]
            for tc in paths:
                if tc is None:
                    labels, d2 = IMPLS["kmeans_assign"][backend](X, C)
                else:
                    labels, d2 = _kmeans_gpu._cuda_assign(X, C, tensor_cores=False)
                gap = D.gather(1, labels[:, None]).squeeze(1) - D.min(1).values
                checks[f"assign/{str(dtype)[6:]}/{n}x{d}x{k}/{'simt' if tc is False else 'default'}"] = bool(
                    (gap <= 1e-3 * (1 + D.abs().max())).all())
        T = R(100 if smoke else 300, 24, dtype=dtype)
        seg = (_kmeans_gpu.cuda_assign_segmented if backend == "cuda" else _kmeans_gpu._tk().assign_segmented)
        labels, _ = seg(T, [0, 64, 65, T.shape[0]], R(20, 24), [0, 7, 8, 20])
        checks[f"assign_segmented/{str(dtype)[6:]}"] = bool((labels[:64] < 7).all() and (labels[64:65] < 1).all()
                                                            and (labels[65:] < 12).all())
    for dtype in (torch.float32, torch.bfloat16):
        for n, d, k in upd_shapes:
            X = R(n, d, dtype=dtype)
            lab = torch.randint(0, k, (n,), generator=g).to(dev)
            sums, counts = IMPLS["kmeans_update"][backend](X, lab, k)
            want = torch.zeros((k, d), dtype=torch.float64, device=dev).index_add_(0, lab, X.double())
            checks[f"update/{str(dtype)[6:]}/{n}x{d}x{k}"] = bool(
                torch.equal(counts.cpu(), torch.bincount(lab, minlength=k).cpu()) and ((sums.double() - want).abs() < 1e-3).all())
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        for n, d, c in fcm_shapes:
            X, C = R(n, d, dtype=dtype), R(c, d, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
            U = IMPLS["fcm_memberships"][backend](X, C, 2.0, None)
            checks[f"fcm/{str(dtype)[6:]}/{n}x{d}x{c}"] = bool(((U.sum(1) - 1).abs() < 1e-3).all()
                                                               and float(U.min()) >= 0 and float(U.max()) <= 1)
    if dev == "cuda":
        torch.cuda.synchronize()
    bad = sorted(k for k, v in checks.items() if not v)
    print("SANITIZE_CHECKS " + json.dumps({"n": len(checks), "failed": bad}), flush=True)
    return 1 if bad else 0


_SAN_SUMMARY = re.compile(r"(ERROR SUMMARY: \d+ errors?|RACECHECK SUMMARY: .*|SYNCCHECK SUMMARY: .*)")


def parse_sanitizer(text: str) -> dict:
    """The sanitizer's summary lines, its error count and the payload's own checks."""
    summary = _SAN_SUMMARY.findall(text)
    errors = 0
    for line in summary:
        m = re.search(r"(\d+) errors?", line)
        if m:
            errors += int(m.group(1))
    checks = None
    m = re.search(r"SANITIZE_CHECKS (\{.*\})", text)
    if m:
        checks = json.loads(m.group(1))
    first = [ln for ln in text.splitlines() if ln.startswith("=========") and
             ("Invalid" in ln or "Race" in ln or "Barrier" in ln or "Error" in ln or "hazard" in ln.lower())][:20]
    return {"summary": summary, "errors": errors, "checks": checks, "first_reports": first}


def _sanitizer() -> str | None:
    import shutil
    for c in (shutil.which("compute-sanitizer"), os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin",
              "compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer"):
        if c and os.path.exists(c):
            return c
    return None


def group_sanitizer(smoke: bool, part: Path, budget_s: float) -> None:
    out: dict = {}
    payload = [sys.executable, str(Path(__file__).resolve()), str(part.parent), "--sanitize-payload"]
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if smoke:
        rc, text = _run(payload + ["--cpu-smoke"], budget_s, own_group=False, cwd=REPO, env=env)
        out["payload_only"] = {"returncode": "timeout" if rc is None else rc, **parse_sanitizer(text)}
        out["note"] = "no device: the payload ran under the Triton interpreter without a sanitizer"
        if rc != 0:
            out["payload_only"]["error"] = text[-2000:]
        _atomic_write(part, out)
        return
    if os.environ.get(NO_CUDA_ENV):
        out["skipped"] = f"CUDA kernels cannot run: {os.environ[NO_CUDA_ENV]}"
        _atomic_write(part, out)
        return
    tool = _sanitizer()
    if tool is None:
        out["error"] = "compute-sanitizer not found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)"
        _atomic_write(part, out)
        return
    out["tool"] = tool
    t0 = time.perf_counter()
    regex = "|".join(KERNEL_NAMES)
    for name in ("memcheck", "synccheck", "racecheck"):
        left = budget_s - (time.perf_counter() - t0) - 3
        if left < 10:
            out[name] = {"skipped": "time budget spent"}
            continue
        cmd = [tool, "--tool", name, "--kernel-regex", f"kns={regex}", "--print-limit", "20"] + payload
        t = time.perf_counter()
        rc, text = _run(cmd, left, own_group=False, cwd=REPO, env=env)
        rejected = None
        if rc is not None and not parse_sanitizer(text)["summary"]:
            # no summary at all: this sanitizer refused the kernel filter; check every kernel instead
            rejected = text.strip()[-300:]
            cmd = [tool, "--tool", name, "--print-limit", "20"] + payload
            rc, text = _run(cmd, max(5.0, left - (time.perf_counter() - t)), own_group=False, cwd=REPO, env=env)
        r = {"returncode": "timeout" if rc is None else rc, "seconds": round(time.perf_counter() - t, 1),
             **parse_sanitizer(text)}
        if rejected is not None:
            r["kernel_filter_rejected"] = rejected
        if rc is None or r["errors"] or rc != 0 or (r["checks"] or {}).get("failed"):
            r["error"] = (f"{name}: rc {r['returncode']}, {r['errors']} sanitizer errors, "
                          f"failed checks {(r['checks'] or {}).get('failed')}")
            r["tail"] = text[-3000:]
        out[name] = r
        _atomic_write(part, out)
    _atomic_write(part, out)


def _record_fallbacks(out: dict) -> None:
    """Precision and FCM-plan fallbacks this group's process made (they change what is measured)."""
    km, fc = sys.modules.get("contextrag.kernels.kmeans"), sys.modules.get("contextrag.kernels.fcm")
    out["fallbacks"] = {"precision": list(getattr(km, "PRECISION_FALLBACKS", [])),
                        "fcm_plans": list(getattr(fc, "FALLBACKS", []))}


def run_group(name: str, smoke: bool, part: Path, budget_s: float) -> None:
    if smoke and name != "compile_sweep":
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported anywhere in this process
    if name in ("tests_cuda", "tests_triton"):
        return group_tests(name, smoke, part)
    if name == "sanitizer":
        return group_sanitizer(smoke, part, budget_s)
    ctx = Ctx(smoke, part)
    if name in ("spread", "cupy"):   # bench/gpu_spread.py, bench/gpu_cupy.py
        sys.path.insert(0, str(REPO / "bench"))
        if name == "spread":
            from gpu_spread import group_spread as group
        else:
            from gpu_cupy import group_cupy as group
        group(ctx)
        _record_fallbacks(ctx.out)
        return ctx.flush()
    {"peaks": group_peaks, "kmeans": group_kmeans, "rq_kmeans": group_rq, "semiring": group_semiring,
     "graph": group_graph, "embedding": group_embedding, "compile_sweep": group_compile_sweep,
     "scale": group_scale}[name](ctx)
    _record_fallbacks(ctx.out)
    ctx.flush()


# =============================================================================================
# parent side
# =============================================================================================

def _versions() -> dict:
    v = {"python": platform.python_version(), "platform": platform.platform()}
    for mod in ("torch", "triton", "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:
            v[mod] = f"unavailable ({type(e).__name__})"
    try:
        import torch
        v["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            v["gpu"] = torch.cuda.get_device_name(0)
    except Exception:
        pass
    v["driver"] = _smi("driver_version")
    v["gpu_smi"] = _smi("name")
    try:
        v["git_commit"] = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                                         text=True, timeout=10).stdout.strip()
    except Exception:
        pass
    return v


def _summarise(groups: dict, meta: dict | None = None) -> dict:
    """The headline figures, lifted out of the groups, and every failure (the build's included)."""
    s: dict = {}
    for g in ("tests_cuda", "tests_triton"):
        r = groups.get(g, {}).get("results") or {}
        if r:
            s[g] = r.get("skipped") or {"counts": r.get("counts"), "failed": r.get("failed"),
                                        "unfinished": r.get("unfinished")}
    km = groups.get("kmeans", {}).get("results", {})
    for key, val in km.items():
        if isinstance(val, dict) and "s_per_iter" in val and "/" in key and not key.endswith("torch"):
            s[f"kmeans/{key}"] = {x: val.get(x) for x in ("s_per_iter", "speedup_vs_torch", "assign_frac_of_bound",
                                                          "assign_bound")}
    for key, val in groups.get("semiring", {}).get("results", {}).items():
        if isinstance(val, dict) and "terms_per_s" in val and not key.endswith("torch"):
            s[f"semiring/{key}"] = {x: val.get(x) for x in ("terms_per_s", "frac_of_ceiling",
                                                            "speedup_vs_torch_broadcast")}
    for key, val in groups.get("rq_kmeans", {}).get("results", {}).items():
        if isinstance(val, dict) and ("speedup_vs_torch" in val or "speedup" in val):
            s[f"rq/{key}"] = {x: val.get(x) for x in ("s", "speedup_vs_torch", "s_batched", "speedup")}
    for key, val in groups.get("cupy", {}).get("results", {}).items():
        if isinstance(val, dict) and "cupy_over_torch" in val:
            s[f"cupy/{key}"] = {x: val.get(x) for x in ("on_cupy_stream", "max_rel_diff", "cupy_over_torch")}
    for key, val in groups.get("graph", {}).get("results", {}).items():
        if isinstance(val, dict) and "total_s" in val:
            s[key] = {"total_s": val["total_s"], "meets_goal": val["meets_goal"]}
    san = groups.get("sanitizer", {}).get("results") or {}
    for tool in ("memcheck", "synccheck", "racecheck"):
        if isinstance(san.get(tool), dict):
            s[f"sanitizer/{tool}"] = san[tool].get("summary") or san[tool].get("skipped")
    errors, fallbacks = [], []
    build = (meta or {}).get("build") or {}
    if build.get("cuda_build") not in (None, "ok"):
        errors.append(f"build: the CUDA build failed, measured with {build.get('fallback_build')} (see build_ON.log)")
    if (meta or {}).get("cuda_skipped"):
        errors.append(f"build: CUDA groups skipped: {meta['cuda_skipped']}")
    for g, gv in groups.items():
        res = gv.get("results") or {}
        for key, val in res.items():
            if isinstance(val, dict) and "error" in val:
                errors.append(f"{g}/{key}: {str(val['error'])[:400]}")
        if "error" in res and not isinstance(res["error"], dict):
            errors.append(f"{g}: {str(res['error'])[:600]}")
        fb = res.get("fallbacks") or {}
        for kind, items in fb.items():
            fallbacks += [f"{g}/{kind}: {it}" for it in items]
        if gv.get("status") not in ("ok", None):
            errors.append(f"{g}: {gv.get('status')}")
    s["fallbacks"] = fallbacks
    s["errors"] = errors
    return s


def _expand(groups_arg: str) -> list:
    out = []
    for g in (x.strip() for x in groups_arg.split(",")):
        if not g:
            continue
        for h in ALIASES.get(g, (g,)):
            if h not in GROUPS:
                raise SystemExit(f"unknown group {h!r}; choose from {GROUPS} or {tuple(ALIASES)}")
            if h not in out:
                out.append(h)
    return out


def _report_lines(report: dict) -> list:
    """What a person reading the device tool's output tail needs: each group's status, then failures."""
    lines = ["[gpu_check] ---- summary ----"]
    for g, gv in report["groups"].items():
        lines.append(f"[gpu_check] {g:14s} {gv.get('status')} ({gv.get('seconds', 0)}s)")
    summ = report.get("summary", {})
    for g in ("tests_cuda", "tests_triton"):
        if g in summ:
            lines.append(f"[gpu_check] {g}: {json.dumps(summ[g])[:1500]}")
    for e in summ.get("errors", []):
        lines.append(f"[gpu_check] FAILED {e[:600]}")
    for f in summ.get("fallbacks", []):
        lines.append(f"[gpu_check] FALLBACK {f[:300]}")
    if not summ.get("errors"):
        lines.append("[gpu_check] no failures recorded")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path, help="folder for gpu_check.json (created)")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU under TRITON_INTERPRET=1")
    ap.add_argument("--groups", default=",".join(GROUPS),
                    help=f"comma-separated subset of {GROUPS}; 'tests' and 'slow' name {ALIASES}")
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting groups after this many seconds")
    ap.add_argument("--group", help=argparse.SUPPRESS)
    ap.add_argument("--part", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--sanitize-payload", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.sanitize_payload:
        return sanitize_payload(args.cpu_smoke)
    if args.group:  # child
        run_group(args.group, args.cpu_smoke, args.part, args.budget_s)
        return 0

    out_dir = args.outdir
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "gpu_check.json"
    t_start = time.perf_counter()
    meta = {"date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "mode": "cpu-smoke" if args.cpu_smoke else "gpu", "versions": _versions(), "budget_s": args.budget_s}
    build = out_dir / "build_status.json"  # written by gpu_device.sh: CUDA build, fallback, kernel probe
    if build.exists():
        try:
            meta["build"] = json.loads(build.read_text())
        except Exception as e:
            meta["build"] = {"error": repr(e)}
    if os.environ.get(NO_CUDA_ENV):
        meta["cuda_skipped"] = os.environ[NO_CUDA_ENV]
    report = {"meta": meta, "groups": {}}
    _atomic_write(path, report)
    groups = _expand(args.groups)
    for g in groups:
        left = args.budget_s - (time.perf_counter() - t_start)
        entry: dict = {}
        report["groups"][g] = entry
        timeout = GROUP_TIMEOUT[g] * (4 if args.cpu_smoke else 1)
        if left < 10:
            entry["status"] = "skipped: time budget spent"
            report["summary"] = _summarise(report["groups"], report["meta"])
            report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
            _atomic_write(path, report)
            print(f"[gpu_check] {g}: {entry['status']}", flush=True)
            continue
        timeout = min(timeout, left)
        part = out_dir / f"part_{g}.json"
        part.unlink(missing_ok=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), str(out_dir), "--group", g, "--part", str(part),
               "--budget-s", str(max(5.0, timeout - 5))]
        if args.cpu_smoke:
            cmd.append("--cpu-smoke")
        env = dict(os.environ)
        env.pop("CONTEXTRAG_BACKEND", None)
        t = time.perf_counter()
        rc, text = _run(cmd, timeout, cwd=REPO, env=env)
        if rc is None:
            entry["status"] = f"timeout after {timeout:.0f}s"
            entry["output_tail"] = text[-4000:]
        else:
            entry["status"] = "ok" if rc == 0 else f"exit {rc}"
            if rc != 0:
                entry["output_tail"] = text[-4000:]
        entry["seconds"] = round(time.perf_counter() - t, 2)
        if part.exists():
            try:
                entry["results"] = json.loads(part.read_text())
            except Exception as e:
                entry["results_error"] = repr(e)
            part.unlink(missing_ok=True)
        report["summary"] = _summarise(report["groups"], report["meta"])
        report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
        _atomic_write(path, report)
        print(f"[gpu_check] {g}: {entry['status']} in {entry['seconds']}s", flush=True)
    report["summary"] = _summarise(report["groups"], report["meta"])
    report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
    _atomic_write(path, report)
    print("\n".join(_report_lines(report)), flush=True)
    print(f"[gpu_check] wrote {path} ({report['meta']['elapsed_s']}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
