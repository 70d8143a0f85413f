"""Compile a Triton kernel for an NVIDIA architecture without a GPU and report what it uses.

``triton.compile`` runs the whole pipeline (TTIR → TTGIR → LLVM → PTX → cubin with the ptxas that
ships with Triton) for a ``GPUTarget``; no device is touched. The report gives the shared memory the
launch will request (``metadata.shared``), registers, spill stores/loads and stack frame (``ptxas
-v`` on the generated PTX) and the TTIR, so launch limits (shared-memory opt-in, int64
address arithmetic) can be checked on any machine. Must run in a process without
``TRITON_INTERPRET=1`` (the interpreter replaces the kernels).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile

import triton
import triton.language as tl

# Shared memory one block may opt in to (bytes), per compute capability: A100 (8.0) 163 KB,
# H100/H200 (9.0) 227 KB.
SMEM_OPTIN = {80: 166912, 86: 101376, 89: 101376, 90: 232448}

_PTR = {"float32": "*fp32", "float64": "*fp64", "float16": "*fp16", "bfloat16": "*bf16"}
_ACC = {"float32": "float32", "float64": "float64", "float16": "float32", "bfloat16": "float32"}


def signature(kernel, pointers: dict, floats: tuple = (), constexprs: dict | None = None,
              ones: tuple = (), div16: tuple = ()) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) for ``kernel`` as a launch on contiguous, 16-byte aligned
    torch tensors specialises it: named pointer types (each 16-byte aligned), fp32 scalars in
    ``floats``, the unit strides in ``ones`` as the constant 1, the integers in ``div16`` marked
    divisible by 16, every other runtime argument i32 (values below 2³¹)."""
    constexprs = dict(constexprs or {})
    constexprs.update({n: 1 for n in ones})
    sig, attrs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in pointers:
            sig[name] = pointers[name]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in floats:
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
            if name in div16:
                attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, constexprs, attrs


def _ptxas(arch: int) -> str | None:
    """The ptxas Triton itself assembles with for ``arch`` (its PTX version may be newer than a
    system toolkit's)."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        return get_ptxas(arch).path
    except Exception:
        return shutil.which("ptxas")


def _resource_usage(ptx: str, arch: int) -> dict:
    """Registers, spill stores/loads and stack frame from ``ptxas -v`` on the kernel's PTX."""
    tool = _ptxas(arch)
    if tool is None:
        return {}
    sm = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        proc = subprocess.run([tool, f"-arch={sm}", "-v", path, "-o", os.path.join(tmp, "k.cubin")],
                              capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        return {"ptxas_error": out.strip()[-300:]}
    usage = {}
    for pat, name in ((r"Used (\d+) registers", "registers"), (r"(\d+) bytes spill stores", "spill_store_bytes"),
                      (r"(\d+) bytes spill loads", "spill_load_bytes"), (r"(\d+) bytes stack frame", "stack_bytes")):
        m = re.search(pat, out)
        if m:
            usage[name] = int(m.group(1))
    return usage


def compile_report(kernel, sig: dict, constexprs: dict, attrs: dict | None = None, *, arch: int = 90,
                   num_warps: int = 4, num_stages: int = 3) -> dict:
    """Compile ``kernel`` for sm_<arch>; returns shared_bytes, registers, spill bytes, the opt-in
    limit of that architecture and the TTIR text."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = getattr(kernel, "fn", kernel)
    src = ASTSource(kernel, sig, constexprs, attrs)
    k = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                       options={"num_warps": num_warps, "num_stages": num_stages})
    rep = {"kernel": getattr(fn, "__name__", str(fn)), "arch": arch, "num_warps": num_warps,
           "num_stages": num_stages, "shared_bytes": int(k.metadata.shared),
           "smem_optin_bytes": SMEM_OPTIN.get(arch)}
    rep.update(_resource_usage(k.asm["ptx"], arch))
    rep["ttir"] = k.asm["ttir"]
    return rep


def addptr_offset_types(ttir: str) -> set[str]:
    """Element types of the offsets of every ``tt.addptr`` in a TTIR listing ({'i64'} when all
    address arithmetic is 64-bit)."""
    types = set()
    for line in ttir.splitlines():
        if "tt.addptr" not in line or ":" not in line:
            continue
        off_ty = line.rsplit(":", 1)[1].split(",")[-1].strip()
        m = re.search(r"(i\d+)>?\s*(loc|$)", off_ty)
        if m:
            types.add(m.group(1))
    return types


# ---- the production kernels' signatures -----------------------------------------------------

def semiring_kernel_args(dtype: str = "float32", op: int = 2, epilogue: bool = True, blocks=(64, 64, 4)):
    from .semiring import _semiring_kernel
    BM, BN, BK = blocks
    ptrs = {n: _PTR[dtype] for n in ("a_ptr", "b_ptr", "out_ptr")}
    acc = tl.float64 if dtype == "float64" else tl.float32
    return (_semiring_kernel,) + signature(_semiring_kernel, ptrs, constexprs=dict(
        OP=op, EPILOGUE=epilogue, ACC=acc, BM=BM, BN=BN, BK=BK))


def fcm_kernel_args(dtype: str, BN: int, CP: int, BD: int, prec: str = "tf32x3"):
    from .fcm import _fcm_kernel, _mode
    import torch
    mode = _mode(getattr(torch, dtype))
    acc = _PTR[_ACC[dtype]]
    ptrs = {"x_ptr": _PTR[dtype], "c_ptr": _PTR[dtype], "cn_ptr": acc, "u_ptr": acc}
    return (_fcm_kernel,) + signature(_fcm_kernel, ptrs, floats=("p", "snap"), constexprs=dict(
        UPCAST=False, MODE=mode, PREC=prec, P_IS_ONE=False, BN=BN, CP=CP, BD=BD))
