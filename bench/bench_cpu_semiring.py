"""Semiring kernels on the CPU: luk_up and meet_cardinality at 132 sets × 100,000 chunks × 132
attributes, in terms/s and as a fraction of the SIMD add+min peak, against blocked NumPy broadcasting.
Also meet_cardinality's kernel against the transpose + zero-skipping semiring kernel as zeros
grow, and the sparse incidence at vocabulary scale (5,000 chunks × 50,000 attributes, 1% dense).

    python bench/bench_cpu_semiring.py [--repeats 5]

Peak: a term is one subtract (or add) and one min (or max) per lane. The peak counts
cores × GHz × fp32 lanes of one vector register × 1 term per lane per cycle, i.e. one vector
add-class op and one vector min per core per cycle. On Zen 4 (family 25) a 512-bit op is issued as
two 256-bit halves and the FP unit has two add pipes and two mul/FMA pipes (min/max can use either
kind), so 16 lanes × 1 term/cycle equals 8 lanes × 4 ops / 2 ops per term: the same number.
GHz is /proc/cpuinfo's "cpu MHz" (the VM reports the nominal clock; boost is not counted).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cpu_common import loadavg, machine, timed, write  # noqa: E402

from contextrag.bench.peers import numpy_luk_up, numpy_meet  # noqa: E402  (the shipped peers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=132)
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--attrs", type=int, default=132)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--numpy-repeats", type=int, default=1)
    a = ap.parse_args()
    from contextrag import _C, ops, ref

    mach = machine()
    out = {"machine": mach, "load_start": loadavg(), "params": vars(a)}
    cores, ghz, lanes = mach["cores"], mach["cpu_mhz"] / 1000.0, mach["fp32_lanes_per_vector"]
    peak32 = cores * ghz * 1e9 * lanes * 1.0
    out["peak"] = {"terms_per_s_fp32": peak32, "terms_per_s_fp64": peak32 / 2,
                   "derivation": f"{cores} cores × {ghz:.3f} GHz × {lanes} fp32 lanes × 1 (add, min) pair "
                                 "per lane per cycle; fp64 has half the lanes"}
    rng = np.random.default_rng(0)
    S, G, M = a.sets, a.chunks, a.attrs
    terms = S * G * M
    res = {}
    for dt in (np.float32, np.float64):
        A = rng.random((S, G), dtype=dt)           # dense sets (no zero skipping helps here)
        I = rng.random((G, M), dtype=dt)
        B = rng.random((S, G), dtype=dt)
        ops.luk_up(A[:, :1000], I[:1000])             # warm-up
        up = timed(lambda: ops.luk_up(A, I, backend="cpu"), a.repeats)
        meet = timed(lambda: ops.meet_cardinality(A, B, backend="cpu"), a.repeats)
        raw = timed(lambda: _C.semiring("luk", A, I, False), a.repeats)  # kernel alone, no Python layout
        peak = peak32 if dt == np.float32 else peak32 / 2
        name = np.dtype(dt).name
        r = {
            "luk_up": {"best_s": up["best_s"], "median_s": up["median_s"], "terms_per_s": terms / up["best_s"],
                       "fraction_of_peak": terms / up["best_s"] / peak, "min_cpu_s": up["min_cpu_s"],
                       "fraction_of_peak_per_cpu_second": terms / up["min_cpu_s"] / (peak / cores)},
            "luk_up_kernel_only": {"best_s": raw["best_s"], "terms_per_s": terms / raw["best_s"],
                                   "fraction_of_peak": terms / raw["best_s"] / peak, "min_cpu_s": raw["min_cpu_s"],
                                   "fraction_of_peak_per_cpu_second": terms / raw["min_cpu_s"] / (peak / cores)},
            "meet_cardinality": {"best_s": meet["best_s"], "median_s": meet["median_s"],
                                 "terms_per_s": terms / meet["best_s"],
                                 "fraction_of_peak": terms / meet["best_s"] / peak, "min_cpu_s": meet["min_cpu_s"],
                                 "fraction_of_peak_per_cpu_second": terms / meet["min_cpu_s"] / (peak / cores)},
        }
        if dt == np.float32:
            npu = timed(lambda: numpy_luk_up(A, I), a.numpy_repeats)
            npm = timed(lambda: numpy_meet(A, B), a.numpy_repeats)
            assert np.allclose(npu["result"], up["result"], atol=1e-6)
            r["numpy_luk_up"] = {"best_s": npu["best_s"], "terms_per_s": terms / npu["best_s"],
                                 "speedup_ours": npu["best_s"] / up["best_s"], "cpu_s": npu["cpu_s"],
                                 "cpu_time_ratio": npu["cpu_s"] / up["min_cpu_s"]}
            r["numpy_meet_cardinality"] = {"best_s": npm["best_s"], "terms_per_s": terms / npm["best_s"],
                                           "speedup_ours": npm["best_s"] / meet["best_s"], "cpu_s": npm["cpu_s"],
                                           "cpu_time_ratio": npm["cpu_s"] / meet["min_cpu_s"]}
            # luk_up exactness spot check against the float64 reference on a slice
            r["luk_up_max_abs_err_vs_ref_slice"] = float(np.abs(
                ops.luk_up(A[:8, :5000], I[:5000]) - ref.luk_up(A[:8, :5000], I[:5000])).max())
        res[name] = r

    # ---- meet_cardinality's kernel against the zero-skipping alternative ----------------------
    # ours: meet_rows, lanes along g over A and B as given. Alternative: the broadcast semiring kernel
    # on Bᵀ (a fresh transpose) that skips every g where a block of 6 rows of A is all zero.
    sweep = {}
    for zeros in (0.0, 0.5, 0.9, 0.97, 0.99, 0.999):
        Az = rng.random((S, G), dtype=np.float32)
        Az[rng.random(Az.shape) < zeros] = 0.0
        Bz = rng.random((S, G), dtype=np.float32)
        Bz[rng.random(Bz.shape) < zeros] = 0.0
        cols = Az[:, ::max(1, G // 4096)] != 0
        cols = np.concatenate([cols, np.zeros(((-S) % 6, cols.shape[1]), bool)])
        sweep[f"zeros_{zeros}"] = {
            "empty_6row_block_share": float((~cols.reshape(-1, 6, cols.shape[1]).any(axis=1)).mean()),
            "meet_rows_s": timed(lambda: ops.meet_cardinality(Az, Bz, backend="cpu"), 3)["best_s"],
            "transpose_and_broadcast_skip_s": timed(lambda: _C.semiring("meet", Az, _C.transpose(Bz)), 3)["best_s"]}
    res["meet_cardinality_sparse"] = sweep

    # ---- sparse incidence at vocabulary scale -------------------------------------------------
    import scipy.sparse as sp
    Gs, Ms = 5000, 50_000
    Isp = sp.random(Gs, Ms, density=0.01, random_state=1, format="csr", dtype=np.float32)
    As = rng.random((S, Gs), dtype=np.float32)
    As[rng.random(As.shape) < 0.9] = 0.0
    sp_up = timed(lambda: ops.luk_up(As, Isp, backend="cpu"), 3)
    sp_down = timed(lambda: ops.luk_down(rng.random((S, Ms), dtype=np.float32), Isp, backend="cpu"), 3)
    mu = rng.random((S, Gs), dtype=np.float32)
    Ic = Isp.T.tocsr()
    sp_route = timed(lambda: ops.fuzzy_route(mu, Ic, backend="cpu"), 3)
    res["sparse_5000x50000_1pct"] = {
        "nnz": int(Isp.nnz), "sets": S,
        "luk_up_s": sp_up["best_s"], "luk_down_s": sp_down["best_s"], "fuzzy_route_s": sp_route["best_s"],
        "note": "dense equivalent would be 132 × 5,000 × 50,000 = 3.3e10 terms",
    }
    out["results"] = res
    out["load_end"] = loadavg()
    out["goals"] = {"semiring_30pct_of_peak_fp32": res["float32"]["luk_up"]["fraction_of_peak"] >= 0.30,
                    "meet_cardinality_30pct_of_peak_fp32": res["float32"]["meet_cardinality"]["fraction_of_peak"] >= 0.30,
                    "meet_cardinality_30pct_of_peak_fp32_median":
                        res["float32"]["meet_cardinality"]["best_s"] / res["float32"]["meet_cardinality"]["median_s"]
                        * res["float32"]["meet_cardinality"]["fraction_of_peak"] >= 0.30,
                    "semiring_30pct_of_peak_fp32_per_cpu_second":
                        res["float32"]["luk_up_kernel_only"]["fraction_of_peak_per_cpu_second"] >= 0.30}
    write("semiring", out)
    for k, v in res.items():
        print(k, v)
    print(out["peak"], out["load_start"], out["load_end"])


if __name__ == "__main__":
    main()
