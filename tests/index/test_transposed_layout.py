"""index.layout: the blocked transpose equals NumPy's, gathered columns included; the rows a delete keeps."""
from __future__ import annotations

import numpy as np
import pytest

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
