"""The GPU check's "cupy" group: every op on CuPy inputs against the same op on torch inputs.

The CuPy inputs are zero-copy views (``cupy.from_dlpack``) of the torch inputs. Per op: the result
must hold CuPy arrays only and equal the torch result (floats within 1e-4 relative, integer labels
agreeing on ≥ 99 % of rows: the GPU update kernels sum with atomics, so iterated fits may differ in
the last bits), and the op must have run with the CuPy stream that was current (a non-default one) as
torch's current stream, where its kernels are launched (noted each time the op validates its inputs
or selects a backend). Then the time of one call with CuPy and with torch inputs (CuPy's
null stream, torch's default stream), so the dispatch overhead is on record.

Without CuPy on the machine the group records why and measures nothing. Under --cpu-smoke the
arrays are the host-side stand-in of tests/kernels/fake_cupy.py (CPU tensors wearing a cupy type):
the same logic, with the stream step recorded instead of entered.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def _cases(ctx):
    torch, ops = ctx.torch, ctx.ops
    g = torch.Generator(device=ctx.dev).manual_seed(5)
    n, d, k = (300, 16, 8) if ctx.smoke else (200_000, 128, 64)
    s, G, M = (5, 60, 7) if ctx.smoke else (132, 20_000, 132)

    def R(*shape):
        return torch.rand(*shape, generator=g, device=ctx.dev)

    X = torch.randn((n, d), generator=g, device=ctx.dev)
    C = X[:k].clone()
    A, I, B, mu = R(s, G), R(G, M), R(s + 3, G), R(s, M)
    Isp = I * (I > 0.8)                 # G chunks × M attributes, sparse-ish, for the spreading hop
    seeds = torch.stack([torch.arange(s, device=ctx.dev) * 3, torch.full((s,), -1, device=ctx.dev)], dim=1)
    deg = R(s, 2)
    doc = torch.arange(G, device=ctx.dev) // 3

    def spread(Iv, docv, seedsv, degv, muv):
        return ops.spread_hop(ops.SpreadIncidence(Iv, docv), seedsv, degv, muv)

    return {
        "kmeans_assign": (ops.kmeans_assign, (X, C), {}),
        "kmeans_fit": (ops.kmeans_fit, (X, k), {"n_iter": 3, "init": C}),
        "rq_kmeans": (ops.rq_kmeans, (X,), {"sizes": (k, 4), "n_iter": 3}),
        "fcm_memberships": (ops.fcm_memberships, (X, C), {"m": 2.0}),
        "tnorm": (ops.tnorm, (A, A.flip(0)), {}),
        "soft_meet": (ops.soft_meet, (A, A.flip(0)), {}),
        "luk_up": (ops.luk_up, (A, I), {}),
        "luk_down": (ops.luk_down, (mu, I), {}),
        "fuzzy_route": (ops.fuzzy_route, (mu, I), {}),
        "meet_cardinality": (ops.meet_cardinality, (A, B), {}),
        "spread_hop": (spread, (Isp, doc, seeds, deg, mu), {}),
    }


def _leaves(x):
    if isinstance(x, (list, tuple)):
        for v in x:
            yield from _leaves(v)
    else:
        yield x


def _compare(torch, got, want) -> dict:
    """got (CuPy inputs, leaves converted back to torch) against want (torch inputs)."""
    worst, agree = 0.0, 1.0
    for g, w in zip(_leaves(got), _leaves(want)):
        if isinstance(w, float):   # an inertia or objective: summed on the device, last bits may differ
            worst = max(worst, abs(g - w) / max(abs(w), 1e-30))
            continue
        if not isinstance(w, torch.Tensor):
            assert g == w, (g, w)
            continue
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.is_floating_point:
            scale = float(w.abs().max()) if w.numel() else 0.0
            worst = max(worst, float((g - w).abs().max()) / max(scale, 1e-30) if w.numel() else 0.0)
        else:
            agree = min(agree, float((g == w).double().mean()) if w.numel() else 1.0)
    return {"max_rel_diff": worst, "int_agreement": agree}


def group_cupy(ctx) -> None:
    torch = ctx.torch
    if ctx.smoke:
        sys.path.insert(0, str(REPO / "tests" / "kernels"))
        from fake_cupy import STREAM_PTR, install
        cp, state = install()
        ctx.out["cupy"] = "host stand-in (tests/kernels/fake_cupy.py): the dispatch logic, no GPU"
        stream = None

        def current():
            return STREAM_PTR if state.inside else 0
    else:
        try:
            import cupy as cp
        except ImportError as e:
            ctx.out["skipped"] = f"cupy is not installed ({e}); pip install 'contextrag[cupy]'"
            return ctx.flush()
        ctx.out["cupy"] = cp.__version__
        stream = cp.cuda.Stream(non_blocking=True)
        STREAM_PTR = stream.ptr

        def current():
            return torch.cuda.current_stream().cuda_stream

    seen: list[int] = []
    mods = [importlib.import_module(f"contextrag.ops.{m}") for m in ("kmeans", "fcm", "lattice", "semiring", "spread")]
    plain = {(m, name): getattr(m, name) for m in mods for name in ("as_tensor", "select") if hasattr(m, name)}

    def recording(on: bool) -> None:
        """Swap each op module's input validation and backend selection (which every op calls once its
        inputs are torch tensors) for versions that note torch's current stream, or swap back."""
        for (m, name), fn in plain.items():
            def rec(*a, _fn=fn, **kw):
                seen.append(current())
                return _fn(*a, **kw)
            setattr(m, name, rec if on else fn)

    def to_cp(x):
        return cp.from_dlpack(x) if isinstance(x, torch.Tensor) else x

    def back(x):
        if isinstance(x, (list, tuple)):
            return [back(v) for v in x]
        return torch.from_dlpack(x) if isinstance(x, cp.ndarray) else x

    for name, (fn, args, kw) in _cases(ctx).items():
        def run(fn=fn, args=args, kw=kw):
            cargs = [to_cp(a) for a in args]
            ckw = {k: to_cp(v) for k, v in kw.items()}
            want = fn(*args, **kw)
            ctx.sync()
            seen.clear()
            recording(True)
            try:
                if stream is not None:
                    with stream:
                        got = fn(*cargs, **ckw)
                    stream.synchronize()
                else:
                    got = fn(*cargs, **ckw)
            finally:
                recording(False)
            streams = sorted(set(seen))
            assert all(isinstance(v, cp.ndarray) for v in _leaves(got) if not isinstance(v, (int, float))), \
                [type(v).__name__ for v in _leaves(got)]
            assert streams == [STREAM_PTR], f"the op ran on streams {streams}, CuPy's is {STREAM_PTR}"
            r = _compare(torch, back(got), want)
            assert r["max_rel_diff"] <= 1e-4 and r["int_agreement"] >= 0.99, r
            r["on_cupy_stream"] = True
            r["s_torch_inputs"] = ctx.bench(lambda: fn(*args, **kw))
            r["s_cupy_inputs"] = ctx.bench(lambda: fn(*cargs, **ckw))
            r["cupy_over_torch"] = r["s_cupy_inputs"] / r["s_torch_inputs"]
            return r

        ctx.step(name, run)
    ctx.flush()
