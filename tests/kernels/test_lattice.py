"""The lattice family, elementwise: tnorm / residuum / neg (eq. 4-5) and soft_join / soft_meet
(eq. 8-9) against contextrag.ref. Each output is one rounding of one operation, so exact."""
import numpy as np
import pytest

from contextrag import ops, ref
from kernel_helpers import KINDS, as_kind, check_kind, fuzzy, to_numpy


@pytest.mark.parametrize("kind", KINDS)
def test_kinds(rng, kind):
    A = fuzzy(rng, (8, 30))
    B = fuzzy(rng, (8, 30))
    for name in ("tnorm", "residuum", "soft_join", "soft_meet"):
        out = getattr(ops, name)(as_kind(A, kind), as_kind(B, kind))
        check_kind(out, kind)
        np.testing.assert_array_equal(to_numpy(out), getattr(ref, name)(A, B), err_msg=name)
    out = ops.neg(as_kind(A, kind))
    check_kind(out, kind)
    np.testing.assert_array_equal(to_numpy(out), ref.neg(A))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcasting_and_dtype(rng, dtype):
    a = fuzzy(rng, (5, 1, 7), dtype)
    b = fuzzy(rng, (3, 1), dtype)
    for name in ("tnorm", "residuum"):
        out = getattr(ops, name)(a, b)
        assert out.shape == (5, 3, 7) and out.dtype == dtype
        want = getattr(ref, name)(a, b)
        if dtype == np.float64:
            np.testing.assert_array_equal(out, want)
        else:   # one float32 rounding of a + b, then of − 1
            np.testing.assert_allclose(out, want, rtol=0, atol=2 * np.finfo(np.float32).eps)
    assert ops.tnorm(np.array(0.75), np.array(0.5)) == 0.25   # 0-d arrays


def test_bounds():
    a = np.array([0.0, 0.3, 1.0, 1.0])
    b = np.array([0.0, 0.6, 0.0, 1.0])
    np.testing.assert_array_equal(ops.tnorm(a, b), [0.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(ops.residuum(a, b), [1.0, 1.0, 0.0, 1.0])
    np.testing.assert_array_equal(ops.neg(a), [1.0, 0.7, 0.0, 0.0])


def test_join_meet_shapes_rejected():
    with pytest.raises(ValueError, match="A1 and A2"):
        ops.soft_join(np.zeros((2, 3)), np.zeros((3, 2)))
