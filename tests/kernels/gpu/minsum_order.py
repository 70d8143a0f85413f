"""Error bounds of the GPU min-sum (meet cardinality) from each kernel's summation order.

Every term min(a, b) is ≥ 0, so Σ|terms| is the exact result S itself, and a float32 sum in which no
term passes through more than h roundings is within γ_h·S of S (γ_h = h·u / (1 − h·u), u = 2⁻²⁴;
Higham, Accuracy and Stability of Numerical Algorithms, §4.2). h follows from the kernel:

* CUDA (semiring.cu): each split adds its ⌈K/split⌉ terms (rounded up to an 8-step slab) one after
  another; fold_splits then adds the split partials in order: h ≤ ⌈K/split⌉ + 8 + split.
* Triton (kernels/semiring.py): each split sums BK-wide slabs with a tree (log₂ BK levels) and adds
  them one after another; torch sums the split partials: h ≤ ⌈K/split⌉/BK + log₂ BK + split, which the
  CUDA bound also covers.

Used by tests/kernels/gpu/test_gpu_ops.py (on a device) and by test_triton_gpu_limits.py, which
checks the bound against an exact CPU simulation of the CUDA order.
"""
from __future__ import annotations

import math

import numpy as np

U32 = 2.0 ** -24


def depth(K: int, split: int) -> int:
    """Largest number of roundings any term sees, for K terms in ``split`` sequential parts."""
    split = max(1, min(int(split), int(K)))
    return math.ceil(K / split) + 8 + split


def tolerance(exact: np.ndarray, K: int, split: int) -> np.ndarray:
    """Elementwise |float32 min-sum − exact| bound (exact: the float64 reference)."""
    h = depth(K, split)
    gamma = h * U32 / (1.0 - h * U32)
    return gamma * np.abs(exact) + 1e-30


def cuda_split_kps(M: int, N: int, K: int, split: int) -> tuple[int, int]:
    """(split, steps per split) exactly as semiring.cu's run() derives them (8-step slabs)."""
    split = max(1, min(int(split), K))
    kps = -(-K // split)
    kps = -(-kps // 8) * 8
    return -(-K // kps), kps


def simulate_cuda_minsum(A: np.ndarray, Bt: np.ndarray, split: int) -> np.ndarray:
    """semiring.cu's min-sum in its exact order, in float32: acc += min(a, b) for k ascending within
    each split, then the partials added in split order. A (M, K), Bt (N, K)."""
    A = np.asarray(A, dtype=np.float32)
    Bt = np.asarray(Bt, dtype=np.float32)
    M, K = A.shape
    split, kps = cuda_split_kps(M, Bt.shape[0], K, split)
    parts = []
    for s in range(split):
        acc = np.zeros((M, Bt.shape[0]), dtype=np.float32)
        for k in range(s * kps, min(K, (s + 1) * kps)):
            acc = acc + np.minimum(A[:, k, None], Bt[None, :, k])
        parts.append(acc)
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out
