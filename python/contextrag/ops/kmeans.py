"""K-means and residual-quantization k-means (paper §3.4, eq. 10-12).

The Lloyd loop is written once in torch and runs on the inputs' device; the two heavy steps are
looked up per backend: ``kmeans_assign`` (distance GEMM fused with the argmin: never an n×k matrix
beyond one row block) and ``kmeans_update`` (per-cluster sums and counts).
"""
from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np
import torch

from .. import ref
from ._backend import native, select
from ._registry import IMPLS, register
from ._tensor import as_tensor, check_half_on_gpu, check_positive_int, same_device

SPLIT_EPS = ref.kmeans.SPLIT_EPS
ROW_BLOCK = 8192  # rows per distance tile on the torch (device-agnostic) paths
# CPU path: a tile of about 4M distances (16 MiB in float32). Few large GEMM calls measured 2-4x
# faster than 8192-row tiles on a shared 2-core machine (each BLAS call synchronises its threads).
CPU_TILE_ELEMS = 1 << 22


def cpu_row_block(n: int, k: int) -> int:
    return max(1024, min(n, CPU_TILE_ELEMS // max(k, 1)))


class KMeansResult(NamedTuple):
    centroids: object   # (k, d), float32 (float64 for float64 input)
    labels: object      # (n,) int64
    inertia: float      # Σ ‖x − c(x)‖² over all points
    n_iter: int         # Lloyd iterations run


class RQResult(NamedTuple):
    codebooks: list     # one (k_ℓ, d) centroid matrix per level
    codes: object       # (n, L) int64: the cluster of each point at each level
    sizes: tuple        # codebook sizes actually used (after clamping)
    inertia: list       # per level, Σ of squared residual norms after that level


def _check_X(X, name="X"):
    t, kind = as_tensor(X, name, ndim=(2,), allow_half=True)
    check_half_on_gpu(t, name)
    return t, kind


def _work_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype == torch.float64 else torch.float32


def kmeans_assign(X, C, *, backend: str | None = None):
    """Nearest centroid of each row: (labels int64 (n,), squared distances (n,)). Ties -> lowest index."""
    tX, kind = _check_X(X)
    tC, _ = as_tensor(C, "C", ndim=(2,), allow_half=True)
    check_half_on_gpu(tC, "C")
    same_device("X", tX, "C", tC)
    if tX.shape[1] != tC.shape[1]:
        raise ValueError(f"X has {tX.shape[1]} columns but C has {tC.shape[1]}; both must be (·, d)")
    if tC.shape[0] == 0:
        raise ValueError("C must hold at least one centroid")
    _, impl = select("kmeans_assign", tX.device, backend, IMPLS["kmeans_assign"])
    labels, d2 = impl(tX, tC.to(_work_dtype(tX)))
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


@register("kmeans_assign", "cpu")
def _cpu_assign(X, C, xn=None):
    """Blocked ‖c‖² − 2x·c GEMM (torch CPU BLAS) + a C++ row epilogue: first argmin and the exact
    ‖x − c‖² of the chosen centre. Never more than ROW_BLOCK × k distances at once.

    With ``xn`` (precomputed ‖x‖², inside Lloyd iterations) the distance is the GEMM form
    ‖x‖² + min_c(‖c‖² − 2x·c) instead, which saves a pass over X; only the stopping test sees it."""
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

def _split_empty(C: torch.Tensor, counts: torch.Tensor) -> int:
    """FAISS's perturbation split of empty clusters, taking the largest cluster (see ref.kmeans)."""
    empty = (counts == 0).nonzero().flatten().tolist()
    if not empty:
        return 0
    d = C.shape[1]
    sign = torch.where(torch.arange(d, device=C.device) % 2 == 0, 1.0, -1.0).to(C.dtype)
    cnt = counts.tolist()
    n_split = 0
    for ci in empty:
        cj = max(range(len(cnt)), key=lambda j: (cnt[j], -j))
        if cnt[cj] <= 1:
            break
        C[ci] = C[cj] * (1.0 + sign * SPLIT_EPS)
        C[cj] = C[cj] * (1.0 - sign * SPLIT_EPS)
        cnt[ci] = cnt[cj] // 2
        cnt[cj] -= cnt[ci]
        n_split += 1
    counts.copy_(torch.tensor(cnt, dtype=counts.dtype))
    return n_split


def _updated_centroids(C: torch.Tensor, sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Cluster means (divided in the sums' dtype, then rounded to C's), C kept for empty clusters,
    which _split_empty then fills. `counts` is not modified."""
    C = C.clone()
    nz = counts > 0
    C[nz] = (sums[nz] / counts[nz].to(sums.dtype)[:, None]).to(C.dtype)
    _split_empty(C, counts.clone())
    return C


# k-means++ seeding draws from a seeded uniform subsample of at most this many points per centre:
# each step then costs one small GEMM instead of a pass over all of X (96 Python-level passes over
# 100k×384 points took 93% of a default fit). Lloyd on all points follows; the benchmark checks
# the fit's inertia against FAISS's at the same iteration count (bench/bench_cpu_kmeans.py).
PP_POINTS_PER_CENTROID = 64


def _kmeans_plus_plus(X: torch.Tensor, k: int, seed: int,
                      points_per_centroid: int = PP_POINTS_PER_CENTROID) -> torch.Tensor:
    """Greedy k-means++ (as scikit-learn: 2 + ⌊ln k⌋ candidates per step, the one that lowers the
    potential most is kept) on a seeded subsample of at most k·points_per_centroid rows. Each step
    is one (m, d) × (d, candidates) GEMM in the ‖x‖² − 2x·c + ‖c‖² form on X's device; the draws
    come from a NumPy generator (device independent)."""
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    wd = _work_dtype(X)
    m = min(n, k * max(1, points_per_centroid))
    if m < n:
        idx = np.sort(rng.choice(n, size=m, replace=False))
        S = X[torch.from_numpy(idx).to(X.device)].to(wd).contiguous()
    else:
        S = X.to(wd).contiguous()
    sn = (S * S).sum(dim=1)
    trials = 2 + int(math.log(k))
    C = torch.empty((k, X.shape[1]), dtype=wd, device=X.device)
    C[0] = S[int(rng.integers(m))]
    d2 = (sn - 2.0 * (S @ C[0]) + (C[0] * C[0]).sum()).clamp_min_(0.0)
    for j in range(1, k):
        cum = np.cumsum(d2.double().cpu().numpy())
        total = cum[-1]
        if not total > 0:    # every point sits on a chosen centre: any point will do
            cand = rng.integers(m, size=trials)
        else:
            cand = np.minimum(np.searchsorted(cum, rng.random(trials) * total, side="right"), m - 1)
        Cc = S[torch.from_numpy(cand).to(X.device)]
        D = torch.addmm(sn[:, None] + (Cc * Cc).sum(dim=1)[None, :], S, Cc.t(), alpha=-2.0)
        torch.minimum(D, d2[:, None], out=D)   # the potential if each candidate were taken
        best = int(D.sum(dim=0).argmin())
        C[j] = Cc[best]
        d2 = D[:, best].clamp_min(0.0)     # the GEMM form can round below 0
    return C


def _initial_centroids(X, k, init, seed, kind_name="init"):
    wd = _work_dtype(X)
    if isinstance(init, str):
        if init == "k-means++":
            return _kmeans_plus_plus(X, k, seed)
        if init == "random":
            rng = np.random.default_rng(seed)
            idx = torch.from_numpy(rng.choice(X.shape[0], size=k, replace=False)).to(X.device)
            return X[idx].to(wd).clone()
        raise ValueError(f"{kind_name} must be 'k-means++', 'random' or a (k, d) array, got {init!r}")
    tC, _ = as_tensor(init, kind_name, ndim=(2,))
    if tuple(tC.shape) != (k, X.shape[1]):
        raise ValueError(f"{kind_name} must have shape ({k}, {X.shape[1]}), got {tuple(tC.shape)}")
    return tC.to(device=X.device, dtype=wd).clone()


def _lloyd(X, C, n_iter, tol, assign, update):
    prev = float("inf")
    it = 0
    k = C.shape[0]
    for it in range(1, n_iter + 1):
        labels, d2 = assign(X, C)
        inertia = float(d2.sum(dtype=torch.float64))
        sums, counts = update(X, labels, k)
        C = _updated_centroids(C, sums, counts)
        if prev < float("inf") and prev - inertia <= tol * max(prev, 1e-300):
            break
        prev = inertia
    return C, it


# ---- bounded Lloyd for the CPU (Elkan's bounds) --------------------------------------------
# Exact Lloyd iterations that skip the distance GEMM for points whose nearest centre provably has
# not changed. Per point: an upper bound u ≥ ‖x − c_a‖ and, per centre j, a lower bound
# L[j] ≤ ‖x − c_j‖ (float32, n×k), both as of the iteration ("epoch") they were computed. At test
# time they are loosened by each centre's net displacement since that epoch (triangle inequality),
# not by the sum of its per-iteration moves as in textbook Elkan: in 384-d the centres wander, and
# the net displacement grows far slower than the path length (measured: the re-evaluated fraction in
# bench/results/cpu_kmeans.json). A point is re-evaluated against all k centres, in one GEMM over
# the gathered active rows, only when u, after tightening to the exact distance, exceeds min_j L[j].
# Lower bounds from the GEMM form carry a slack for its rounding (γ_d·(‖x‖² + max‖c‖²),
# γ_d = 2(d+4)·u_roundoff) and every rounding is directed, so skipping is conservative: labels match
# the plain loop except where it meets rounding-level ties.
# Cluster sums (float64) and Σ‖x − g‖² per cluster (g near the data's centre, against cancellation in
# the inertia) are updated from the points that moved, so neither the update nor the inertia costs a
# pass over X once the fit settles. Float64 sums of float32 rows are exact unless the values span a
# huge exponent range, so the incremental sums equal the plain loop's (and the Ray build's) fresh ones
# and the float32 centroids are the same bits.
BOUNDED_LLOYD = True          # module switch (benchmarks and tests compare both loops)
# bf16 screening (CPUs with AVX512-BF16, float32 X): the evaluation GEMM runs on bf16-rounded
# operands (gemm_bf16, ~2.5× the fp32 rate), |G̃ − G| ≤ E = eb·‖x‖·max‖c‖ is carried into the
# bounds, and a row whose smallest G̃ is not ahead of the others by 2E gets its few candidates
# compared by exact distance, so labels stay exact. eb (_ElkanState) bounds 2|x̃·c̃ − x·c| / (‖x‖‖c‖):
# each product is off by ≤ (2^-8 + 2^-18)|x_k c_k| (both inputs rounded to 8 bits), Σ|x_k c_k| ≤ ‖x‖‖c‖,
# plus the fp32 accumulation (γ_d); the GEMM's other roundings are in the γ slack.
BF16_SCREEN = True
BF16_ROW_BLOCK = 4096
BOUNDED_MAX_BYTES = 2 << 30   # bounds (n·k·4) + bf16 X (n·d·2); larger problems run the plain loop
EPOCH_SNAPSHOT_BYTES = 256 << 20  # centre snapshots kept for displacements; oldest merged beyond
_STATS: list = []             # fraction of points re-evaluated per iteration (last fit; for benchmarks)
_SHRINK = 1.0 - 2.0 ** -22    # as CR_SHRINK in elkan_rows.h: directed rounding of lower bounds
FILTER_SKIP_MOVED = 0.1       # re-evaluate all rows untested while more than this share of labels moves
FULL_PASS_SHARE = 0.5         # re-evaluate all rows when more than this share fails its bounds


def _bounded_available(X, k, assign, update) -> bool:
    C = native()
    # the n×k float32 bounds, plus the bf16 copy of X when screening could use it
    extra = X.shape[0] * (k * 4 + (X.shape[1] * 2 if BF16_SCREEN and X.dtype == torch.float32 else 0))
    return (BOUNDED_LLOYD and X.device.type == "cpu" and assign is _cpu_assign and update is _cpu_update
            and C is not None and hasattr(C, "elkan_filter") and extra <= BOUNDED_MAX_BYTES)


def _plain_pages(shape, dtype) -> np.ndarray:
    """A large work buffer on ordinary pages. numpy asks for transparent huge pages (MADV_HUGEPAGE) on
    large arrays, and where the kernel compacts memory on such faults (defrag=madvise, a common
    default) the first touch of a fresh buffer waits on compaction whenever memory is fragmented;
    ordinary pages cost a steady few µs each. torch's CPU allocator does not ask for huge pages. The
    benchmark times both ("ours_bounded_hugepages" in bench/results/cpu_kmeans*.json)."""
    return torch.empty(shape, dtype=dtype).numpy()


class _ElkanState:
    """Labels, bounds, centre snapshots and centred cluster statistics of one bounded fit."""

    def __init__(self, X: torch.Tensor, k: int):
        self.Cn = native()
        self.X = X
        self.Xn = X.numpy()
        n, d = X.shape
        self.k = k
        self.bf16 = (BF16_SCREEN and X.dtype == torch.float32 and hasattr(self.Cn, "gemm_bf16")
                     and self.Cn.bf16_supported())
        if self.bf16:
            self.Xp = self.Cn.bf16_pack_a(self.Xn, False, _plain_pages((n, (d + 1) // 2), torch.int32).view(np.uint32))
            self.Xp_rows = self.Xp.view(np.float32)        # 4-byte rows for gather_rows
            self.eb = 2.0 * (2.0 ** -8 + 2.0 ** -17 + (d + 4) * 2.0 ** -23)
            self.pbuf = np.empty((cpu_row_block(n, k), self.Xp.shape[1]), dtype=np.float32)
        self.gamma = 2.0 * (d + 4) * float(torch.finfo(X.dtype).eps)
        self.labels = torch.zeros(n, dtype=torch.int64)
        self.upper = torch.zeros(n, dtype=torch.float64)
        self.uep = torch.zeros(n, dtype=torch.int32)
        self.lep = torch.zeros(n, dtype=torch.int32)
        self.L = torch.from_numpy(_plain_pages((n, k), torch.float32))
        self.lmin = torch.zeros(n, dtype=torch.float32)
        self.state = tuple(t.numpy() for t in (self.labels, self.upper, self.uep, self.L, self.lep, self.lmin))
        self.buf = None if self.bf16 else torch.from_numpy(      # gathered active rows (fp32 path)
            np.empty((cpu_row_block(n, k), d), dtype=self.Xn.dtype))
        self.snap: dict[int, torch.Tensor] = {}   # epoch -> the centres (float64) bounds refer to
        self.max_snaps = max(2, EPOCH_SNAPSHOT_BYTES // max(k * d * 8, 1))
        self.now = 0
        # Cluster statistics are kept about a point near the data's centre (the mean of a strided
        # sample: the algebra is exact for any shift, the shift only removes cancellation).
        self.mean = X[::max(1, n // 4096)].double().mean(dim=0).contiguous()
        # ‖x‖² (bounds) and ‖x − mean‖² (statistics), float64 sums, in one pass over X
        sq = torch.from_numpy(self.Cn.sq_dist_to(self.Xn, torch.stack([torch.zeros_like(self.mean), self.mean]).numpy()))
        self.xn2, self.q = sq[:, 0].contiguous(), sq[:, 1].contiguous()
        self.S = self.Q = self.cnt = None
        self.moved = 1.0   # fraction of labels the last evaluation changed

    def evaluate(self, C: torch.Tensor, rows: torch.Tensor | None):
        """Re-evaluate `rows` (None: all) against every centre: labels and fresh bounds."""
        Cn, X, k = self.Cn, self.X, self.k
        cn = (C * C).sum(dim=1)
        cmax = float(cn.max())
        Ct = C.t()
        m = X.shape[0] if rows is None else rows.numel()
        # bf16: row blocks whose G tile stays in cache for the refresh right after (our GEMM has no
        # per-call start-up to amortise, unlike torch's)
        B = min(cpu_row_block(m, k), BF16_ROW_BLOCK) if self.bf16 else cpu_row_block(m, k)
        if self.bf16:
            Cp = Cn.bf16_pack_b(C.numpy(), True)
            cnorm = math.sqrt(cmax) * (1.0 + 2.0 ** -20)
            G = np.empty((min(B, m), k), dtype=np.float32)
        for i in range(0, m, B):
            rb = None if rows is None else rows[i:i + B]
            if self.bf16:
                if rb is None:
                    xp = self.Xp[i:i + B]
                else:
                    xp = self.pbuf[:rb.numel()]
                    Cn.gather_rows(self.Xp_rows, rb.numpy(), xp)
                    xp = xp.view(np.uint32)
                g = G[:xp.shape[0]]
                Cn.gemm_bf16(xp, Cp, k, g, -2.0, cn.numpy())
                Cn.elkan_refresh(g, self.Xn, C.numpy(), self.xn2.numpy(), None if rb is None else rb.numpy(), i,
                                 self.state, self.now, self.gamma, cmax, self.eb, cnorm)
                continue
            if rb is None:
                xb = X[i:i + B]
            else:
                xb = self.buf[:rb.numel()]
                Cn.gather_rows(self.Xn, rb.numpy(), xb.numpy())
            G = torch.addmm(cn, xb, Ct, alpha=-2.0)
            Cn.elkan_refresh(G.numpy(), self.Xn, C.numpy(), self.xn2.numpy(),
                             None if rb is None else rb.numpy(), i, self.state, self.now, self.gamma, cmax)

    def full_stats(self):
        S, cnt = self.Cn.centroid_sums(self.Xn, self.labels.numpy(), self.k, True)
        self.cnt = torch.from_numpy(cnt)
        self.S = torch.from_numpy(S)
        self.Q = torch.zeros(self.k, dtype=torch.float64).index_add_(0, self.labels, self.q)

    def move(self, rows: torch.Tensor | None, old: torch.Tensor):
        """Update the cluster statistics for the rows (None: all) whose label changed from `old`."""
        new = self.labels if rows is None else self.labels[rows]
        nm = self.Cn.move_stats(self.Xn, None if rows is None else rows.numpy(), old.numpy(), new.numpy(),
                                self.q.numpy(), self.S.numpy(), self.Q.numpy(), self.cnt.numpy())
        self.moved = nm / max(self.X.shape[0], 1)

    def _merge_oldest(self):
        """Too many snapshots: rebase the rows of the oldest epoch onto the next one (looser bounds)."""
        e0, e1 = sorted(self.snap)[:2]
        dv = (self.snap[e1] - self.snap[e0]).norm(dim=1)
        rows = (self.lep == e0).nonzero().flatten()
        if rows.numel():
            dl = dv.float() * (1.0 + 2.0 ** -20)
            Lr = ((self.L[rows] - dl) * _SHRINK).clamp_min_(0.0)
            self.L[rows] = Lr
            self.lmin[rows] = Lr.min(dim=1).values    # L[a] = +inf: the min is over the others
            self.lep[rows] = e1
        rows = (self.uep == e0).nonzero().flatten()
        if rows.numel():
            self.upper[rows] = (self.upper[rows] + dv[self.labels[rows]]) * (1.0 + 2.0 ** -50)
            self.uep[rows] = e1
        del self.snap[e0]

    def step(self, C: torch.Tensor) -> float:
        """Assign every point to its nearest centre of C; returns the fraction re-evaluated."""
        C = C.contiguous()
        Cd = C.double()
        if not self.snap:
            self.snap[0] = Cd
            self.evaluate(C, None)
            self.full_stats()
            return 1.0
        self.now += 1
        self.snap[self.now] = Cd
        E = self.now + 1
        used = set(((torch.bincount(self.lep, minlength=E) + torch.bincount(self.uep, minlength=E)) > 0)
                   .nonzero().flatten().tolist())
        for e in [e for e in self.snap if e not in used and e != self.now]:
            del self.snap[e]
        while len(self.snap) > self.max_snaps:
            self._merge_oldest()
        if self.moved > FILTER_SKIP_MOVED:
            # Early on nearly every bound fails anyway: evaluate every row without testing (the
            # bounds stay valid, only loose, so this is safe).
            active = None
        else:
            disp = torch.zeros((self.now + 1, self.k), dtype=torch.float64)
            for e, Ce in self.snap.items():
                disp[e] = (Cd - Ce).norm(dim=1)
            active = torch.from_numpy(self.Cn.elkan_filter(self.Xn, C.numpy(), self.state, disp.numpy(), self.now))
        # Many active rows: evaluate all of them in contiguous blocks, which also refreshes every
        # stale bound (stale bounds are what keep the next iterations' active share high).
        if active is None or active.numel() > FULL_PASS_SHARE * self.X.shape[0]:
            old = self.labels.clone()
            self.evaluate(C, None)
            self.move(None, old)
            return 1.0
        self.moved = 0.0
        if active.numel():
            old = self.labels[active].clone()
            self.evaluate(C, active)
            self.move(active, old)
        return active.numel() / max(self.X.shape[0], 1)

    def inertia(self, C: torch.Tensor) -> float:
        """Σ_j Σ_{x∈j} ‖x − c_j‖² = Σ_j Q_j − 2 c'_j·S'_j + n_j‖c'_j‖² about the shift g = mean:
        c' = c − g, S' = S − n g, Q = Σ‖x − g‖² (float64)."""
        n = self.cnt.double()
        Cc = C.double() - self.mean
        Sc = self.S - n[:, None] * self.mean
        return float((self.Q - 2.0 * (Cc * Sc).sum(dim=1) + n * (Cc * Cc).sum(dim=1)).sum())

    def centroids(self, C: torch.Tensor) -> torch.Tensor:
        return _updated_centroids(C, self.S, self.cnt)


def _lloyd_bounded(X, C, n_iter, tol):
    """Returns (C, n_iter run, labels for the final C, inertia of those labels)."""
    wd = _work_dtype(X)
    X = X.to(wd).contiguous()
    C = C.to(wd).contiguous()
    st = _ElkanState(X, C.shape[0])
    _STATS.clear()
    prev = float("inf")
    it = 0
    for it in range(1, n_iter + 1):
        frac = st.step(C)
        if it > 1:
            _STATS.append(frac)
        inertia = st.inertia(C)
        C = st.centroids(C)
        if prev < float("inf") and prev - inertia <= tol * max(prev, 1e-300):
            break
        prev = inertia
    st.step(C)   # the final assignment pass, bounded like the others
    return C, it, st.labels, st.inertia(C)


def kmeans_fit(X, k: int, *, n_iter: int = 25, tol: float = 1e-4, seed: int = 0, init="k-means++",
               max_points_per_centroid: int | None = None, backend: str | None = None) -> KMeansResult:
    """Lloyd's k-means. Returns KMeansResult(centroids, labels, inertia, n_iter).

    ``init``: 'k-means++' (default), 'random', or a (k, d) array of initial centroids.
    ``max_points_per_centroid``: train on a seeded subsample of at most k·cap points, then run one
    full assignment pass (FAISS's default is 256). Empty clusters take half of the largest one.
    Stops when inertia decreases by less than ``tol`` (relative).
    """
    tX, kind = _check_X(X)
    k = check_positive_int(k, "k")
    n_iter = check_positive_int(n_iter, "n_iter")
    if not (isinstance(tol, (int, float)) and tol >= 0):
        raise ValueError(f"tol must be a number >= 0, got {tol!r}")
    n = tX.shape[0]
    if k > n:
        raise ValueError(f"k={k} exceeds the number of points n={n}")
    _, assign = select("kmeans_assign", tX.device, backend, IMPLS["kmeans_assign"])
    _, update = select("kmeans_update", tX.device, None if backend in ("triton", "cuda") else backend,
                       IMPLS["kmeans_update"])
    train = tX
    if max_points_per_centroid is not None:
        cap = check_positive_int(max_points_per_centroid, "max_points_per_centroid")
        if n > k * cap:
            rng = np.random.default_rng(seed + 1)
            idx = np.sort(rng.choice(n, size=k * cap, replace=False))
            train = tX[torch.from_numpy(idx).to(tX.device)]
    C = _initial_centroids(train, k, init, seed)
    if _bounded_available(train, k, assign, update):
        C, it, labels, inertia = _lloyd_bounded(train, C, n_iter, float(tol))
        if train is tX:
            return KMeansResult(kind.out(C), kind.out(labels), inertia, it)
    elif assign is _cpu_assign and train.device.type == "cpu" and _native_fn("kmeans_epilogue") is not None:
        Xw = train.to(_work_dtype(train)).contiguous()
        xn = torch.einsum("ij,ij->i", Xw, Xw).contiguous()
        C, it = _lloyd(Xw, C, n_iter, float(tol), lambda X_, C_: _cpu_assign(X_, C_, xn), update)
    else:
        C, it = _lloyd(train, C, n_iter, float(tol), assign, update)
    labels, d2 = assign(tX, C)
    return KMeansResult(kind.out(C), kind.out(labels), float(d2.sum()), it)


def _clamp_sizes(sizes, n: int) -> tuple:
    if isinstance(sizes, (int, np.integer)):
        sizes = (int(sizes),)
    sizes = tuple(check_positive_int(s, "sizes[i]") for s in sizes)
    if not sizes:
        raise ValueError("sizes must name at least one level")
    used = tuple(min(s, n) for s in sizes)
    if used != sizes and n > 0:
        warnings.warn(f"rq_kmeans: codebook sizes {sizes} clamped to {used} for n={n} points",
                      RuntimeWarning, stacklevel=3)
    return used


def rq_kmeans(X, sizes=(96, 24, 12), *, n_iter: int = 25, tol: float = 1e-4, seed: int = 0,
              init="k-means++", max_points_per_centroid: int | None = None,
              backend: str | None = None) -> RQResult:
    """Residual-quantization k-means (eq. 10-12): level ℓ clusters the residual r(ℓ) = x − Σ_{j<ℓ} c(j).

    Sizes larger than the number of points are clamped with a warning. ``init`` may be a list of
    per-level (k_ℓ, d) arrays. Returns RQResult(codebooks, codes, sizes, inertia per level).
    """
    tX, kind = _check_X(X)
    n = tX.shape[0]
    used = _clamp_sizes(sizes, n)
    if n == 0:
        books = [kind.out(torch.zeros((0, tX.shape[1]), dtype=_work_dtype(tX)))] * len(used)
        return RQResult(books, kind.out(torch.zeros((0, len(used)), dtype=torch.int64)), used, [0.0] * len(used))
    inits = list(init) if isinstance(init, (list, tuple)) else [init] * len(used)
    if len(inits) != len(used):
        raise ValueError(f"init must give one entry per level ({len(used)}), got {len(inits)}")
    R = tX.to(_work_dtype(tX)).clone()
    books, codes, inertia = [], [], []
    for lvl, k in enumerate(used):
        res = kmeans_fit(R, k, n_iter=n_iter, tol=tol, seed=seed + lvl, init=inits[lvl],
                         max_points_per_centroid=max_points_per_centroid, backend=backend)
        R -= res.centroids[res.labels]
        books.append(res.centroids)
        codes.append(res.labels)
        inertia.append(float((R * R).sum()))
    return RQResult([kind.out(b) for b in books], kind.out(torch.stack(codes, dim=1)), used, inertia)


def rq_kmeans_batched(problems, sizes=(96, 24, 12), *, n_iter: int = 25, tol: float = 1e-4, seed: int = 0,
                      max_points_per_centroid: int | None = None, backend: str | None = None) -> list[RQResult]:
    """RQ-KMeans over many independent problems (one per tenant or document set) of different sizes.

    Each problem is clamped on its own. GPU backends may run all problems in one launch; the CPU
    path runs them one after another with the same result.
    """
    if not isinstance(problems, (list, tuple)):
        raise TypeError(f"problems must be a list of (n_i, d) arrays, got {type(problems).__name__}")
    batched = IMPLS.get("rq_kmeans_batched", {})
    if problems and batched:
        t0, _ = _check_X(problems[0], "problems[0]")
        if t0.device.type == "cuda" and (backend is None or backend in batched):
            _, fn = select("rq_kmeans_batched", t0.device, backend, batched)
            return fn(problems, sizes, n_iter=n_iter, tol=tol, seed=seed,
                      max_points_per_centroid=max_points_per_centroid)
    return [rq_kmeans(X, sizes, n_iter=n_iter, tol=tol, seed=seed,
                      max_points_per_centroid=max_points_per_centroid, backend=backend)
            for X in problems]
