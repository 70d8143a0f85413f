"""The "sanitizer" group: every CUDA kernel on ragged shapes under compute-sanitizer (memcheck first)."""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from .common import KERNEL_NAMES, NO_CUDA_ENV, REPO, _atomic_write, _run


def sanitize_payload(smoke: bool) -> int:
    """Every CUDA kernel (Triton under --cpu-smoke) on small ragged shapes, checked against torch;
    the sanitizer group runs this under compute-sanitizer. Prints a JSON line of the checks."""
    if smoke:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch
    import contextrag.ops as ops
    from contextrag.ops import _kmeans_gpu
    IMPLS = ops.op_tables()
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
    payload = [sys.executable, str(REPO / "bench" / "gpu_check.py"), str(part.parent), "--sanitize-payload"]
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
