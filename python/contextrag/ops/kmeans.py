"""K-means and residual-quantization k-means (paper §3.4, eq. 10-12): the public API.

The Lloyd loop is written once (``ops.lloyd``: step, update, empty-cluster split, stopping rule,
statistics); an executor supplies its assigner and reducer. Plain: ``kmeans_assign`` (distance GEMM
fused with the argmin: never an n×k matrix beyond one row block) and ``kmeans_update`` (per-cluster
sums and counts), looked up per backend. Bounded (CPU): the Elkan engine in ``ops._elkan``.
"""
from __future__ import annotations

import logging
import math
from typing import Generic, NamedTuple, Sequence

import numpy as np
import torch

from .. import ref
from ._backend import native, select
from ._bf16_bound import bf16_centre_terms, bf16_error_bound  # noqa: F401 (bf16_error_bound re-exported)
from ._elkan import CPU_TILE_ELEMS, ElkanState, bounded_available, cpu_row_block  # noqa: F401 (re-exported)
from ._precision import choose as choose_precision
from ._registry import IMPLS, register
from ._tensor import Kind, accepts_cupy, as_tensor, check_half_on_gpu, check_positive_int, same_device
from ._types import Array, ArrayT
from .lloyd import DEFAULT_OPTIONS, Assignment, LloydOptions, lloyd, split_empty, updated_centroids  # noqa: F401

SPLIT_EPS = ref.kmeans.SPLIT_EPS
ROW_BLOCK = 8192  # rows per distance tile on the torch (device-agnostic) paths
log = logging.getLogger(__name__)


class KMeansResult(NamedTuple, Generic[ArrayT]):
    """The result of :func:`kmeans_fit`; arrays of the input's kind and device.

    Attributes:
        centroids: ``(k, d)`` float32 (float64 for float64 input).
        labels: ``(n,)`` int64, the centroid of each point.
        inertia: Σ ‖x − c(x)‖² over all points.
        n_iter: Lloyd iterations run.
    """

    centroids: ArrayT
    labels: ArrayT
    inertia: float
    n_iter: int


class RQResult(NamedTuple, Generic[ArrayT]):
    """The result of :func:`rq_kmeans`; arrays of the input's kind and device.

    Attributes:
        codebooks: One ``(k_ℓ, d)`` centroid matrix per level (float32, float64 for float64 input).
        codes: ``(n, L)`` int64, the cluster of each point at each level.
        sizes: The codebook sizes used (after clamping to the number of points).
        inertia: Per level, Σ of the squared residual norms after that level.
    """

    codebooks: list[ArrayT]
    codes: ArrayT
    sizes: tuple[int, ...]
    inertia: list[float]


def _check_X(X, name="X"):
    t, kind = as_tensor(X, name, ndim=(2,), allow_half=True)
    check_half_on_gpu(t, name)
    return t, kind


def _work_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


@accepts_cupy
def kmeans_assign(X: ArrayT, C: Array, *, backend: str | None = None) -> tuple[ArrayT, ArrayT]:
    """Nearest centroid of each row of ``X``; ties go to the lowest index.

    The distance GEMM is fused with the argmin: no ``(n, k)`` matrix beyond one row block.

    Args:
        X: ``(n, d)`` points; float32 or float64 (float16/bfloat16 on CUDA).
        C: ``(k, d)`` centroids, k >= 1, on ``X``'s device.
        backend: "ref", "cpu", "triton" or "cuda"; None picks the best available (:func:`backends`).

    Returns:
        ``(labels, d2)``: ``(n,)`` int64 labels and ``(n,)`` squared distances (float32, float64
        for float64 ``X``), of ``X``'s kind and device.
    """
    tX, kind = as_tensor(X, "X", ndim=(2,), allow_half=True, check_finite=False)
    check_half_on_gpu(tX, "X")
    tC, _ = as_tensor(C, "C", ndim=(2,), allow_half=True)
    check_half_on_gpu(tC, "C")
    same_device("X", tX, "C", tC)
    if tX.shape[1] != tC.shape[1]:
        raise ValueError(f"X has {tX.shape[1]} columns but C has {tC.shape[1]}; both must be (·, d)")
    if tC.shape[0] == 0:
        raise ValueError("C must hold at least one centroid")
    name, impl = select("kmeans_assign", tX.device, backend, IMPLS["kmeans_assign"])
    if name != "cpu":
        _check_X(tX)
    labels, d2 = impl(tX, tC.to(_work_dtype(tX)))
    if name == "cpu" and not np.isfinite(d2.numpy().sum(dtype=np.float64)):
        # X is checked here rather than first: a NaN or inf in a row makes its exact d² NaN or inf
        # (the native row loops stay inside their rows on such input), so one pass over n values
        # replaces a pass over n·d; a finite X whose d² overflows is returned as computed.
        _check_X(tX)
    return kind.out(labels), kind.out(d2)


