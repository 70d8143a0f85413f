"""index.layout: the blocked transpose equals NumPy's, gathered columns included; the rows a delete keeps;
positions removed in place; CSR blocks stacked side by side."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from contextrag.index import layout
from contextrag.index.layout import transposed


@pytest.mark.parametrize("shape", [(0, 3), (1, 1), (5, 0), (7, 3), (4097, 5), (33, 130)])
@pytest.mark.parametrize("block", [1, 3, 4096])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_transposed_equals_numpy(shape, block, dtype):
    rng = np.random.default_rng(sum(shape) + block)
    a = (rng.random(shape) * 100).astype(dtype)
    got = transposed(a, block=block)
    assert got.flags["C_CONTIGUOUS"] and got.dtype == a.dtype
    np.testing.assert_array_equal(got, a.T)
    if shape[1]:
        cols = rng.integers(0, shape[1], size=shape[1] + 2)     # repeated and unordered columns
        np.testing.assert_array_equal(transposed(a, cols, block=block), a[:, cols].T)
    np.testing.assert_array_equal(transposed(a[::2], block=block), a[::2].T)    # a strided view


def test_transposed_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        transposed(np.zeros(3))
    with pytest.raises(ValueError, match="block"):
        transposed(np.zeros((2, 2)), block=0)


@pytest.mark.parametrize("keep", [[], [0], [5], [0, 1, 2, 3, 4, 5], [1, 2, 4], [0, 5], [3]])
def test_kept_rows_equal_a_mask_over_every_entry(keep):
    from contextrag.index.layout import kept_rows
    lens = np.array([3, 0, 2, 5, 0, 1])
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    data = np.arange(indptr[-1], dtype=np.uint8) + 7
    keep = np.asarray(keep, np.int64)
    ptr, got = kept_rows(indptr, data, keep)
    mask = np.zeros(lens.size, bool)
    mask[keep] = True
    np.testing.assert_array_equal(got, data[np.repeat(mask, lens)])
    np.testing.assert_array_equal(ptr, np.concatenate([[0], np.cumsum(lens[keep])]))
    assert got.dtype == data.dtype


@pytest.mark.parametrize("many", [False, True])
def test_postings_without_positions_moved_in_place(many):
    """The kept postings are moved left within their own array (a view of it), as np.delete gives
    them: first, last and adjacent positions, none; many positions take the vectorised path."""
    rng = np.random.default_rng(3)
    n = 10_000
    cases = [np.zeros(0, np.int64), np.array([0]), np.array([n - 1]), np.array([0, 1, 2, n - 2, n - 1]),
             np.unique(rng.integers(0, n, 700))]
    if many:
        cases = [np.unique(rng.integers(0, n, 7000))]      # x 14 below: over 65,536 positions, vectorised
    for gone in cases:
        a = rng.integers(0, 1000, n).astype(np.int32)
        want = np.delete(a, gone)
        if many:
            big = np.repeat(a, 14)
            pos = np.sort(np.concatenate([gone * 14 + k for k in range(14)]))
            assert pos.size > 65536
            got = layout.without_positions(big, pos)
            np.testing.assert_array_equal(got, np.repeat(want, 14))
        else:
            got = layout.without_positions(a, gone)
            np.testing.assert_array_equal(got, want)
            assert np.shares_memory(got, a)


@pytest.mark.parametrize("rows_at_once", [1, 5, 1 << 16])
def test_families_stacked_side_by_side_equal_scipy(monkeypatch, rows_at_once):
    """The union's rows written block by block equal scipy's hstack: entries, order, index dtypes;
    empty rows, empty blocks and a block with no columns included."""
    monkeypatch.setattr(layout, "_STACK_ROWS", rows_at_once)
    rng = np.random.default_rng(5)
    for widths, density in (([7, 0, 13], 0.2), ([40], 0.05), ([3, 5], 0.0), ([9, 11, 2], 0.6)):
        mats = [sp.random(23, w, density=density, format="csr", dtype=np.float32, random_state=int(rng.integers(1 << 30)))
                if w else sp.csr_matrix((23, 0), dtype=np.float32) for w in widths]
        got, want = layout.hstack_rows(mats), sp.hstack(mats, format="csr", dtype=np.float32)
        assert got.shape == want.shape and got.has_sorted_indices
        for k in ("indptr", "indices", "data"):
            assert getattr(got, k).dtype == getattr(want, k).dtype, k
            np.testing.assert_array_equal(getattr(got, k), getattr(want, k), err_msg=k)
    with pytest.raises(ValueError, match="same rows"):
        layout.hstack_rows([sp.csr_matrix((2, 3)), sp.csr_matrix((3, 3))])
