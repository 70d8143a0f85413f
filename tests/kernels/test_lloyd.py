"""The shared Lloyd driver (ops.lloyd) with fake assigners and reducers: what every executor
(local CPU, batched GPU, Ray) relies on, independent of where the rows live."""
import numpy as np
import pytest
import torch

from contextrag import ops, ref
from contextrag.ops import lloyd as L


def _problem(rng, n=211, d=5, k=6):
    X = rng.standard_normal((n, d))
    C0 = X[rng.choice(n, k, replace=False)].copy()
    return torch.from_numpy(X), torch.from_numpy(C0)


class FakeExecutor:
    """Assigns with float64 brute force and keeps labels 'remote' (a handle), as a shard would."""

    def __init__(self, X):
        self.X, self.calls, self.store = X, [], {}

    def assign(self, C):
        D = torch.cdist(self.X, C) ** 2
        d2, lab = D.min(dim=1)
        h = len(self.calls)
        self.store[h] = lab
        self.calls.append("assign")
        return L.Assignment(h, lambda: float(d2.sum()))   # a handle, and the sum read after the reduction

    def reduce(self, handle, k):
        self.calls.append("reduce")
        lab = self.store.pop(handle)
        sums = torch.zeros((k, self.X.shape[1]), dtype=torch.float64).index_add_(0, lab, self.X)
        return sums, torch.bincount(lab, minlength=k)


def test_driver_with_fake_assigner_and_reducer_matches_reference(rng):
    X, C0 = _problem(rng)
    ex = FakeExecutor(X)
    C, it = L.lloyd(C0.clone(), ex.assign, ex.reduce, n_iter=30, tol=0.0)
    assert ex.calls == ["assign", "reduce"] * it and not ex.store
    C_ref, lab_ref, _, it_ref = ref.kmeans_fit(X.numpy(), 6, n_iter=30, tol=0.0, init=C0.numpy())
    assert it == it_ref
    np.testing.assert_allclose(C.numpy(), C_ref, rtol=1e-12, atol=1e-12)
    # the same as the public fit's plain loop
    res = ops.kmeans_fit(X.numpy(), 6, n_iter=30, tol=0.0, init=C0.numpy(), max_points_per_centroid=None,
                         options=ops.LloydOptions(bounded=False))
    np.testing.assert_allclose(res.centroids, C.numpy(), rtol=1e-12, atol=1e-12)


def test_driver_stops_by_tolerance_and_records_statistics():
    inert = iter([10.0, 5.0, 4.99, 4.98, 1.0])
    C = torch.zeros((2, 1), dtype=torch.float64)
    stats = [99.0]

    def assign(C):
        return L.Assignment(None, next(inert), 0.25)

    def reduce(labels, k):
        return torch.ones((k, 1), dtype=torch.float64), torch.ones(k, dtype=torch.int64)

    C, it = L.lloyd(C, assign, reduce, n_iter=10, tol=0.01, stats=stats)
    assert it == 3                       # 5.0 -> 4.99 fell by 0.2% <= 1%
    assert stats == [0.25, 0.25]         # cleared, then one entry per iteration after the first
    assert C.tolist() == [[1.0], [1.0]]


def test_driver_splits_empty_clusters_through_the_reducer():
    def assign(C):
        return L.Assignment(torch.zeros(4, dtype=torch.int64), torch.ones(4))

    def reduce(labels, k):
        return torch.tensor([[8.0, 4.0], [0.0, 0.0]], dtype=torch.float64), torch.tensor([4, 0])

    C, it = L.lloyd(torch.zeros((2, 2), dtype=torch.float64), assign, reduce, n_iter=1, tol=0.0)
    assert it == 1
    eps = ref.kmeans.SPLIT_EPS
    np.testing.assert_allclose(C.numpy(), [[2 * (1 - eps), 1 * (1 + eps)], [2 * (1 + eps), 1 * (1 - eps)]])


def test_driver_segments_stop_independently(rng):
    """Two problems in one concatenated codebook (the batched executor): each one's result is what it
    gets alone, and a problem that stopped keeps its centroids while the other goes on."""
    X1, C1 = _problem(rng, 150, 4, 3)
    X2, C2 = _problem(rng, 90, 4, 5)
    singles = []
    for X, C in ((X1, C1), (X2, C2)):
        ex = FakeExecutor(X)
        singles.append(L.lloyd(C.clone(), ex.assign, ex.reduce, n_iter=40, tol=1e-3))
    T = torch.cat([X1, X2])
    prob = torch.repeat_interleave(torch.arange(2), torch.tensor([150, 90]))
    off = torch.tensor([0, 3])
    seen = []

    def assign(C):
        d2s, labs = [], []
        for p, (X, a, b) in enumerate(((X1, 0, 3), (X2, 3, 8))):
            D = torch.cdist(X, C[a:b]) ** 2
            d2, lab = D.min(dim=1)
            d2s.append(d2)
            labs.append(lab)
        lab = torch.cat(labs) + off[prob]
        seen.append(C.clone())
        return L.Assignment(lab, [float(d.sum()) for d in d2s])

    def reduce(lab, k):
        return torch.zeros((k, 4), dtype=torch.float64).index_add_(0, lab, T), torch.bincount(lab, minlength=k)

    C, it = L.lloyd(torch.cat([C1, C2]), assign, reduce, n_iter=40, tol=1e-3, segments=[(0, 3), (3, 8)])
    np.testing.assert_allclose(C[:3].numpy(), singles[0][0].numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(C[3:].numpy(), singles[1][0].numpy(), rtol=1e-12, atol=1e-12)
    assert it == max(singles[0][1], singles[1][1]) and singles[0][1] != singles[1][1]
    short = 0 if singles[0][1] < singles[1][1] else 1
    sl = slice(0, 3) if short == 0 else slice(3, 8)
    assert torch.equal(seen[-1][sl], C[sl])   # frozen after it stopped


def test_driver_with_no_live_segment_returns_at_once():
    def boom(C):
        raise AssertionError("no problem to assign")
    C, it = L.lloyd(torch.ones((0, 3)), boom, boom, n_iter=5, tol=0.0, segments=[(0, 0)])
    assert it == 0 and C.shape == (0, 3)


def test_labels_on_another_device_are_rejected():
    from contextrag.ops import _kmeans_gpu
    lab = torch.tensor([0, 1, 2])
    assert _kmeans_gpu.check_labels(lab, 3, 3, torch.device("cpu")).device.type == "cpu"
    with pytest.raises(ValueError, match=r"labels must be on X's device cpu, got meta"):
        _kmeans_gpu.check_labels(lab.to("meta"), 3, 3, torch.device("cpu"))