# ---- implementations -----------------------------------------------------------------------

@register("kmeans_assign", "ref")
def _ref_assign(X, C):
    labels, d2 = ref.kmeans_assign(X.detach().cpu().double().numpy(), C.detach().cpu().double().numpy())
    return (torch.from_numpy(labels).to(X.device),
            torch.from_numpy(d2).to(device=X.device, dtype=_work_dtype(X)))


def _native_fn(name: str):
    C = native()
    return getattr(C, name, None) if C is not None else None


def native_fn(name: str):
    """The compiled extension's function ``name``, or None where the extension (or the function) is
    missing."""
    return _native_fn(name)


def kmeans_impls(device, backend: str | None = None) -> tuple:
    """(assign, update): the ``kmeans_assign`` and ``kmeans_update`` implementations that
    ``kmeans_fit`` runs on ``device`` for ``backend`` (None: the default order)."""
    dev = torch.device(device)
    _, assign = select("kmeans_assign", dev, backend, IMPLS["kmeans_assign"])
    _, update = select("kmeans_update", dev, None if backend in ("triton", "cuda") else backend,
                       IMPLS["kmeans_update"])
    return assign, update


def is_native_cpu(assign=None, update=None) -> bool:
    """Whether ``assign`` (takes the rows' precomputed ‖x‖² as ``xn``) and ``update`` (float64 sums in
    OpenMP thread blocks) are the native CPU implementations (None: not asked about)."""
    ok = _native_fn("kmeans_epilogue") is not None
    if assign is not None:
        ok = ok and assign is _cpu_assign
    if update is not None:
        ok = ok and update is _cpu_update and _native_fn("centroid_sums") is not None
    return ok


def use_bf16(X: torch.Tensor) -> bool:
    """Whether the CPU assignment of X runs on bf16 tiles: float32 CPU rows, the native kernel, and
    ``ops._precision.choose`` (CONTEXTRAG_PRECISION, CONTEXTRAG_ISA, the machine profile)."""
    return (X.device.type == "cpu" and X.dtype == torch.float32 and _native_fn("kmeans_assign_bf16") is not None
            and choose_precision("kmeans", exact=True) == "bf16")


def pack_rows_bf16(X: torch.Tensor) -> np.ndarray:
    """X (float32, CPU) rounded to bf16 as the assignment's left operand; pack once per fit."""
    packed: np.ndarray = native().bf16_pack_a(X.contiguous().numpy())
    return packed


def bf16_row_terms(X: torch.Tensor) -> np.ndarray:
    """Each row's terms of the bf16 tiles' error bound (they depend on the row alone); compute once
    per fit and pass to every assignment as ``xt``."""
    terms: np.ndarray = native().bf16_row_terms(X.contiguous().numpy(), bf16_error_bound(X.shape[1]))
    return terms


