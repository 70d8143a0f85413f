"""The "compile_sweep" group: every production Triton configuration compiled and launched on the
device (registers, spills, shared memory as the driver reports them). Without a device it runs the
offline sweep (contextrag.kernels.sweep) for sm_90."""
from __future__ import annotations

from .common import Ctx


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
        # no device: compile for sm_90 the way the device would (no interpreter here): the int64
        # offsets of one semiring kernel, and the offline sweep of the semiring and int8 meet kernels
        from contextrag.kernels import resources, sweep
        k, sig, ce, attrs = resources.semiring_kernel_args("float32", op=1)
        rep = resources.compile_report(k, sig, ce, attrs, arch=90, num_warps=8)
        ttir = rep.pop("ttir")
        rep["offsets"] = sorted(resources.addptr_offset_types(ttir))
        ctx.out["offline/semiring/float32/maxplus/sm_90"] = rep
        rows = sweep.sweep(90, only="semiring/float32/minplus/64x64") + sweep.sweep(90, only="meet_levels")
        ctx.out["offline_sweep"] = {"triton": sweep.triton.__version__, "rows": rows}
        bad = sweep.problems(rows, 90)
        if bad:
            ctx.out["offline_sweep"]["error"] = "; ".join(bad)
        ctx.out["cases"] = [name for name, _ in _sweep_cases(torch, torch.device("cpu"))]
        ctx.flush()
        return
    from triton.runtime.errors import OutOfResources
    from contextrag.kernels import _utils, fcm
    _utils.COMPILE_LOG = []
    for name, thunk in _sweep_cases(torch, ctx.dev):
        def run(thunk=thunk):
            start = len(_utils.COMPILE_LOG)
            try:
                thunk()
                ctx.sync()
            except OutOfResources as e:
                return {"error": f"OutOfResources: {e}"}
            comp = _utils.COMPILE_LOG[start:]
            r = {"launches": len(comp), "compiled": comp}
            spills = [c for c in comp if c.get("spills")]
            if spills:
                r["spilling"] = [(c["kernel"], c["spills"]) for c in spills]
            return r

        ctx.step(name, run)
    if _utils.PRECISION_FALLBACKS:
        ctx.out["precision"] = {"error": f"tf32x3 fell back to ieee: {_utils.PRECISION_FALLBACKS}"}
    else:
        ctx.out["precision"] = {"fallbacks": 0}
    if fcm.FALLBACKS:
        ctx.out["fcm_plans"] = {"error": f"FCM plans that did not fit despite the estimate: {fcm.FALLBACKS}"}
    ctx.flush()
