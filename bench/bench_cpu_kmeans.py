"""kmeans_fit on the CPU against faiss.Kmeans, and against the machine's fp32 GEMM rate.

    python bench/bench_cpu_kmeans.py [--n 100000] [--d 384] [--k 96] [--iters 20] [--repeats 3]

1. All points: kmeans_fit(X, k, n_iter=20, tol=0, init=C0) vs faiss.Kmeans(d, k, niter=20,
   max_points_per_centroid=n).train(X, init_centroids=C0): same initial centroids, same data.
   Our loop stops early only at a fixed point (no inertia decrease); n_iter run is recorded.
   Also the bounded loop without bf16 screening; the bounded loop with its large work buffers on
   transparent huge pages (numpy's allocation, MADV_HUGEPAGE) instead of ordinary ones; and our
   plain (unbounded) Lloyd loop, whose GEMM work is exactly 2·n·k·d per iteration, to set against
   the square-GEMM rate measured in the same run.
2. Defaults, end to end, as a user calls them, like against like: kmeans_fit(X, k) (k-means++
   seeding, 256 points per centroid, 25 iterations at most, tol=1e-4, then every row assigned) vs
   faiss.Kmeans(d, k) with its defaults (random init, 256 points per centroid, 25 iterations), and
   kmeans_fit(X, k, max_points_per_centroid=None) vs faiss.Kmeans(..., max_points_per_centroid=n).
   Our fits return labels for every row, so FAISS's time includes index.search over all of X
   (FAISS's train alone is recorded too). Both of ours also run with tol=0 (25 iterations, or
   fewer at a fixed point), for the inertia at FAISS's iteration count; every inertia is on all of
   X. The distance work of the default fits is counted in passes over the training sample.
3. rq_kmeans(X) with its defaults (levels 96, 24, 12; 256 points per centroid) and with
   max_points_per_centroid=None, vs the same three levels of faiss.Kmeans (defaults, and all points)
   on the residuals, each level trained and assigned.
4. precision (--sections precision): the same-work fit of 1. (plain and bounded loops) and one
   kmeans_assign of all points, with CONTEXTRAG_PRECISION=fp32 and =bf16 (bf16 distance tiles,
   arg-min fused, exact re-check; falls back to fp32 where the dispatch has no AVX512-BF16), against
   FAISS in the same interleaved run: labels and inertia of both precisions, the re-checked share.
5. small (--sections small): the quick-bench shapes (kmeans_assign 5000×384×32, kmeans_fit
   5000×384×32 10 iterations all points from a shared start, rq_kmeans 2000×384 levels 16, 4, 2 with
   defaults) against FAISS, best of interleaved repeats, with the load average of the run.
6. real (--embeddings FILE.npy): 4. on saved sentence embeddings (k = --k), where given.
7. loops (--sections loops): the bounded loop against the plain one (10 iterations, shared start, all
   points) across n and k, in `auto` and fp32 precision: where LloydOptions.bounded=None switches.
Every run records the CPU dispatch (`contextrag_cpu_isa`; CONTEXTRAG_ISA=avx2|generic forces it)
and writes bench/results/cpu_kmeans_<isa>.json (sections 1-3), cpu_kmeans_precision_<isa>.json
(section 4, with 5 if asked), cpu_kmeans_small_<isa>.json (section 5 without 4),
cpu_kmeans_loops_<isa>.json (section 7 without 4 and 5) or cpu_kmeans_real_<isa>.json (section 6
alone: --sections real).
Data: a normalised Gaussian mixture shaped like sentence embeddings (384-d, 400 components).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cpu_common import gemm_rate, loadavg, machine, timed, write  # noqa: E402


def data(n, d, seed=0, noise=1.2, components=400):
    rng = np.random.default_rng(seed)
    cent = rng.standard_normal((components, d)).astype(np.float32)
    X = cent[rng.integers(0, components, n)] + noise * rng.standard_normal((n, d), dtype=np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return np.ascontiguousarray(X, dtype=np.float32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, default=384)
    ap.add_argument("--k", type=int, default=96)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rq-repeats", type=int, default=1, help="repeats of the rq_kmeans section (minutes each)")
    ap.add_argument("--sections", default="all_points,defaults,rq",
                    help="comma-separated: all_points, defaults, rq, precision, small")
    ap.add_argument("--tag", default="", help="added to the file name (e.g. the machine, when an ISA is forced "
                                               "on a machine whose usual runs another file holds)")
    ap.add_argument("--busy", type=int, default=0,
                    help="spinning processes kept running through the small section: a loaded machine "
                         "(the file gets _load<N> in its name)")
    ap.add_argument("--embeddings", default=None, help="saved (n, d) float32 embeddings (.npy) for the 'real' section")
    ap.add_argument("--embeddings-label", default="all-MiniLM-L6-v2 (ONNX fp32) embeddings of the shared corpora: "
                    "HotpotQA-500 context sentences, MultiHop-RAG paragraphs, UltraDomain 70-word chunks",
                    help="what the saved embeddings are (recorded in the JSON)")
    a = ap.parse_args()
    sections = set(a.sections.split(","))
    if not sections & {"all_points", "defaults", "rq"}:
        return precision_main(a, sections)
    import faiss
    from contextrag import ops
    from contextrag.ops.fcm import bf16_available as fcm_bf16_available
    from contextrag.ops._elkan import BOUNDED_MIN_MACS

    out = {"machine": machine(), "load_start": loadavg(), "params": vars(a)}
    X = data(a.n, a.d)
    rng = np.random.default_rng(1)
    C0 = X[rng.choice(a.n, a.k, replace=False)].copy()
    out["gemm_before"] = gemm_rate()

    def ours(bounded: bool, screen: bool = True, hugepages: bool = False, stats=None):
        opts = ops.LloydOptions(bounded=bounded, bf16_screen=screen, hugepages=hugepages, stats=stats)
        return ops.kmeans_fit(X, a.k, n_iter=a.iters, tol=0.0, init=C0, max_points_per_centroid=None, options=opts)

    def fa():
        km = faiss.Kmeans(a.d, a.k, niter=a.iters, max_points_per_centroid=a.n, seed=1, verbose=False)
        km.train(X, init_centroids=C0)
        return km

    # without AVX512-BF16 the default loop already runs fp32 GEMMs: ours_bounded_fp32 would time it twice
    has_bf16 = fcm_bf16_available()
    names = ("ours_bounded",) + (("ours_bounded_fp32",) if has_bf16 else ()) + \
        ("ours_bounded_hugepages", "ours_plain", "faiss")
    runs = {k: [] for k in names}
    cpu = {k: [] for k in names}
    res = {}
    for r in range(a.repeats):       # interleaved, so load changes hit every contender alike
        # ours_bounded_fp32: the default loop without bf16 screening (what a CPU without AVX512-BF16 runs)
        # ours_bounded_hugepages: the default loop with its large buffers on transparent huge pages
        skip_stats = []
        fns = {"ours_bounded": lambda: ours(True, stats=skip_stats), "ours_bounded_fp32": lambda: ours(True, False),
               "ours_bounded_hugepages": lambda: ours(True, hugepages=True), "ours_plain": lambda: ours(False),
               "faiss": fa}
        for name in names:
            fn = fns[name]
            t = timed(fn, 1)
            runs[name].append(t["best_s"])
            cpu[name].append(t["cpu_s"])
            res[name] = t["result"]
            if name == "ours_bounded":
                res["skip_stats"] = list(skip_stats)
    best = {k: min(v) for k, v in runs.items()}
    km = res["faiss"]
    _, I = km.index.search(X, 1)
    faiss_inertia = float(((X - km.centroids[I[:, 0]]) ** 2).sum(dtype=np.float64))
    gemm_flops = 2.0 * a.n * a.k * a.d
    plain = res["ours_plain"]
    out["gemm_after"] = gemm_rate()
    g_best = max(out["gemm_before"]["gflops_best"], out["gemm_after"]["gflops_best"])
    plain_rate = gemm_flops * (plain.n_iter + 1) / best["ours_plain"] / 1e9   # +1: final assignment
    bounded = res["ours_bounded"]
    out["all_points"] = {
        "times_s": runs, "best_s": best, "cpu_s": cpu,
        "cpu_time_ratio_faiss_over_plain": min(cpu["faiss"]) / min(cpu["ours_plain"]),
        "ours_bounded": {"n_iter": bounded.n_iter, "inertia": bounded.inertia,
                         "fraction_of_points_reevaluated_per_iter": [1.0] + res["skip_stats"]},
        "ours_plain": {"n_iter": plain.n_iter, "inertia": plain.inertia,
                       "distance_gemm_gflops": plain_rate, "fraction_of_square_gemm_rate": plain_rate / g_best},
        "ours_bounded_effective_gflops": gemm_flops * (bounded.n_iter + 1) / best["ours_bounded"] / 1e9,
        "faiss": {"niter": a.iters, "inertia_final_assignment": faiss_inertia,
                  "obj_last_iter": float(km.obj[-1]) if len(km.obj) else None},
        "speedup_bounded_vs_faiss": best["faiss"] / best["ours_bounded"],
        "speedup_plain_vs_faiss": best["faiss"] / best["ours_plain"],
        "speedup_bounded_fp32_vs_faiss": best["faiss"] / best.get("ours_bounded_fp32", best["ours_bounded"]),
        "speedup_bounded_hugepages_vs_faiss": best["faiss"] / best["ours_bounded_hugepages"],
        "speedup_bounded_hugepages_vs_faiss_median": float(np.median(runs["faiss"]) /
                                                           np.median(runs["ours_bounded_hugepages"])),
        "labels_bounded_fp32_equal_bounded": bool(np.array_equal(np.asarray(res.get("ours_bounded_fp32", bounded).labels),
                                                                 np.asarray(res["ours_bounded"].labels))),
        # the host's speed drifts by ±20% within minutes (same-machine reruns): medians too
        "median_s": {k: float(np.median(v)) for k, v in runs.items()},
        "speedup_bounded_vs_faiss_median": float(np.median(runs["faiss"]) / np.median(runs["ours_bounded"])),
        "speedup_bounded_vs_faiss_per_repeat": [f / o for f, o in zip(runs["faiss"], runs["ours_bounded"])],
        "default_loop": {None: "bounded from n·k·d >= %d" % BOUNDED_MIN_MACS, True: "bounded",
                         False: "plain"}[ops.LloydOptions().bounded],
        "bf16_screening": bool(ops.LloydOptions().bf16_screen and fcm_bf16_available()),
        "labels_agree_with_faiss": float(np.mean(I[:, 0] == np.asarray(bounded.labels))),
    }

    # ---- defaults, end to end -----------------------------------------------------------------
    def inertia_of(C, labels):
        C, labels = np.asarray(C), np.asarray(labels)
        return float(((X - C[labels]) ** 2).sum(dtype=np.float64))

    def faiss_fit(X_, k, **kw):
        km = faiss.Kmeans(X_.shape[1], k, seed=3, verbose=False, **kw)
        km.train(X_)
        _, I = km.index.search(X_, 1)
        return km.centroids, I[:, 0]

    contenders = {
        "ours_default": lambda: ops.kmeans_fit(X, a.k),
        "ours_default_tol0": lambda: ops.kmeans_fit(X, a.k, tol=0.0),
        "ours_all_points": lambda: ops.kmeans_fit(X, a.k, max_points_per_centroid=None),
        "ours_all_points_tol0": lambda: ops.kmeans_fit(X, a.k, max_points_per_centroid=None, tol=0.0),
        "faiss_default": lambda: faiss_fit(X, a.k),
        "faiss_all_points": lambda: faiss_fit(X, a.k, max_points_per_centroid=a.n),
    }
    train_only = {}
    druns = {k: [] for k in contenders}
    dcpu = {k: [] for k in contenders}
    dres = {}
    for r in range(a.repeats):
        for name, fn in contenders.items():
            t = timed(fn, 1)
            druns[name].append(t["best_s"])
            dcpu[name].append(t["cpu_s"])
            dres[name] = t["result"]
        # FAISS's train alone (no labels for the rows outside its sample), for reference
        km = faiss.Kmeans(X.shape[1], a.k, seed=3, verbose=False)
        t = timed(lambda: km.train(X), 1)
        train_only.setdefault("faiss_default_train_only", []).append(t["best_s"])
    dbest = {k: min(v) for k, v in druns.items()}
    dinfo = {}
    for name, r_ in dres.items():
        if name.startswith("ours"):
            dinfo[name] = {"inertia": float(r_.inertia), "n_iter": r_.n_iter}
        else:
            dinfo[name] = {"inertia": inertia_of(*r_), "n_iter": 25}
    # The distance work of each default fit, in passes over the training sample (untimed rerun with
    # statistics): FAISS's 25 full iterations + its search over all of X, against our seeding-free
    # share of re-evaluated rows + the final pass over all of X. Equal GEMM rates would give this ratio.
    stats = []
    rd = ops.kmeans_fit(X, a.k, options=ops.LloydOptions(stats=stats))
    n_sub = min(a.n, 256 * a.k)
    ours_passes = 1.0 + sum(stats) + a.n / n_sub       # first iteration, the later ones, the final pass
    faiss_passes = 25.0 + a.n / n_sub
    work = {"ours_default_reevaluated_per_iter": [1.0] + stats, "ours_default_n_iter": rd.n_iter,
            "ours_default_sample_passes": ours_passes, "faiss_default_sample_passes": faiss_passes,
            "gemm_work_ratio_faiss_default_over_ours_default": faiss_passes / ours_passes}
    med = {k: float(np.median(v)) for k, v in druns.items()}
    out["default_call"] = {
        "times_s": druns, "best_s": dbest, "median_s": med, "cpu_s": dcpu, "fits": dinfo,
        "faiss_default_train_only_s": train_only["faiss_default_train_only"],
        "distance_work": work,
        # like against like: our default (256 per centroid) vs FAISS's default, all points vs all points
        "speedup_default_vs_faiss_default": dbest["faiss_default"] / dbest["ours_default"],
        "speedup_default_vs_faiss_default_median": med["faiss_default"] / med["ours_default"],
        "speedup_default_vs_faiss_default_train_only": min(train_only["faiss_default_train_only"]) / dbest["ours_default"],
        "speedup_all_points_vs_faiss_all_points": dbest["faiss_all_points"] / dbest["ours_all_points"],
        "speedup_all_points_vs_faiss_all_points_median": med["faiss_all_points"] / med["ours_all_points"],
        "speedup_default_vs_faiss_all_points": dbest["faiss_all_points"] / dbest["ours_default"],
        "speedup_default_tol0_vs_faiss_default": dbest["faiss_default"] / dbest["ours_default_tol0"],
        "speedup_all_points_tol0_vs_faiss_all_points": dbest["faiss_all_points"] / dbest["ours_all_points_tol0"],
        # at FAISS's iteration count (25), inertia on all of X
        "inertia_default_tol0_over_faiss_default": dinfo["ours_default_tol0"]["inertia"] / dinfo["faiss_default"]["inertia"],
        "inertia_all_points_tol0_over_faiss_all_points":
            dinfo["ours_all_points_tol0"]["inertia"] / dinfo["faiss_all_points"]["inertia"],
    }

    # ---- rq_kmeans defaults vs three faiss.Kmeans levels on the residuals ------------------------
    def faiss_rq(**kw):
        R = X.copy()
        for k in (96, 24, 12):
            C, lab = faiss_fit(R, k, **kw)
            R -= C[lab]
        return float((R.astype(np.float64) ** 2).sum())

    rq = {"ours_rq_default": lambda: ops.rq_kmeans(X).inertia[-1],
          "ours_rq_all_points": lambda: ops.rq_kmeans(X, max_points_per_centroid=None).inertia[-1],
          "faiss_rq_default": lambda: faiss_rq(),
          "faiss_rq_all_points": lambda: faiss_rq(max_points_per_centroid=a.n)}
    qruns = {k: [] for k in rq}
    qres = {}
    for r in range(a.rq_repeats):
        for name, fn in rq.items():
            t = timed(fn, 1)
            qruns[name].append(t["best_s"])
            qres[name] = t["result"]
    qbest = {k: min(v) for k, v in qruns.items()}
    out["rq_default_call"] = {
        "times_s": qruns, "best_s": qbest, "final_residual_inertia": qres,
        "speedup_vs_faiss_default": qbest["faiss_rq_default"] / qbest["ours_rq_default"],
        "speedup_all_points_vs_faiss_all_points": qbest["faiss_rq_all_points"] / qbest["ours_rq_all_points"],
        "speedup_default_vs_faiss_all_points": qbest["faiss_rq_all_points"] / qbest["ours_rq_default"],
        "residual_default_over_faiss_default": qres["ours_rq_default"] / qres["faiss_rq_default"],
        "residual_all_points_over_faiss_all_points": qres["ours_rq_all_points"] / qres["faiss_rq_all_points"],
    }
    out["load_end"] = loadavg()
    best_ours = max(out["all_points"]["speedup_bounded_vs_faiss"], out["all_points"]["speedup_plain_vs_faiss"])
    dc = out["default_call"]
    out["goals"] = {"kmeans_vs_faiss_3x": best_ours >= 3.0,
                    "same_start_vs_faiss_2x": out["all_points"]["speedup_bounded_vs_faiss"] >= 2.0,
                    "default_call_vs_faiss_default_3x": dc["speedup_default_vs_faiss_default"] >= 3.0,
                    "all_points_vs_faiss_all_points_3x": dc["speedup_all_points_vs_faiss_all_points"] >= 3.0,
                    "rq_default_vs_faiss_default_3x": out["rq_default_call"]["speedup_vs_faiss_default"] >= 3.0,
                    "rq_all_points_vs_faiss_all_points_3x":
                        out["rq_default_call"]["speedup_all_points_vs_faiss_all_points"] >= 3.0,
                    "inertia_not_worse_than_faiss_default": dc["inertia_default_tol0_over_faiss_default"] <= 1.0,
                    "inertia_all_points_not_worse_than_faiss_all_points":
                        dc["inertia_all_points_tol0_over_faiss_all_points"] <= 1.0,
                    "kmeans_vs_faiss_3x_median": out["all_points"]["speedup_bounded_vs_faiss_median"] >= 3.0,
                    "gemm_fraction_50pct": out["all_points"]["ours_plain"]["fraction_of_square_gemm_rate"] >= 0.5}
    write("kmeans", out)
    print({k: out["all_points"][k] for k in ("best_s", "speedup_bounded_vs_faiss", "speedup_plain_vs_faiss")})
    print(out["default_call"]["best_s"], out["rq_default_call"]["best_s"], out["goals"], out["load_start"],
          out["load_end"])


def _with_precision(value, fn):
    import os
    old = os.environ.get("CONTEXTRAG_PRECISION")
    os.environ["CONTEXTRAG_PRECISION"] = value
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["CONTEXTRAG_PRECISION"]
        else:
            os.environ["CONTEXTRAG_PRECISION"] = old


def precision_section(X, k, iters, repeats):
    """fp32 against bf16 distance tiles (same start, all points, tol=0) and FAISS, interleaved."""
    import faiss
    from contextrag import ops
    from contextrag.ops import kmeans as K
    n, d = X.shape
    C0 = X[np.random.default_rng(1).choice(n, k, replace=False)].copy()

    def fit(prec, bounded):
        opts = ops.LloydOptions(bounded=bounded)
        return _with_precision(prec, lambda: ops.kmeans_fit(X, k, n_iter=iters, tol=0.0, init=C0,
                                                             max_points_per_centroid=None, options=opts))

    def fa():
        km = faiss.Kmeans(d, k, niter=iters, max_points_per_centroid=n, seed=1, verbose=False)
        km.train(X, init_centroids=C0)
        return km

    index = faiss.IndexFlatL2(d)
    index.add(C0)
    fns = {"fit_bounded_bf16": lambda: fit("bf16", True), "fit_bounded_fp32": lambda: fit("fp32", True),
           "fit_plain_bf16": lambda: fit("bf16", False), "fit_plain_fp32": lambda: fit("fp32", False),
           "fit_faiss": fa,
           "assign_bf16": lambda: _with_precision("bf16", lambda: ops.kmeans_assign(X, C0)),
           "assign_fp32": lambda: _with_precision("fp32", lambda: ops.kmeans_assign(X, C0)),
           "assign_faiss": lambda: index.search(X, 1)}
    runs = {name: [] for name in fns}
    res = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            t = timed(fn, 1)
            runs[name].append(t["best_s"])
            res[name] = t["result"]
    best = {name: min(v) for name, v in runs.items()}
    import torch
    stats = []
    bf16 = _with_precision("bf16", lambda: K.use_bf16(torch.from_numpy(X[:1])))
    if bf16:   # the share of rows the bf16 bound leaves open at the shared start
        K._bf16_assign(torch.from_numpy(X), torch.from_numpy(C0), stats=stats)
    lab_ref = np.asarray(res["assign_fp32"][0])
    out = {"shape": [n, d, k], "iters": iters, "times_s": runs, "best_s": best, "bf16_available": bool(bf16),
           "assign_rows_rechecked_share": stats[0] if stats else None,
           "assign_labels_bf16_equal_fp32": bool(np.array_equal(np.asarray(res["assign_bf16"][0]), lab_ref)),
           "assign_labels_equal_faiss": float(np.mean(np.asarray(res["assign_faiss"][1])[:, 0] == lab_ref))}
    for loop in ("bounded", "plain"):
        b, f = res[f"fit_{loop}_bf16"], res[f"fit_{loop}_fp32"]
        out[f"fit_{loop}"] = {
            "labels_bf16_equal_fp32": bool(np.array_equal(np.asarray(b.labels), np.asarray(f.labels))),
            "inertia_rel_diff_bf16_vs_fp32": abs(b.inertia - f.inertia) / f.inertia,
            "n_iter": [b.n_iter, f.n_iter],
            "speedup_bf16_vs_fp32": best[f"fit_{loop}_fp32"] / best[f"fit_{loop}_bf16"],
            "speedup_bf16_vs_faiss": best["fit_faiss"] / best[f"fit_{loop}_bf16"],
            "speedup_fp32_vs_faiss": best["fit_faiss"] / best[f"fit_{loop}_fp32"]}
    out["assign_speedup_bf16_vs_fp32"] = best["assign_fp32"] / best["assign_bf16"]
    out["assign_speedup_bf16_vs_faiss"] = best["assign_faiss"] / best["assign_bf16"]
    out["assign_speedup_fp32_vs_faiss"] = best["assign_faiss"] / best["assign_fp32"]
    return out


LOOP_SHAPES = [(2000, 16, 10), (5000, 32, 10), (20000, 32, 10), (40000, 32, 10), (5000, 96, 10), (10000, 96, 10),
               (20000, 96, 10), (24576, 96, 10), (50000, 96, 10), (100000, 96, 20)]


def loops_section(repeats):
    """The bounded loop against the plain one, 10 iterations (20 at the largest shape) from a shared
    start, all points, 384-d, in each precision the machine runs, across n·k (where
    LloydOptions.bounded=None switches)."""
    from contextrag import ops
    from contextrag.ops._elkan import BOUNDED_MIN_MACS
    out = {"load_start": loadavg(), "bounded_min_macs": BOUNDED_MIN_MACS, "rows": []}
    for precision in ("auto", "fp32"):
        os.environ["CONTEXTRAG_PRECISION"] = precision
        for n, k, iters in LOOP_SHAPES:
            X = data(n, 384)
            C0 = X[np.random.default_rng(1).choice(n, k, replace=False)].copy()
            fits = {b: (lambda b=b: ops.kmeans_fit(X, k, n_iter=iters, tol=0.0, init=C0, max_points_per_centroid=None,
                                                    options=ops.LloydOptions(bounded=b))) for b in (True, False)}
            for f in fits.values():
                f()
            t = {True: [], False: []}
            for _ in range(repeats):
                for b, f in fits.items():
                    t[b].append(timed(f, 1, pause=False)["best_s"])
            out["rows"].append({"precision": precision, "n": n, "k": k, "iters": iters, "macs_per_iter": n * k * 384,
                                "bounded_s": min(t[True]), "plain_s": min(t[False]),
                                "speedup_plain_vs_bounded": min(t[True]) / min(t[False]),
                                "default_loop": "bounded" if n * k * 384 >= BOUNDED_MIN_MACS else "plain"})
            print(out["rows"][-1], flush=True)
    os.environ.pop("CONTEXTRAG_PRECISION", None)
    out["load_end"] = loadavg()
    return out


def _spin():
    while True:
        pass


@contextlib.contextmanager
def busy_workers(n: int):
    """n processes spinning on a core each for the duration: the load another tenant puts on a
    shared machine (the quick-bench shapes are asked to hold up under it)."""
    import multiprocessing as mp
    procs = [mp.get_context("spawn").Process(target=_spin, daemon=True) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        if procs:
            time.sleep(2.0)   # let them get scheduled
        yield
    finally:
        for p in procs:
            p.terminate()
            p.join()


def small_section(repeats):
    """The quick-bench shapes, ours (default precision) against FAISS, interleaved."""
    import faiss
    from contextrag import ops
    X = data(5000, 384)
    C0 = X[np.random.default_rng(1).choice(5000, 32, replace=False)].copy()
    X2 = data(2000, 384)
    index = faiss.IndexFlatL2(384)
    index.add(C0)

    def faiss_fit():
        km = faiss.Kmeans(384, 32, niter=10, max_points_per_centroid=5000, seed=1, verbose=False)
        km.train(X, init_centroids=C0)
        return km.index.search(X, 1)

    def faiss_rq():
        R = X2.copy()
        for kk in (16, 4, 2):
            km = faiss.Kmeans(384, kk, seed=3, verbose=False)
            km.train(R)
            _, I = km.index.search(R, 1)
            R -= km.centroids[I[:, 0]]
        return R

    pairs = {"kmeans_assign_5000x384x32": (lambda: ops.kmeans_assign(X, C0), lambda: index.search(X, 1)),
             "kmeans_fit_5000x384x32_10it": (lambda: ops.kmeans_fit(X, 32, n_iter=10, tol=0.0, init=C0,
                                                                    max_points_per_centroid=None), faiss_fit),
             "rq_kmeans_2000x384_16_4_2": (lambda: ops.rq_kmeans(X2, (16, 4, 2)), faiss_rq)}
    out = {"load_start": loadavg()}
    for name, (ours, peer) in pairs.items():
        ours()
        peer()
        to, tp = [], []
        for _ in range(repeats):      # back to back, interleaved: millisecond calls
            to.append(timed(ours, 1, pause=False)["best_s"])
            tp.append(timed(peer, 1, pause=False)["best_s"])
        out[name] = {"ours_s": to, "faiss_s": tp, "speedup_vs_faiss": min(tp) / min(to),
                     "speedup_vs_faiss_median": float(np.median(tp) / np.median(to))}
    out["load_end"] = loadavg()
    return out


def precision_main(a, sections):
    from contextrag.ops import _precision
    params = dict(vars(a), embeddings=Path(a.embeddings).name if a.embeddings else None)   # no host paths
    out = {"machine": machine(), "load_start": loadavg(), "params": params,
           "precision_auto_choice": _precision.choose("kmeans", exact=True),
           "note_load": "shared VM: the load averages say how busy it was (busy_workers: spinning processes "
                        "this run added); ratios are of contenders interleaved in the same run",
           "busy_workers": a.busy}
    if "precision" in sections:
        out["precision"] = precision_section(data(a.n, a.d), a.k, a.iters, a.repeats)
        out["precision"]["data"] = "normalised Gaussian mixture (400 components, noise 1.2)"
    if a.embeddings:
        E = np.ascontiguousarray(np.load(a.embeddings), dtype=np.float32)
        out["real"] = precision_section(E, a.k, a.iters, a.repeats)
        out["real"]["data"] = a.embeddings_label
    if "loops" in sections:
        out["loops"] = loops_section(max(a.repeats, 3))
    if "small" in sections:
        with busy_workers(a.busy):
            out["small"] = small_section(max(a.repeats, 5))
    out["load_end"] = loadavg()
    # section 4 names the file cpu_kmeans_precision_<isa>.json, 5 without 4 cpu_kmeans_small_<isa>.json,
    # a run of section 6 alone cpu_kmeans_real_<isa>.json
    name = ("kmeans_precision" if "precision" in sections else "kmeans_small" if "small" in sections
            else "kmeans_loops" if "loops" in sections else "kmeans_real")
    write(name + (f"_{a.tag}" if a.tag else "") + (f"_load{a.busy}" if a.busy else ""), out)
    print(json.dumps({k: v for k, v in out.items() if k not in ("machine", "params")}, indent=1, default=str)[:4000])


if __name__ == "__main__":
    main()