def _bf16_assign(X: torch.Tensor, C: torch.Tensor, xp: np.ndarray | None = None, stats: list | None = None,
                 xt: np.ndarray | None = None):
    """Nearest centre of each row from bf16 distance tiles, arg-min fused, every row the bf16 bound
    leaves open re-checked by exact distance: the labels of exact arithmetic, exact d². ``xt``: the
    rows' ``bf16_row_terms``, else computed in the call."""
    Cn = native()
    X = X.contiguous()
    Xn = X.numpy()
    Cf = np.ascontiguousarray(C.numpy(), dtype=np.float32)
    cn, cnorm, dcnorm, ctau = bf16_centre_terms(Cf)
    Cp = Cn.bf16_pack_b(Cf, True)
    n = X.shape[0]   # xp None: the kernel rounds each block of rows itself (a one-off call packs nothing)
    labels = np.empty(n, dtype=np.int64)
    d2 = np.empty(n, dtype=np.float32)
    checked = Cn.kmeans_assign_bf16(xp, Cp, Xn, Cf, cn, cnorm, dcnorm, ctau, bf16_error_bound(X.shape[1]), labels, d2,
                                    xt)
    if stats is not None:
        stats.append(checked / max(n, 1))
    return torch.from_numpy(labels), torch.from_numpy(d2)


def use_native_f32(X: torch.Tensor) -> bool:
    """Whether the CPU assignment of X runs on our fp32 tiles (``kmeans_assign_f32``: float32 CPU
    rows, the native kernel present) rather than torch's GEMM: small problems on the calling thread,
    large ones on as many threads as they pay for (see csrc/cpu/gemm_f32.cpp for why)."""
    return X.device.type == "cpu" and X.dtype == torch.float32 and _native_fn("kmeans_assign_f32") is not None


def _f32_assign(X: torch.Tensor, C: torch.Tensor, xn: torch.Tensor | None = None):
    """Nearest centre of each row from fp32 distance tiles ‖c‖² − 2x·c, first arg-min fused (the
    labels of torch's addmm + ``kmeans_epilogue`` up to rounding-level ties); d² exact, or
    ‖x‖² + min with ``xn``."""
    Cn = native()
    Xn = X.contiguous().numpy()
    Cf = np.ascontiguousarray(C.numpy(), dtype=np.float32)
    n = Xn.shape[0]
    labels = np.empty(n, dtype=np.int64)
    d2 = np.empty(n, dtype=np.float32)
    Cn.kmeans_assign_f32(Xn, Cn.f32_pack_b(Cf), Cf, np.einsum("ij,ij->i", Cf, Cf), labels, d2,
                         None if xn is None else xn.contiguous().numpy())
    return torch.from_numpy(labels), torch.from_numpy(d2)


@register("kmeans_assign", "cpu")
def _cpu_assign(X, C, xn=None, xp=None, xt=None):
    """Nearest centre per row: the first arg-min of ‖c‖² − 2x·c and the exact ‖x − c‖² of the chosen
    centre. Float32 rows run on our own tiles, arg-min fused: bf16 where ``use_bf16`` says so
    (``_bf16_assign``; ``xp``: X already packed by ``pack_rows_bf16``, ``xt``: its ``bf16_row_terms``;
    the same labels, d² always exact), else fp32 (``_f32_assign``). Float64 rows: blocked torch GEMM +
    the C++ row epilogue, never more than one row block × k distances at once.
    With ``xn`` (precomputed ‖x‖², inside Lloyd iterations) the fp32 distance is the GEMM form
    ‖x‖² + min_c(‖c‖² − 2x·c) instead, which saves a pass over X; only the stopping test sees it."""
    if use_bf16(X):
        return _bf16_assign(X, C.to(torch.float32), xp, xt=xt)
    if use_native_f32(X):
        return _f32_assign(X, C.to(torch.float32), xn)
    n = X.shape[0]
    wd = _work_dtype(X)
    C = C.to(wd).contiguous()
    labels = torch.empty(n, dtype=torch.int64, device=X.device)
    d2 = torch.empty(n, dtype=wd, device=X.device)
    cn = (C * C).sum(dim=1)
    Ct = C.t()
    epi = _native_fn("kmeans_epilogue") if X.device.type == "cpu" else None
    B = cpu_row_block(n, C.shape[0]) if epi is not None else ROW_BLOCK
    buf = torch.empty((min(B, n), C.shape[0]), dtype=wd, device=X.device)
    for i in range(0, n, B):
        xb = X[i:i + B].to(wd).contiguous()
        D = torch.addmm(cn, xb, Ct, alpha=-2.0, out=buf[:xb.shape[0]])
        if epi is not None:
            epi(D.numpy(), xb.numpy(), C.numpy(), labels[i:i + B].numpy(), d2[i:i + B].numpy(),
                None if xn is None else xn[i:i + B].numpy())
        else:
            dmin, lab = D.min(dim=1)
            labels[i:i + B] = lab
            d2[i:i + B] = (dmin + (xb * xb).sum(dim=1)).clamp_min_(0.0)
    return labels, d2


