"""Shard layout, row-exact distance pass and the ordered reduction, without Ray."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from contextrag import ops
from contextrag.distributed.layout import MIN_GEMM_ROWS, global_segments, rowexact, shard_bounds
from contextrag.ops.kmeans import ROW_BLOCK


@pytest.mark.parametrize("n,s", [(0, 1), (1, 3), (10, 3), (2000, 2), (ROW_BLOCK + 3, 2), (3 * ROW_BLOCK + 7, 5)])
def test_shard_bounds_tile_rows(n, s):
    b = shard_bounds(n, s)
    assert len(b) == s and b[0][0] == 0 and b[-1][1] == n
    assert all(b[i][1] == b[i + 1][0] and b[i][0] <= b[i][1] for i in range(s - 1))
    tail = n % ROW_BLOCK
    if n > ROW_BLOCK and 0 < tail < MIN_GEMM_ROWS:   # the short last global block is never cut
        assert not any(n - tail < a < n for a, _ in b)


def test_shard_bounds_follow_documents():
    doc = [i // 7 for i in range(100)] + [100 + i // 3 for i in range(50)]
    b = shard_bounds(len(doc), 4, doc_ids=doc)
    for a, _ in b[1:]:
        assert a in (0, len(doc)) or doc[a] != doc[a - 1]
    with pytest.raises(ValueError, match="doc_ids"):
        shard_bounds(10, 2, doc_ids=[0] * 9)
    with pytest.raises(ValueError, match="n_shards"):
        shard_bounds(10, 0)


def test_global_segments_cover_shard():
    n_total = 3 * ROW_BLOCK + 5
    segs = list(global_segments(ROW_BLOCK - 4, ROW_BLOCK + 10, n_total))
    assert segs[0] == (0, 4, ROW_BLOCK)
    assert segs[1] == (4, ROW_BLOCK + 4, ROW_BLOCK)
    assert segs[2] == (ROW_BLOCK + 4, ROW_BLOCK + 10, ROW_BLOCK)


@pytest.mark.parametrize("cuts", [[0, 1000, 2003], [0, 3, 9, 2003], [0, 1, 2, 1500, 2003]])
def test_rowexact_assign_is_bitwise_the_single_process_pass(cuts):
    """Shards of any size (even 1-3 rows, where BLAS switches kernels) label and measure each row
    with the same bits as one assignment over all rows."""
    rng = np.random.default_rng(3)
    X = torch.from_numpy(rng.standard_normal((2003, 48)).astype(np.float32))
    C = torch.from_numpy(rng.standard_normal((17, 48)).astype(np.float32))
    from contextrag.ops._backend import select
    from contextrag.ops._registry import IMPLS
    _, assign = select("kmeans_assign", X.device, None, IMPLS["kmeans_assign"])
    lab, d2 = assign(X, C)
    parts = [rowexact(assign, X[a:b], a, len(X), C) for a, b in zip(cuts[:-1], cuts[1:])]
    assert torch.equal(torch.cat([p[0] for p in parts]), lab)
    assert torch.equal(torch.cat([p[1] for p in parts]), d2)


def test_ordered_fold_of_shard_workers_equals_index_add(tmp_path):
    """Three ShardWorkers (plain objects, no Ray) chained by ``fold`` along the reduction plan give the
    single-process ``kmeans_update`` sums bit for bit (torch index_add_ or the native per-thread
    sums), and so do independent float64 partials ('tree')."""
    from contextrag.distributed.cluster import write_shards
    from contextrag.distributed.kmeans import _pieces, reduction_plan
    from contextrag.distributed.worker import ShardWorker
    rng = np.random.default_rng(5)
    X = (rng.standard_normal((3001, 32)) * 10).astype(np.float32)
    C = X[:11].copy()
    specs = write_shards(X, str(tmp_path), 3)
    ws = [ShardWorker(s.shard_id, s.path, s.start, s.stop, len(X), str(tmp_path / f"st{s.shard_id}"))
          for s in specs]
    lab, _ = ops.kmeans_assign(X, C)
    from contextrag.ops._backend import select
    from contextrag.ops._registry import IMPLS
    _, update = select("kmeans_update", torch.device("cpu"), None, IMPLS["kmeans_update"])
    ref, ref_counts = update(torch.from_numpy(X), torch.from_numpy(lab), 11)   # the single-process sums

    class _S:  # what _pieces reads
        pass
    sh = _S()
    sh.specs = specs
    plan = reduction_plan(len(X))
    pieces = _pieces(sh, [None] * 3, plan)
    carry, outs = None, []
    for w, pc in zip(ws, pieces):
        out = w.fold(0, 1, [], C, None, pc, carry, "ordered")
        outs.append(out)
        carry = out
    final = {}
    for o in outs:
        final.update(o[0])
    sums = torch.zeros((11, 32), dtype=torch.float64)    # the chain carries float64 sums
    for seg in range(len(plan)):
        if seg in final:
            sums += torch.from_numpy(final[seg])
    assert torch.equal(sums, ref)
    assert np.array_equal(np.sum([o[1] for o in outs], axis=0), ref_counts.numpy())
    # float64 sums of float32 values this size are exact, so any association of the same additions
    # (another shard order, or the 'tree' partials) gives the same bits
    naive = sum(torch.zeros((11, 32), dtype=torch.float64).index_add_(
        0, torch.from_numpy(lab[s.start:s.stop]), torch.from_numpy(X[s.start:s.stop]).double()) for s in specs[::-1])
    assert torch.equal(naive, ref)
    tree = sum(w.fold(0, 2, [], C, None, None, None, "tree")[0][0] for w in ws)
    np.testing.assert_array_equal(tree, ref.numpy())


def test_reduction_plan_matches_native_centroid_sums():
    """If the native parallel centroid sums are present, the plan's segments reproduce them exactly."""
    from contextrag.ops._backend import native
    Cn = native()
    if Cn is None or not hasattr(Cn, "centroid_sums") or not hasattr(Cn, "omp_max_threads"):
        pytest.skip("contextrag._C without centroid_sums")
    rng = np.random.default_rng(9)
    X = rng.standard_normal((1001, 24)).astype(np.float32)
    lab = rng.integers(0, 7, 1001).astype(np.int64)
    sums, counts = Cn.centroid_sums(X, lab, 7)     # float32 accumulation (the float64 one is exact)
    nt = int(Cn.omp_max_threads())
    q, r = divmod(len(X), nt)
    acc = torch.zeros((7, 24))
    for t in range(nt):
        a = t * q + min(t, r)
        b = a + q + (1 if t < r else 0)
        part = torch.zeros((7, 24)).index_add_(0, torch.from_numpy(lab[a:b]), torch.from_numpy(X[a:b]))
        acc += part
    assert np.array_equal(acc.numpy(), sums)
    assert np.array_equal(counts, np.bincount(lab, minlength=7))


def test_documents_must_stay_in_one_shard():
    from contextrag.distributed.layout import check_documents_whole
    check_documents_whole([{"doc_ids": ["a", "a", "b"]}, {"doc_ids": []}, {"doc_ids": ["c", "d", "d"]}])
    with pytest.raises(ValueError, match="spans shards"):
        check_documents_whole([{"doc_ids": ["a", "b"]}, {"doc_ids": ["b", "c"]}])
    with pytest.raises(ValueError, match="not contiguous"):
        check_documents_whole([{"doc_ids": ["a", "b"]}, {"doc_ids": ["c", "a"]}])
    doc = [f"d{i // 5}" for i in range(103)]
    b = shard_bounds(len(doc), 3, doc_ids=doc)
    check_documents_whole([{"doc_ids": doc[x:y]} for x, y in b])
