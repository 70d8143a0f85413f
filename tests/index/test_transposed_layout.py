"""index.layout.transposed: the blocked copy equals NumPy's transpose, gathered columns included."""
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