@register("kmeans_update", "ref")
def _torch_update(X, labels, k):
    """Per-cluster sums (k, d) and counts (k,)."""
    wd = _work_dtype(X)
    sums = torch.zeros((k, X.shape[1]), dtype=wd, device=X.device)
    sums.index_add_(0, labels, X.to(wd))
    counts = torch.bincount(labels, minlength=k)
    return sums, counts


@register("kmeans_update", "cpu")
def _cpu_update(X, labels, k):
    fn = _native_fn("centroid_sums")
    if fn is None or X.device.type != "cpu":
        return _torch_update(X, labels, k)
    # float64 sums whatever X's dtype: the bounded loop keeps its sums in float64, so both loops
    # (and the Ray build) give the same float32 centroids (see distributed/kmeans.py).
    sums, counts = fn(X.to(_work_dtype(X)).contiguous().numpy(), labels.contiguous().numpy(), k, True)
    return torch.from_numpy(sums), torch.from_numpy(counts)


_torch_assign = _cpu_assign  # name kept for callers that import it


# ---- Lloyd's algorithm ---------------------------------------------------------------------

# k-means++ seeding draws from a seeded uniform subsample of at most this many points per centre:
# each step then costs one small GEMM instead of a pass over all of X (96 Python-level passes over
# 100k×384 points took 93% of a default fit). Lloyd on all points follows; the benchmark checks
# the fit's inertia against FAISS's at the same iteration count (bench/bench_cpu_kmeans.py).
PP_POINTS_PER_CENTROID = 64


def kmeans_plus_plus(X: torch.Tensor, k: int, seed: int,
                     points_per_centroid: int = PP_POINTS_PER_CENTROID) -> torch.Tensor:
    """Greedy k-means++ (as scikit-learn: 2 + ⌊ln k⌋ candidates per step, the one that lowers the
    potential most is kept) on a seeded subsample of at most k·points_per_centroid rows. The draws
    come from a NumPy generator, all made up front (device independent, as ``ref.kmeans_plus_plus``);
    on the CPU one native call runs the whole seeding (one parallel region per step: a few hundred
    small torch ops per fit cost more than the arithmetic on a busy 2-core machine, profiled),
    elsewhere each step is one (m, d) × (d, candidates) GEMM on X's device."""
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    wd = _work_dtype(X)
    m = min(n, k * max(1, points_per_centroid))
    cpu = X.device.type == "cpu"
    if m < n:
        idx = np.sort(rng.choice(n, size=m, replace=False))
        if cpu:   # NumPy's gather on the calling thread (torch's indexing waits on its thread pool)
            S = torch.from_numpy(np.ascontiguousarray(X.detach().numpy()[idx], dtype=np.float64 if wd == torch.float64
                                                      else np.float32))
        else:
            S = X[torch.from_numpy(idx).to(X.device)].to(wd).contiguous()
    else:
        S = X.to(wd).contiguous()
    trials = 2 + int(math.log(k))
    first = int(rng.integers(m))
    U = rng.random((k - 1, trials))
    pp = _native_fn("kmeanspp") if cpu else None
    if pp is not None:
        return torch.from_numpy(S.numpy()[pp(S.numpy(), first, U)])
    sn = (S * S).sum(dim=1)
    C = torch.empty((k, X.shape[1]), dtype=wd, device=X.device)
    C[0] = S[first]
    d2 = ((S - C[0]) ** 2).sum(dim=1)
    for j in range(1, k):
        cum = np.cumsum(d2.double().cpu().numpy())
        total = cum[-1]
        if not total > 0:    # every point sits on a chosen centre: any point will do
            cand = (U[j - 1] * m).astype(np.int64)
        else:
            cand = np.searchsorted(cum, U[j - 1] * total, side="right")
        cand = np.minimum(cand, m - 1)
        Cc = S[torch.from_numpy(cand).to(X.device)]
        D = torch.addmm(sn[:, None] + (Cc * Cc).sum(dim=1)[None, :], S, Cc.t(), alpha=-2.0).clamp_min_(0.0)
        torch.minimum(D, d2[:, None], out=D)   # the potential if each candidate were taken
        best = int(D.sum(dim=0, dtype=torch.float64).argmin())
        C[j] = Cc[best]
        d2 = D[:, best].contiguous()
    return C


