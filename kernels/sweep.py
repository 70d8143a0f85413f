"""Compile every Triton kernel configuration the ops launch, for an NVIDIA architecture, without a GPU.

    python -m contextrag.kernels.sweep [--arch 90] [--json OUT] [--check] [--only PREFIX]

Each configuration is the one a launch wrapper picks in production (``semiring._blocks``,
``kmeans._assign_blocks``, the update's tile rule, ``fcm.plans`` for the architecture's shared
memory, the spreading kernel), compiled through ``resources.compile_report`` (TTIR → TTGIR → PTX →
ptxas; no device touched). The report gives shared memory, registers and spills per configuration.
Spills are reported, not failed (a performance matter for the device run to weigh).
``--check`` fails (exit 1) when a configuration does not compile, needs more shared memory
than the architecture lets one block opt in to, or when its shared memory differs from the figure
recorded for this Triton version in ``EXPECTED_SHARED`` (docs/GPU.md has the tables). Must run
without ``TRITON_INTERPRET=1``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import triton
import triton.language as tl

from . import resources

_F32, _F64, _BF16, _F16 = "*fp32", "*fp64", "*bf16", "*fp16"
_I64, _I32 = "*i64", "*i32"


def _tile_name(blocks) -> str:
    return "x".join(str(b) for b in blocks)


def configurations(arch: int = 90) -> list[dict]:
    """Every production launch configuration: name, kernel, signature, constexprs, warps, stages."""
    from . import fcm, kmeans, semiring, spread

    out = []

    def add(name, kernel, ptrs, constexprs, warps, stages=3, floats=(), ones=(), div16=()):
        sig, ce, attrs = resources.signature(kernel, ptrs, floats, constexprs, ones, div16)
        out.append({"name": name, "kernel": kernel, "sig": sig, "constexprs": ce, "attrs": attrs,
                    "num_warps": warps, "num_stages": stages})

    # semiring products: every fp32 tile _blocks picks (32/64 per side), fp64, and one split (no epilogue)
    ops = {"minplus": semiring.MINPLUS, "maxplus": semiring.MAXPLUS, "minsum": semiring.MINSUM}
    import torch
    for dtype, acc, ptr, shapes in (("float32", tl.float32, _F32, ((64, 64), (32, 64), (64, 32), (32, 32))),
                                    ("float64", tl.float64, _F64, ((64, 64),))):
        for M, N in shapes:
            BM, BN, BK, warps = semiring._blocks(getattr(torch, dtype), False, M, N)
            for op, code in ops.items():
                add(f"semiring/{dtype}/{op}/{_tile_name((BM, BN, BK))}", semiring._semiring_kernel,
                    {"a_ptr": ptr, "b_ptr": ptr, "out_ptr": ptr},
                    dict(OP=code, EPILOGUE=True, ACC=acc, BM=BM, BN=BN, BK=BK), warps)
    add("semiring/float32/minplus/64x64x4/split", semiring._semiring_kernel,
        {"a_ptr": _F32, "b_ptr": _F32, "out_ptr": _F32},
        dict(OP=semiring.MINPLUS, EPILOGUE=False, ACC=tl.float32, BM=64, BN=64, BK=4), 8)
    BM, BN, BK = semiring.LEVELS_BLOCKS
    add(f"meet_levels/int8/{_tile_name((BM, BN, BK))}", semiring._meet_levels_kernel,
        {"a_ptr": _F32, "b_ptr": _F32, "ws_ptr": _I32}, dict(UPCAST=False, BM=BM, BN=BN, BK=BK), 4,
        ones=("s_ak", "s_bk"), div16=("s_am", "s_bn"))

    # k-means assignment: each dtype's tiles for k = 12 … 128+ (the centroid tile follows k)
    assign_ptrs = {"c_ptr": None, "cn_ptr": None, "lab_ptr": _I64, "d2_ptr": None, "blk_prob_ptr": _I32,
                   "blk_row0_ptr": _I32, "prob_row1_ptr": _I32, "prob_coff_ptr": _I32, "prob_k_ptr": _I32}
    for dtype, ptr, accp, ks in (("bfloat16", _BF16, _F32, (12, 24, 64, 128)), ("float16", _F16, _F32, (128,)),
                                 ("float32", _F32, _F32, (12, 24, 64)), ("float64", _F64, _F64, (12,))):
        mode = kmeans._mode(getattr(torch, dtype))
        for k in ks:
            BNr, BKc, BD, warps = kmeans._assign_blocks(mode, False, k)
            ptrs = dict(assign_ptrs, x_ptr=ptr, c_ptr=ptr, cn_ptr=accp, d2_ptr=accp)
            for seg in ((False, True) if (dtype == "bfloat16" and k == 12) else (False,)):
                add(f"assign/{dtype}/{_tile_name((BNr, BKc, BD))}" + ("/segmented" if seg else ""),
                    kmeans._assign_kernel, ptrs,
                    dict(SEGMENTED=seg, UPCAST=False, MODE=mode, PREC="tf32x3", BN=BNr, BK=BKc, BD=BD), warps,
                    ones=("s_xd", "s_cd"), div16=("s_xn", "s_cn"))

    # k-means update: the one-hot GEMM for each padded k (16 … MAX_UPDATE_K), bf16 and fp32 rows
    for dtype, ptr in (("bfloat16", _BF16), ("float32", _F32)):
        KP = 16
        while KP <= kmeans.MAX_UPDATE_K:
            BNr, BD, warps = kmeans.update_blocks(KP, False)
            add(f"update/{dtype}/KP{KP}", kmeans._update_kernel,
                {"x_ptr": ptr, "lab_ptr": _I64, "sums_ptr": _F32, "counts_ptr": _I32},
                dict(UPCAST=False, FP32=dtype == "float32", PREC="tf32x3", KP=KP, BN=BNr, BD=BD), warps,
                ones=("s_xd",), div16=("s_xn",))
            KP *= 2

    # fuzzy c-means: the first plan for each padded c that fits this architecture's shared memory
    limit = resources.SMEM_OPTIN.get(arch, resources.SMEM_OPTIN[90])
    for dtype, ptr, accp, cs in (("bfloat16", _BF16, _F32, (16, 32, 64, 128, 256, 512, 1024)),
                                 ("float32", _F32, _F32, (16, 128, 512, 1024)), ("float64", _F64, _F64, (16, 128))):
        mode = fcm._mode(getattr(torch, dtype))
        for c in cs:
            ps = fcm.plans(c, mode, limit)
            if not ps:
                continue
            BNr, CP, BD, warps, stages = ps[0]
            add(f"fcm/{dtype}/c{c}", fcm._fcm_kernel,
                {"x_ptr": ptr, "c_ptr": ptr, "cn_ptr": accp, "u_ptr": accp},
                dict(UPCAST=False, MODE=mode, PREC="tf32x3", P_IS_ONE=False, BN=BNr, CP=CP, BD=BD), warps,
                stages, floats=("p", "snap"), ones=("s_xd", "s_cd", "s_uc"), div16=("s_xn", "s_cn"))

    # spreading hop: fp32 and fp64 values, with and without the no-sibling rule
    for dtype, ptr, bits, bptr in (("float32", _F32, tl.int32, _I32), ("float64", _F64, tl.int64, _I64)):
        for has_doc in (True, False):
            add(f"spread/{dtype}" + ("/doc" if has_doc else ""), spread._spread_kernel,
                {"tip_ptr": _I64, "tix_ptr": _I64, "tdv_ptr": ptr, "doc_ptr": _I64, "eq_ptr": _I64, "ea_ptr": _I64,
                 "ev_ptr": ptr, "esdoc_ptr": _I64, "eself_ptr": _I64, "out_bits_ptr": bptr},
                dict(HAS_DOC=has_doc, BITS=bits, BLOCK=spread.BLOCK), 4)
    return out


def version_key(version: str | None = None) -> str:
    """'3.6', '3.9', … of the installed Triton (EXPECTED_SHARED is keyed by major.minor)."""
    return ".".join((version or triton.__version__).split(".")[:2])


# Shared memory (bytes) per configuration for sm_90, as compiled by each Triton version. The
# semiring kernels reduce nothing across warps: what they use is the epilogue's layout change before
# the store (one BM×BN tile) on 3.6, none on 3.9. Configurations not listed are checked against
# the opt-in limit only.
EXPECTED_SHARED: dict[str, dict[str, int]] = {
    "3.6": {
        "semiring/float32/minplus/64x64x4": 16384,
        "semiring/float32/maxplus/64x64x4": 16384,
        "semiring/float32/minsum/64x64x4": 16384,
        "semiring/float32/minplus/32x64x4": 8192,
        "semiring/float32/maxplus/32x64x4": 8192,
        "semiring/float32/minsum/32x64x4": 8192,
        "semiring/float32/minplus/64x32x4": 8192,
        "semiring/float32/maxplus/64x32x4": 8192,
        "semiring/float32/minsum/64x32x4": 8192,
        "semiring/float32/minplus/32x32x4": 4096,
        "semiring/float32/maxplus/32x32x4": 4096,
        "semiring/float32/minsum/32x32x4": 4096,
        "semiring/float64/minplus/32x32x4": 8192,
        "semiring/float64/maxplus/32x32x4": 8192,
        "semiring/float64/minsum/32x32x4": 8192,
        "semiring/float32/minplus/64x64x4/split": 16384,
        "meet_levels/int8/64x64x64": 8192,
        "assign/bfloat16/128x16x64": 18432,
        "assign/bfloat16/128x16x64/segmented": 18432,
        "assign/bfloat16/128x32x64": 20480,
        "assign/bfloat16/128x64x64": 24576,
        "assign/bfloat16/128x128x64": 32768,
        "assign/float16/128x128x64": 32768,
        "assign/float32/64x16x32": 24576,
        "assign/float32/64x32x32": 32768,
        "assign/float32/64x64x32": 49152,
        "assign/float64/16x16x16": 2048,
        "update/bfloat16/KP16": 19456,
        "update/bfloat16/KP32": 21504,
        "update/bfloat16/KP64": 32768,
        "update/bfloat16/KP128": 32768,
        "update/bfloat16/KP256": 37888,
        "update/float32/KP16": 70656,
        "update/float32/KP32": 74752,
        "update/float32/KP64": 132096,
        "update/float32/KP128": 66560,
        "update/float32/KP256": 82944,
        "fcm/bfloat16/c16": 18432,
        "fcm/bfloat16/c32": 20480,
        "fcm/bfloat16/c64": 32768,
        "fcm/bfloat16/c128": 32768,
        "fcm/bfloat16/c256": 32768,
        "fcm/bfloat16/c512": 32768,
        "fcm/bfloat16/c1024": 32768,
        "fcm/float32/c16": 40960,
        "fcm/float32/c128": 81920,
        "fcm/float32/c512": 135168,
        "fcm/float32/c1024": 133120,
        "fcm/float64/c16": 2048,
        "fcm/float64/c128": 16384,
        "spread/float32/doc": 0,
        "spread/float32": 0,
        "spread/float64/doc": 0,
        "spread/float64": 0,
    },
    "3.9": {
        "semiring/float32/minplus/64x64x4": 0,
        "semiring/float32/maxplus/64x64x4": 0,
        "semiring/float32/minsum/64x64x4": 0,
        "semiring/float32/minplus/32x64x4": 0,
        "semiring/float32/maxplus/32x64x4": 0,
        "semiring/float32/minsum/32x64x4": 0,
        "semiring/float32/minplus/64x32x4": 0,
        "semiring/float32/maxplus/64x32x4": 0,
        "semiring/float32/minsum/64x32x4": 0,
        "semiring/float32/minplus/32x32x4": 0,
        "semiring/float32/maxplus/32x32x4": 0,
        "semiring/float32/minsum/32x32x4": 0,
        "semiring/float64/minplus/32x32x4": 0,
        "semiring/float64/maxplus/32x32x4": 0,
        "semiring/float64/minsum/32x32x4": 0,
        "semiring/float32/minplus/64x64x4/split": 0,
        "meet_levels/int8/64x64x64": 16384,
        "assign/bfloat16/128x16x64": 18432,
        "assign/bfloat16/128x16x64/segmented": 18432,
        "assign/bfloat16/128x32x64": 20480,
        "assign/bfloat16/128x64x64": 24576,
        "assign/bfloat16/128x128x64": 32768,
        "assign/float16/128x128x64": 32768,
        "assign/float32/64x16x32": 24576,
        "assign/float32/64x32x32": 32768,
        "assign/float32/64x64x32": 49152,
        "assign/float64/16x16x16": 2048,
        "update/bfloat16/KP16": 19456,
        "update/bfloat16/KP32": 21504,
        "update/bfloat16/KP64": 32768,
        "update/bfloat16/KP128": 32768,
        "update/bfloat16/KP256": 37888,
        "update/float32/KP16": 70656,
        "update/float32/KP32": 74752,
        "update/float32/KP64": 132096,
        "update/float32/KP128": 66560,
        "update/float32/KP256": 82944,
        "fcm/bfloat16/c16": 18432,
        "fcm/bfloat16/c32": 20480,
        "fcm/bfloat16/c64": 32768,
        "fcm/bfloat16/c128": 32768,
        "fcm/bfloat16/c256": 32768,
        "fcm/bfloat16/c512": 32768,
        "fcm/bfloat16/c1024": 32768,
        "fcm/float32/c16": 40960,
        "fcm/float32/c128": 81920,
        "fcm/float32/c512": 135168,
        "fcm/float32/c1024": 133120,
        "fcm/float64/c16": 2048,
        "fcm/float64/c128": 16384,
        "spread/float32/doc": 0,
        "spread/float32": 0,
        "spread/float64/doc": 0,
        "spread/float64": 0,
    },
}


def sweep(arch: int = 90, only: str | None = None, log=None) -> list[dict]:
    """Compile every configuration (or those whose name starts with ``only``); one row each."""
    rows = []
    for cfg in configurations(arch):
        if only and not cfg["name"].startswith(only):
            continue
        t = time.perf_counter()
        row = {"name": cfg["name"], "num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
        try:
            rep = resources.compile_report(cfg["kernel"], cfg["sig"], cfg["constexprs"], cfg["attrs"], arch=arch,
                                           num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
            rep.pop("ttir", None)
            row.update({k: rep.get(k) for k in ("shared_bytes", "registers", "spill_store_bytes",
                                                "spill_load_bytes", "smem_optin_bytes", "ptxas_error")
                        if rep.get(k) is not None})
        except Exception as e:  # a configuration that does not compile is a finding, not a crash
            row["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        row["compile_s"] = round(time.perf_counter() - t, 2)
        rows.append(row)
        if log:
            log(row)
    return rows


def problems(rows: list[dict], arch: int = 90, version: str | None = None) -> list[str]:
    """What ``--check`` fails on: compile errors, shared memory over the opt-in limit or
    different from EXPECTED_SHARED for this Triton version."""
    want = EXPECTED_SHARED.get(version_key(version), {})
    limit = resources.SMEM_OPTIN.get(arch)
    bad = []
    for r in rows:
        n = r["name"]
        if "error" in r or "ptxas_error" in r:
            bad.append(f"{n}: {r.get('error') or r.get('ptxas_error')}")
            continue
        if limit is not None and r["shared_bytes"] > limit:
            bad.append(f"{n}: {r['shared_bytes']} B of shared memory > {limit} B opt-in limit of sm_{arch}")
        if arch == 90 and n in want and r["shared_bytes"] != want[n]:
            bad.append(f"{n}: {r['shared_bytes']} B of shared memory, {want[n]} B expected on Triton "
                       f"{version_key(version)}")
    return bad


def markdown_table(rows: list[dict]) -> str:
    lines = ["| configuration | warps | stages | shared (B) | registers | spills (B) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        spill = (r.get("spill_store_bytes") or 0) + (r.get("spill_load_bytes") or 0)
        lines.append(f"| {r['name']} | {r['num_warps']} | {r['num_stages']} | {r.get('shared_bytes', 'error')} | "
                     f"{r.get('registers', '?')} | {spill} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", type=int, default=90, help="compute capability × 10 (default 90: H100/H200)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--check", action="store_true", help="exit 1 on any problem (see the module doc)")
    ap.add_argument("--only", help="configurations whose name starts with this")
    args = ap.parse_args(argv)
    import os
    if os.environ.get("TRITON_INTERPRET") == "1":
        ap.error("TRITON_INTERPRET=1 replaces the kernels with the interpreter: unset it to compile")
    t0 = time.perf_counter()
    rows = sweep(args.arch, args.only, log=lambda r: print(
        f"{r['name']:48s} shared {r.get('shared_bytes', '-'):>7} regs {r.get('registers', '-'):>4} "
        f"{r.get('error', '')}", flush=True))
    print(f"compiled {len(rows)} configurations for sm_{args.arch} with Triton {triton.__version__} "
          f"in {time.perf_counter() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"triton": triton.__version__, "arch": args.arch, "rows": rows}, f, indent=1)
    if args.markdown:
        print(markdown_table(rows))
    bad = problems(rows, args.arch)
    for b in bad:
        print("PROBLEM " + b)
    for r in rows:
        if r.get("spill_store_bytes") or r.get("spill_load_bytes"):
            print(f"spills: {r['name']} {r.get('spill_store_bytes')} B stored, {r.get('spill_load_bytes')} B loaded")
    return 1 if (args.check and bad) else 0


if __name__ == "__main__":
    sys.exit(main())
