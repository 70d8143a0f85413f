"""The "peaks" group: the device's copy bandwidth and bf16 matmul rate, for the fractions of bound."""
from __future__ import annotations

from .common import Ctx


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