def _initial_centroids(X, k, init, seed, kind_name="init"):
    wd = _work_dtype(X)
    if isinstance(init, str):
        if init == "k-means++":
            return kmeans_plus_plus(X, k, seed)
        if init == "random":
            rng = np.random.default_rng(seed)
            idx = torch.from_numpy(rng.choice(X.shape[0], size=k, replace=False)).to(X.device)
            return X[idx].to(wd).clone()
        raise ValueError(f"{kind_name} must be 'k-means++', 'random' or a (k, d) array, got {init!r}")
    tC, _ = as_tensor(init, kind_name, ndim=(2,))
    if tuple(tC.shape) != (k, X.shape[1]):
        raise ValueError(f"{kind_name} must have shape ({k}, {X.shape[1]}), got {tuple(tC.shape)}")
    return tC.to(device=X.device, dtype=wd).clone()


def local_assigner(X, assign, **kw):
    """The driver's assigner for rows X held by this process: ``assign(X, C, **kw)``."""
    return lambda C: Assignment(*assign(X, C, **kw))


def local_reducer(X, update):
    """The driver's reducer for rows X held by this process: ``update(X, labels, k)``."""
    return lambda labels, k: update(X, labels, k)


# Training subsample of the default fit, as FAISS's ``max_points_per_centroid`` (why: docs/KERNELS.md)
DEFAULT_POINTS_PER_CENTROID = 256


def check_points_per_centroid(value, name: str = "max_points_per_centroid") -> int | None:
    """None (train on every point) or an int >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be None or an int >= 1, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be None or an int >= 1, got {value}")
    return int(value)


def train_rows(n: int, k: int, cap: int | None, seed: int) -> np.ndarray | None:
    """The sorted rows a fit trains on: None (all) when ``cap`` is None or k·cap >= n, else a
    seeded uniform draw of k·cap rows (``distributed.layout.train_subsample`` draws the same)."""
    if cap is None or n <= k * cap:
        return None
    rng = np.random.default_rng(seed + 1)
    return np.sort(rng.choice(n, size=k * cap, replace=False))


def _take_rows(X: torch.Tensor, idx: np.ndarray) -> torch.Tensor:
    """X[idx] in X's work dtype (parallel native row copies on the CPU)."""
    gather = _native_fn("gather_rows") if X.device.type == "cpu" else None
    if gather is None:
        return X[torch.from_numpy(idx).to(X.device)].to(_work_dtype(X))
    Xw = X.to(_work_dtype(X)).contiguous()
    return torch.from_numpy(gather(Xw.numpy(), idx))


