"""What every group of the GPU check shares: the subprocess runner, atomic JSON writes, the device
specs and ``Ctx`` (shapes, device, timing and the part file one group writes as it goes)."""
from __future__ import annotations

import json
import os
import subprocess
import time
import traceback
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
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
        self.ops, self.IMPLS = ops, ops.op_tables()
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
