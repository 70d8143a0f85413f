"""fcm_fit on the CPU against scikit-fuzzy's cmeans: same data, same start, same iteration count.

    python bench/bench_cpu_fcm.py [--n 20000] [--d 384] [--c 96] [--m 2] [--iters 50] [--repeats 3]

Both start from the memberships of the same initial centres C0 (skfuzzy's ``init`` takes a
membership matrix; our fcm_fit starts from U(C0) and alternates centres/memberships exactly as
skfuzzy's loop does), run exactly ``iters`` iterations (tol=0 / error=0), and report the fuzzy
partition coefficient Σu²/n. The data (400 Gaussian components, noise 0.15, normalised) is
clustered enough that the partition coefficient is well above the uniform 1/c. skfuzzy runs in float64; ours runs in float32 (the embedding dtype)
and in float64.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cpu_common import gemm_rate, loadavg, machine, timed, write  # noqa: E402
from bench_cpu_kmeans import data  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--c", type=int, default=96)
    ap.add_argument("--m", type=float, default=2.0)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skfuzzy-repeats", type=int, default=1)
    a = ap.parse_args()
    import skfuzzy
    from contextrag import ops

    out = {"machine": machine(), "load_start": loadavg(), "params": vars(a)}
    X = data(a.n, a.d, seed=5, noise=0.15)  # clustered enough that memberships are not uniform
    C0 = X[np.random.default_rng(2).choice(a.n, a.c, replace=False)].copy()
    U0 = ops.fcm_memberships(X.astype(np.float64), C0.astype(np.float64), a.m)
    ops.fcm_fit(X[:500], 4, a.m, n_iter=2)  # warm-up (thread pools, extension import)

    ours32 = timed(lambda: ops.fcm_fit(X, a.c, a.m, n_iter=a.iters, tol=0.0, init=C0), a.repeats)
    X64 = X.astype(np.float64)
    ours64 = timed(lambda: ops.fcm_fit(X64, a.c, a.m, n_iter=a.iters, tol=0.0, init=C0.astype(np.float64)),
                   a.repeats)
    sk = timed(lambda: skfuzzy.cmeans(X64.T, a.c, a.m, error=0.0, maxiter=a.iters, init=U0.T.copy()),
               a.skfuzzy_repeats)
    cntr, u, u0, dist, jm, p, fpc = sk["result"]
    r32, r64 = ours32["result"], ours64["result"]
    out["gemm"] = gemm_rate()
    flops_iter = 2 * 2.0 * a.n * a.c * a.d   # distance GEMM + centre GEMM
    out["results"] = {
        "ours_float32": {"best_s": ours32["best_s"], "median_s": ours32["median_s"], "n_iter": r32.n_iter,
                         "partition_coefficient": r32.partition_coefficient, "objective": r32.objective,
                         "gemm_gflops": flops_iter * r32.n_iter / ours32["best_s"] / 1e9},
        "ours_float64": {"best_s": ours64["best_s"], "median_s": ours64["median_s"], "n_iter": r64.n_iter,
                         "partition_coefficient": r64.partition_coefficient, "objective": r64.objective},
        "skfuzzy_float64": {"best_s": sk["best_s"], "n_iter": int(p), "partition_coefficient": float(fpc),
                            "objective_last": float(jm[-1])},
        "speedup_float32_vs_skfuzzy": sk["best_s"] / ours32["best_s"],
        "cpu_s": {"ours_float32": ours32["min_cpu_s"], "ours_float64": ours64["min_cpu_s"],
                  "skfuzzy": sk["min_cpu_s"]},
        "cpu_time_ratio_skfuzzy_over_ours_float32": sk["min_cpu_s"] / ours32["min_cpu_s"],
        "speedup_float64_vs_skfuzzy": sk["best_s"] / ours64["best_s"],
        "fpc_abs_diff_float64": abs(r64.partition_coefficient - float(fpc)),
        "fpc_abs_diff_float32": abs(r32.partition_coefficient - float(fpc)),
        "centres_max_abs_diff_float64": float(np.abs(np.asarray(r64.centers) - cntr).max()),
    }
    out["load_end"] = loadavg()
    out["goals"] = {"fcm_vs_skfuzzy_20x": out["results"]["speedup_float32_vs_skfuzzy"] >= 20.0}
    write("fcm", out)
    print(out["results"], out["load_start"], out["load_end"])


if __name__ == "__main__":
    main()