@accepts_cupy
def kmeans_fit(X: ArrayT, k: int, *, n_iter: int = 25, tol: float = 1e-4, seed: int = 0,
               init: str | Array = "k-means++",
               max_points_per_centroid: int | None = DEFAULT_POINTS_PER_CENTROID, backend: str | None = None,
               options: LloydOptions | None = None) -> KMeansResult[ArrayT]:
    """Lloyd's k-means. Empty clusters take half of the largest one.

    Args:
        X: ``(n, d)`` points; float32 or float64 (float16/bfloat16 on CUDA).
        k: Number of clusters, 1 <= k <= n.
        n_iter: Most Lloyd iterations.
        tol: Stop when the inertia decreases by less than ``tol`` (relative).
        seed: Seed of the initialisation and the training subsample.
        init: "k-means++" (greedy k-means++ on a seeded subsample of 64 points per centre),
            "random" (k distinct points, as FAISS), or a ``(k, d)`` array of initial centroids.
        max_points_per_centroid: The Lloyd iterations train on a seeded uniform subsample of at
            most k·256 rows by default, as FAISS's ``Kmeans`` does; labels and inertia still cover
            every row (one assignment pass over all of X at the end). None trains on every point,
            as scikit-learn does.
        backend: "ref", "cpu", "triton" or "cuda"; None picks the best available.
        options: How the CPU loop runs (:class:`LloydOptions`: bounded or plain, bf16 screening,
            statistics).

    Returns:
        ``KMeansResult(centroids (k, d), labels (n,) int64, inertia, n_iter)``, arrays of ``X``'s kind
        and device.
    """
    tX, kind = _check_X(X)
    return _kmeans_fit(tX, kind, k, n_iter=n_iter, tol=tol, seed=seed, init=init,
                       max_points_per_centroid=max_points_per_centroid, backend=backend, options=options)


TENSOR_KIND: Kind = Kind(numpy=False)


def _kmeans_fit(tX: torch.Tensor, kind: Kind, k: int, *, n_iter: int, tol: float, seed: int, init,
                max_points_per_centroid: int | None, backend: str | None,
                options: LloydOptions | None) -> KMeansResult:
    """:func:`kmeans_fit` on rows already validated (``as_tensor``): rq_kmeans's residual levels,
    finite by construction, skip a pass over them per level."""
    k = check_positive_int(k, "k")
    n_iter = check_positive_int(n_iter, "n_iter")
    if not (isinstance(tol, (int, float)) and tol >= 0):
        raise ValueError(f"tol must be a number >= 0, got {tol!r}")
    cap = check_points_per_centroid(max_points_per_centroid)
    if options is None:
        options = DEFAULT_OPTIONS
    elif not isinstance(options, LloydOptions):
        raise TypeError(f"options must be an ops.LloydOptions, got {type(options).__name__}")
    n = tX.shape[0]
    if k > n:
        raise ValueError(f"k={k} exceeds the number of points n={n}")
    assign, update = kmeans_impls(tX.device, backend)
    idx = train_rows(n, k, cap, seed)
    train = tX if idx is None else _take_rows(tX, idx)
    C = _initial_centroids(train, k, init, seed)
    tol = float(tol)
    native_cpu = assign is _cpu_assign and update is _cpu_update
    if native_cpu and bounded_available(train, k, options):
        Xw = train.to(_work_dtype(train)).contiguous()
        st = ElkanState(Xw, k, options)
        C, it = lloyd(C.to(Xw.dtype).contiguous(), st.assign, st.reduce, n_iter=n_iter, tol=tol, stats=options.stats)
        if idx is None:
            st.step(C)   # the final assignment, bounded like the others
            return KMeansResult(kind.out(C), kind.out(st.labels), st.inertia(C), it)
        # A sample: one assignment pass over all of X below (contiguous row blocks; assigning only the
        # rows outside the sample saved a quarter of the GEMM but paid as much again gathering them).
    elif native_cpu and train.device.type == "cpu" and _native_fn("kmeans_epilogue") is not None:
        Xw = train.to(_work_dtype(train)).contiguous()
        if use_bf16(Xw):   # pack the rows and their bound terms once for every iteration
            assigner = local_assigner(Xw, _cpu_assign, xp=pack_rows_bf16(Xw), xt=bf16_row_terms(Xw))
        else:
            Xa = Xw.numpy()   # NumPy on the calling thread (see rq_kmeans's residual update)
            assigner = local_assigner(Xw, _cpu_assign, xn=torch.from_numpy(np.einsum("ij,ij->i", Xa, Xa)))
        C, it = lloyd(C, assigner, local_reducer(Xw, update), n_iter=n_iter, tol=tol, stats=options.stats)
    else:
        C, it = lloyd(C, local_assigner(train, assign), local_reducer(train, update), n_iter=n_iter, tol=tol,
                      stats=options.stats)
    labels, d2 = assign(tX, C)
    return KMeansResult(kind.out(C), kind.out(labels), float(d2.sum(dtype=torch.float64)), it)


