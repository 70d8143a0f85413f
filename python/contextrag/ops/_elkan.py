"""Bounded (Elkan) Lloyd iterations for the CPU: the state, assigner and reducer that
``ops.lloyd.lloyd`` drives; ``ops.kmeans.kmeans_fit`` picks this engine when ``bounded_available``
says it fits.
"""
from __future__ import annotations

import numpy as np
import torch

from ._backend import native
from ._bf16_bound import bf16_centre_terms, bf16_error_bound
from ._precision import choose as choose_precision
from .lloyd import Assignment, LloydOptions

# CPU distance tiles of about 4M distances (16 MiB in float32). Few large GEMM calls measured 2-4x
# faster than 8192-row tiles on a shared 2-core machine (each BLAS call synchronises its threads).
CPU_TILE_ELEMS = 1 << 22


def cpu_row_block(n: int, k: int) -> int:
    return max(1024, min(n, CPU_TILE_ELEMS // max(k, 1)))


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
# bf16 screening (LloydOptions.bf16_screen; AVX-512 dispatch with AVX512-BF16, float32 X): the
# evaluation GEMM runs on bf16-rounded operands (gemm_bf16, ~2.5× the fp32 rate), |G̃ − G| ≤ E = ‖x‖·cnorm is carried into
# the bounds, and a row whose smallest G̃ is not ahead of the others by 2E gets its few candidates
# compared by exact distance, so labels stay exact. E is ops.kmeans's bf16 bound (Cauchy–Schwarz on
# the operands' rounding errors: |x̃·c̃ − x·c| ≤ ‖δx‖‖c̃‖ + ‖x‖‖δc‖, plus the fp32 accumulation) with
# ‖δx‖ ≤ 2^-8‖x‖ (bf16's unit roundoff) and the largest centre's terms; the GEMM's other roundings
# are in the γ slack.
BF16_ROW_BLOCK = 4096
_SHRINK = 1.0 - 2.0 ** -22    # as CR_SHRINK in elkan_rows.h: directed rounding of lower bounds
FILTER_SKIP_MOVED = 0.1       # re-evaluate all rows untested while more than this share of labels moves
FULL_PASS_SHARE = 0.5         # re-evaluate all rows when more than this share fails its bounds


# The bounded loop's floor (LloydOptions.bounded=None): fits with less distance work per iteration
# (n·k·d multiply-adds) run the plain loop. Below it the bounds' per-iteration passes (refresh, filter,
# displacement statistics) cost more than the GEMM they skip (measured in bf16 and fp32 across sizes:
# bench/bench_cpu_kmeans.py --sections loops, docs/KERNELS.md).
BOUNDED_MIN_MACS = 1 << 29


def bounded_available(X: torch.Tensor, k: int, opts: LloydOptions) -> bool:
    """Whether the bounded loop runs this fit: asked for (``opts.bounded`` True, or None and the
    distance work per iteration at least ``BOUNDED_MIN_MACS``), CPU tensors, the native helpers, and
    the n×k float32 bounds (plus the bf16 copy of X when screening could use it) within the options'
    cap."""
    if opts.bounded is False or (opts.bounded is None and X.shape[0] * k * X.shape[1] < BOUNDED_MIN_MACS):
        return False
    C = native()
    extra = X.shape[0] * (k * 4 + (X.shape[1] * 2 if opts.bf16_screen and X.dtype == torch.float32 else 0))
    return X.device.type == "cpu" and C is not None and hasattr(C, "elkan_filter") and extra <= opts.max_bound_bytes


def plain_pages(shape, dtype, hugepages: bool = False) -> np.ndarray:
    """A large work buffer on ordinary pages. numpy asks for transparent huge pages (MADV_HUGEPAGE) on
    large arrays, and where the kernel compacts memory on such faults (defrag=madvise, a common
    default) the first touch of a fresh buffer waits on compaction whenever memory is fragmented;
    ordinary pages cost a steady few µs each. torch's CPU allocator does not ask for huge pages. The
    benchmark times both ("ours_bounded_hugepages" in bench/results/cpu_kmeans*.json), which is
    what ``hugepages=True`` is for."""
    if hugepages:
        return np.empty(shape, dtype=str(dtype).removeprefix("torch."))
    return torch.empty(shape, dtype=dtype).numpy()


class ElkanState:
    """Labels, bounds, centre snapshots and centred cluster statistics of one bounded fit."""

    def __init__(self, X: torch.Tensor, k: int, opts: LloydOptions):
        self.Cn = native()
        hp = opts.hugepages
        self.X = X
        self.Xn = X.numpy()
        n, d = X.shape
        self.k = k
        self.bf16 = (opts.bf16_screen and X.dtype == torch.float32 and hasattr(self.Cn, "gemm_bf16")
                     and choose_precision("kmeans", exact=True) == "bf16")
        if self.bf16:
            self.Xp = self.Cn.bf16_pack_a(self.Xn, False, plain_pages((n, (d + 1) // 2), torch.int32, hp).view(np.uint32))
            self.Xp_rows = self.Xp.view(np.float32)        # 4-byte rows for gather_rows
            self.kappa = bf16_error_bound(d)
            self.pbuf = np.empty((cpu_row_block(n, k), self.Xp.shape[1]), dtype=np.float32)
        self.gamma = 2.0 * (d + 4) * float(torch.finfo(X.dtype).eps)
        self.labels = torch.zeros(n, dtype=torch.int64)
        self.upper = torch.zeros(n, dtype=torch.float64)
        self.uep = torch.zeros(n, dtype=torch.int32)
        self.lep = torch.zeros(n, dtype=torch.int32)
        self.L = torch.from_numpy(plain_pages((n, k), torch.float32, hp))
        self.lmin = torch.zeros(n, dtype=torch.float32)
        self.state = tuple(t.numpy() for t in (self.labels, self.upper, self.uep, self.L, self.lep, self.lmin))
        self.buf = None if self.bf16 else torch.from_numpy(      # gathered active rows (fp32 path)
            np.empty((cpu_row_block(n, k), d), dtype=self.Xn.dtype))
        self.snap: dict[int, torch.Tensor] = {}   # epoch -> the centres (float64) bounds refer to
        self.max_snaps = max(2, opts.snapshot_bytes // max(k * d * 8, 1))
        self.now = 0
        # Cluster statistics are kept about a point near the data's centre (the mean of a strided
        # sample: the algebra is exact for any shift, the shift only removes cancellation).
        self.mean = torch.from_numpy(np.ascontiguousarray(self.Xn[::max(1, n // 4096)].mean(axis=0, dtype=np.float64)))
        # ‖x‖² (bounds) and ‖x − mean‖² (statistics), float64 sums, in one pass over X
        sq = torch.from_numpy(self.Cn.sq_dist_to(self.Xn, torch.stack([torch.zeros_like(self.mean), self.mean]).numpy()))
        self.xn2, self.q = sq[:, 0].contiguous(), sq[:, 1].contiguous()
        self.S = self.Q = self.cnt = None
        self.moved = 1.0   # fraction of labels the last evaluation changed

    def evaluate(self, C: torch.Tensor, rows: torch.Tensor | None):
        """Re-evaluate `rows` (None: all) against every centre: labels and fresh bounds."""
        Cn, X, k = self.Cn, self.X, self.k
        cn = torch.from_numpy(np.einsum("ij,ij->i", C.numpy(), C.numpy()))   # small ops in NumPy: see step
        cmax = float(cn.max())
        Ct = C.t()
        m = X.shape[0] if rows is None else rows.numel()
        # bf16: row blocks whose G tile stays in cache for the refresh right after (our GEMM has no
        # per-call start-up to amortise, unlike torch's)
        B = min(cpu_row_block(m, k), BF16_ROW_BLOCK) if self.bf16 else cpu_row_block(m, k)
        self.f32p = (Cn.f32_pack_b(C.numpy()) if not self.bf16 and C.dtype == torch.float32
                     and hasattr(Cn, "gemm_f32") else None)
        if self.bf16:
            Cp = Cn.bf16_pack_b(C.numpy(), True)
            # E = eb·‖x‖·cnorm with eb = 1 and cnorm ≥ 2^-7 max‖c̃‖ + 2 max‖δc‖ + κ(1 + 2^-8) max‖c̃‖:
            # the bf16 bound of ops.kmeans with ‖δx‖ ≤ 2^-8‖x‖ (bf16's unit roundoff, per element)
            # and the largest centre terms, the only per-row quantity the refresh takes being ‖x‖
            _, cb, dcb, _ = bf16_centre_terms(C.numpy())
            cnorm = (((2.0 ** -7 + self.kappa * (1.0 + 2.0 ** -8)) * float(cb.max()) + 2.0 * float(dcb.max()))
                     * (1.0 + 2.0 ** -20))
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
                                 self.state, self.now, self.gamma, cmax, 1.0, cnorm)
                continue
            if rb is None:
                xb = X[i:i + B]
            else:
                xb = self.buf[:rb.numel()]
                Cn.gather_rows(self.Xn, rb.numpy(), xb.numpy())
            if self.f32p is not None:   # our fp32 tiles: no thread-pool barrier per call
                G = np.empty((xb.shape[0], k), dtype=np.float32)
                Cn.gemm_f32(xb.numpy(), self.f32p, k, G, -2.0, cn.numpy())
            else:
                G = torch.addmm(cn, xb, Ct, alpha=-2.0).numpy()
            Cn.elkan_refresh(G, self.Xn, C.numpy(), self.xn2.numpy(),
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
        """Assign every point to its nearest centre of C; returns the fraction re-evaluated.

        The (k, d) and (n,) bookkeeping here is done in NumPy: torch runs ops of this size on its
        thread pool, and on a machine shared with other jobs each of those parallel regions can wait
        for a preempted thread (a few dozen per iteration took a fifth of a subsampled fit, profiled)."""
        C = C.contiguous()
        Cd = torch.from_numpy(C.numpy().astype(np.float64))
        if not self.snap:
            self.snap[0] = Cd
            self.evaluate(C, None)
            self.full_stats()
            return 1.0
        self.now += 1
        self.snap[self.now] = Cd
        E = self.now + 1
        lep, uep = self.state[4], self.state[2]
        used = set(np.flatnonzero(np.bincount(lep, minlength=E) + np.bincount(uep, minlength=E)).tolist())
        for e in [e for e in self.snap if e not in used and e != self.now]:
            del self.snap[e]
        while len(self.snap) > self.max_snaps:
            self._merge_oldest()
        if self.moved > FILTER_SKIP_MOVED:
            # Early on nearly every bound fails anyway: evaluate every row without testing (the
            # bounds stay valid, only loose, so this is safe).
            active = None
        else:
            disp = np.zeros((self.now + 1, self.k), dtype=np.float64)
            Cdn = Cd.numpy()
            for e, Ce in self.snap.items():
                disp[e] = np.sqrt(np.square(Cdn - Ce.numpy()).sum(axis=1))
            active = torch.from_numpy(self.Cn.elkan_filter(self.Xn, C.numpy(), self.state, disp, self.now))
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
        n = self.cnt.numpy().astype(np.float64)
        mean = self.mean.numpy()
        Cc = C.numpy().astype(np.float64) - mean
        Sc = self.S.numpy() - n[:, None] * mean
        return float((self.Q.numpy() - 2.0 * np.einsum("ij,ij->i", Cc, Sc) + n * np.einsum("ij,ij->i", Cc, Cc)).sum())

    def assign(self, C: torch.Tensor) -> Assignment:
        """The driver's assigner: bounded assignment to C; the inertia comes from the centred
        cluster statistics, so it is read after the reduction."""
        frac = self.step(C)
        return Assignment(self.labels, lambda: self.inertia(C), frac)

    def reduce(self, labels, k: int):
        """The driver's reducer: the sums and counts ``assign`` kept up to date incrementally."""
        return self.S, self.cnt
