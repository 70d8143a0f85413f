#!/usr/bin/env python
"""One prepared GPU check: GPU tests, then the GPU benchmarks, JSON written as it goes.

    python bench/gpu_check.py OUTDIR                 # on a CUDA machine (< 6 minutes on one H200)
    python bench/gpu_check.py OUTDIR --cpu-smoke     # same logic, tiny shapes, Triton interpreter, CPU

Each group (tests, peaks, kmeans, rq_kmeans, semiring, graph) runs in its own subprocess with a
timeout, so a crash (an illegal address poisons a CUDA context), a hang or a failed assertion in one
group is recorded and the next group still runs. Every group writes its partial results after each
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
import subprocess
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GROUPS = ("tests", "peaks", "kmeans", "semiring", "graph", "rq_kmeans", "spread")  # in run order, headline first
# seconds each group may take on the GPU; --budget-s (default 345) clips the later ones so the whole
# check stays under 6 minutes (mostly Triton compiling in the tests group, cached on disk afterwards)
GROUP_TIMEOUT = {"tests": 160, "peaks": 25, "kmeans": 60, "semiring": 50, "graph": 50, "rq_kmeans": 50,
                 "spread": 60}   # spread: bench/gpu_spread.py

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
                            start_new_session=own_group, **kw)
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
                from contextrag.ops import _gpu
                if b == "cuda_simt":
                    def assign(X_, C_):
                        return _gpu._cuda_assign(X_, C_, tensor_cores=False)
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
                from contextrag.ops import _gpu
                Aq, Bq = torch.round(A * L) / L, torch.round(B * L) / L
                out = _gpu.meet_cardinality_levels(Aq, Bq, L)
                s = ctx.bench(lambda: _gpu.meet_cardinality_levels(Aq, Bq, L))
                terms = A.shape[0] * A.shape[1] * B.shape[0]
                exact = ctx.IMPLS["meet_cardinality"]["triton"](Aq, Bq)
                r = {"levels": L, "s": s, "terms_per_s": terms / s,
                     "max_abs_diff_vs_minsum": float((out - exact).abs().max())}
                plain = ctx.out.get(f"{shape_name}/meet_cardinality/triton", {}).get("s")
                if plain:
                    r["speedup_vs_minsum_kernel"] = plain / s
                return r

            ctx.step(f"{shape_name}/meet_cardinality_int8_L16/triton", levels)


def group_graph(ctx: Ctx):
    """Stages 2–3 of §4.1 on the device for n precomputed embeddings: RQ-KMeans, FCM memberships of
    each level's residuals (the fuzzy context I), attribute-concept closures, meet cardinality of
    the closed extents, and closures of the top soft joins."""
    torch = ctx.torch
    X = ctx.data()
    ops = ctx.ops
    sizes = ctx.sizes
    for b in ctx.backends:
        def run(b=b):
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
            total = time.perf_counter() - t0
            return {"n": X.shape[0], "d": X.shape[1], "sizes": list(rq.sizes), "attributes": int(I.shape[1]),
                    "seconds": times, "total_s": total, "goal_s": 10.0, "meets_goal": total < 10.0}

        ctx.step(f"graph/{b}", run)


def group_tests(ctx_smoke: bool, part: Path):
    out: dict = {}
    import importlib.util
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
           "tests/kernels/gpu", "tests/kernels/test_cuda_build.py"]
    if not ctx_smoke:
        # Triton compiling is most of this group's time: spread it over processes when xdist is
        # there, and let a hanging test fail alone when pytest-timeout is
        if importlib.util.find_spec("xdist") is not None:
            cmd += ["-n", "4"]
        if importlib.util.find_spec("pytest_timeout") is not None:
            cmd += ["--timeout", "90"]
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    t = time.perf_counter()
    rc, text = _run(cmd, GROUP_TIMEOUT["tests"] - 10, own_group=False, cwd=REPO, env=env)
    out["returncode"] = "timeout" if rc is None else rc
    out["seconds"] = round(time.perf_counter() - t, 2)
    lines = text.strip().splitlines()
    out["summary"] = lines[-1] if lines else ""
    out["failed"] = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))][:50]
    out["tail"] = "\n".join(lines[-60:])
    (part.parent / "pytest_gpu.txt").write_text(text)
    _atomic_write(part, out)


def run_group(name: str, smoke: bool, part: Path) -> None:
    if smoke:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported anywhere in this process
    if name == "tests":
        return group_tests(smoke, part)
    ctx = Ctx(smoke, part)
    if name == "spread":
        sys.path.insert(0, str(REPO / "bench"))
        from gpu_spread import group_spread
        return group_spread(ctx) or ctx.flush()
    {"peaks": group_peaks, "kmeans": group_kmeans, "rq_kmeans": group_rq,
     "semiring": group_semiring, "graph": group_graph}[name](ctx)
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


def _summarise(groups: dict) -> dict:
    """The headline figures the issue asks for, lifted out of the groups."""
    s: dict = {}
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
    for key, val in groups.get("graph", {}).get("results", {}).items():
        if isinstance(val, dict) and "total_s" in val:
            s[key] = {"total_s": val["total_s"], "meets_goal": val["meets_goal"]}
    errors = []
    for g, gv in groups.items():
        for key, val in (gv.get("results") or {}).items():
            if isinstance(val, dict) and "error" in val:
                errors.append(f"{g}/{key}: {val['error']}")
        if gv.get("status") not in ("ok", None):
            errors.append(f"{g}: {gv.get('status')}")
    s["errors"] = errors
    return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path, help="folder for gpu_check.json (created)")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU under TRITON_INTERPRET=1")
    ap.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated subset of {GROUPS}")
    ap.add_argument("--budget-s", type=float, default=345.0, help="stop starting groups after this many seconds")
    ap.add_argument("--group", help=argparse.SUPPRESS)
    ap.add_argument("--part", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.group:  # child
        run_group(args.group, args.cpu_smoke, args.part)
        return 0

    out_dir = args.outdir
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "gpu_check.json"
    t_start = time.perf_counter()
    report = {"meta": {"date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                       "mode": "cpu-smoke" if args.cpu_smoke else "gpu", "versions": _versions(),
                       "budget_s": args.budget_s},
              "groups": {}}
    _atomic_write(path, report)
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    for g in groups:
        if g not in GROUPS:
            raise SystemExit(f"unknown group {g!r}; choose from {GROUPS}")
    for g in groups:
        left = args.budget_s - (time.perf_counter() - t_start)
        entry: dict = {}
        report["groups"][g] = entry
        timeout = GROUP_TIMEOUT[g] * (4 if args.cpu_smoke else 1)
        if left < 10:
            entry["status"] = "skipped: time budget spent"
            report["summary"] = _summarise(report["groups"])
            report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
            _atomic_write(path, report)
            print(f"[gpu_check] {g}: {entry['status']}", flush=True)
            continue
        timeout = min(timeout, left)
        part = out_dir / f"part_{g}.json"
        part.unlink(missing_ok=True)
        cmd = [sys.executable, str(Path(__file__).resolve()), str(out_dir), "--group", g, "--part", str(part)]
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
        report["summary"] = _summarise(report["groups"])
        report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
        _atomic_write(path, report)
        print(f"[gpu_check] {g}: {entry['status']} in {entry['seconds']}s", flush=True)
    report["summary"] = _summarise(report["groups"])
    report["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 2)
    _atomic_write(path, report)
    print(f"[gpu_check] wrote {path} ({report['meta']['elapsed_s']}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