def clamp_sizes(sizes, n: int) -> tuple:
    """The codebook sizes an RQ fit of n points uses: each level at most n (one info line when any
    is clamped: small corpora meet it on every build)."""
    if isinstance(sizes, (int, np.integer)):
        sizes = (int(sizes),)
    sizes = tuple(check_positive_int(s, "sizes[i]") for s in sizes)
    if not sizes:
        raise ValueError("sizes must name at least one level")
    used = tuple(min(s, n) for s in sizes)
    if used != sizes and n > 0:
        log.info("rq_kmeans: codebook sizes %s clamped to %s for n=%d points", sizes, used, n)
    return used


# names kept for callers inside ops
_kmeans_plus_plus = kmeans_plus_plus
_clamp_sizes = clamp_sizes


@accepts_cupy
def rq_kmeans(X: ArrayT, sizes: int | Sequence[int] = (96, 24, 12), *, n_iter: int = 25, tol: float = 1e-4,
              seed: int = 0, init: str | Array | list[str | Array] | tuple[str | Array, ...] = "k-means++",
              max_points_per_centroid: int | None = DEFAULT_POINTS_PER_CENTROID,
              backend: str | None = None, options: LloydOptions | None = None) -> RQResult[ArrayT]:
    """Residual-quantization k-means (eq. 10-12): level ℓ clusters the residual r(ℓ) = x − Σ_{j<ℓ} c(j).

    Args:
        X: ``(n, d)`` points; float32 or float64 (float16/bfloat16 on CUDA).
        sizes: The codebook size of each level (an int: one level). Sizes larger than the number
            of points are clamped (logged at info level).
        n_iter: Most Lloyd iterations per level.
        tol: Relative inertia decrease that stops a level.
        seed: Level ℓ is fitted with seed ``seed + ℓ``.
        init: As in :func:`kmeans_fit`, for every level, or a list of per-level ``(k_ℓ, d)`` arrays.
        max_points_per_centroid: As in :func:`kmeans_fit`, per level.
        backend: "ref", "cpu", "triton" or "cuda"; None picks the best available.
        options: As in :func:`kmeans_fit`.

    Returns:
        ``RQResult(codebooks, codes (n, L) int64, sizes, inertia per level)``, arrays of ``X``'s kind
        and device.
    """
    tX, kind = _check_X(X)
    n = tX.shape[0]
    used = clamp_sizes(sizes, n)
    if n == 0:
        books = [kind.out(torch.zeros((0, tX.shape[1]), dtype=_work_dtype(tX)))] * len(used)
        return RQResult(books, kind.out(torch.zeros((0, len(used)), dtype=torch.int64)), used, [0.0] * len(used))
    inits = list(init) if isinstance(init, (list, tuple)) else [init] * len(used)
    if len(inits) != len(used):
        raise ValueError(f"init must give one entry per level ({len(used)}), got {len(inits)}")
    # fp16/bf16 (GPU) rows keep their storage dtype through the levels, so every level's assignment
    # runs the half-precision (tensor-core) kernels; centroids and inertia are in the work dtype
    half = tX.dtype in (torch.float16, torch.bfloat16)
    if half:
        R = tX.clone()
    elif tX.device.type == "cpu":   # a NumPy copy: torch's runs on its thread pool (see below)
        R = torch.from_numpy(np.array(tX.detach().numpy(), dtype=np.float64 if tX.dtype == torch.float64 else np.float32))
    else:
        R = tX.to(_work_dtype(tX)).clone()
    books, codes, inertia = [], [], []
    for lvl, k in enumerate(used):
        res = _kmeans_fit(R, TENSOR_KIND, k, n_iter=n_iter, tol=tol, seed=seed + lvl, init=inits[lvl],
                          max_points_per_centroid=max_points_per_centroid, backend=backend, options=options)
        sub = _native_fn("subtract_centres") if R.device.type == "cpu" else None
        if sub is not None:
            # one native pass, in place: torch's (n, d) ops wait on its thread pool's barriers (most
            # of a small fit's time on a busy machine, profiled), NumPy's gather allocates an (n, d)
            inertia.append(float(sub(R.numpy(), np.ascontiguousarray(res.centroids.numpy(), dtype=R.numpy().dtype),
                                     res.labels.numpy())))
        elif R.device.type == "cpu":
            Rn = R.numpy()
            Rn -= res.centroids.numpy()[res.labels.numpy()]
            inertia.append(float(np.einsum("ij,ij->i", Rn, Rn).sum(dtype=np.float64)))
        else:
            R -= res.centroids[res.labels].to(R.dtype)
            Rw = R.to(_work_dtype(R)) if half else R
            inertia.append(float((Rw * Rw).sum()))
        books.append(res.centroids)
        codes.append(res.labels)
    return RQResult([kind.out(b) for b in books], kind.out(torch.stack(codes, dim=1)), used, inertia)


@accepts_cupy
def rq_kmeans_batched(problems: Sequence[ArrayT], sizes: int | Sequence[int] = (96, 24, 12), *, n_iter: int = 25,
                      tol: float = 1e-4, seed: int = 0,
                      max_points_per_centroid: int | None = DEFAULT_POINTS_PER_CENTROID,
                      backend: str | None = None) -> list[RQResult[ArrayT]]:
    """RQ-KMeans over many independent problems (one per tenant or document set) of different sizes.

    Each problem is clamped on its own. GPU backends may run all problems in one launch; the CPU
    path runs them one after another with the same result.

    Args:
        problems: A list of ``(n_i, d)`` point sets, one kind and device for all.
        sizes: The codebook sizes of every problem, as in :func:`rq_kmeans`.
        n_iter: As in :func:`rq_kmeans`.
        tol: As in :func:`rq_kmeans`.
        seed: As in :func:`rq_kmeans`.
        max_points_per_centroid: As in :func:`rq_kmeans`.
        backend: "ref", "cpu", "triton" or "cuda"; None picks the best available.

    Returns:
        One :class:`RQResult` per problem, in order.
    """
    if not isinstance(problems, (list, tuple)):
        raise TypeError(f"problems must be a list of (n_i, d) arrays, got {type(problems).__name__}")
    batched = IMPLS.get("rq_kmeans_batched", {})
    if problems and batched:
        t0, _ = _check_X(problems[0], "problems[0]")
        if t0.device.type == "cuda" and (backend is None or backend in batched):
            _, fn = select("rq_kmeans_batched", t0.device, backend, batched)
            out: list[RQResult[ArrayT]] = fn(problems, sizes, n_iter=n_iter, tol=tol, seed=seed,
                                             max_points_per_centroid=max_points_per_centroid)
            return out
    return [rq_kmeans(X, sizes, n_iter=n_iter, tol=tol, seed=seed,
                      max_points_per_centroid=max_points_per_centroid, backend=backend)
            for X in problems]
