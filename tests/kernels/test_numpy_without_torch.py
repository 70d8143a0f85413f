"""The ops a CPU query calls run NumPy input without importing torch, and still agree with the float64
reference: spread_hop ("cpu" and "ref") and the lattice ops, on odd shapes and edge cases (empty rows
and columns, padded seeds, 0-d and broadcast operands, float32 and float64). Each check runs in a
fresh interpreter, which must end without torch in ``sys.modules``; the same calls with torch tensors
in this process must give the same numbers."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import scipy.sparse as sp
    from contextrag import ops, ref

    rng = np.random.default_rng(7)
    worst, shapes = 0.0, 0
    for dtype in (np.float32, np.float64):
        for n, M, dens, Q, S in [(1, 1, 1.0, 1, 1), (7, 5, 0.4, 3, 2), (33, 17, 0.2, 5, 4), (130, 61, 0.1, 2, 7)]:
            I = sp.random(n, M, density=dens, format="csr", random_state=rng, dtype=np.float64)
            I.data = rng.choice([0.3, 0.55, 0.8, 1.0], size=I.nnz)
            I = sp.csr_matrix(I.multiply(np.arange(n)[:, None] % 5 != 2)).astype(dtype)    # empty rows
            I = sp.csr_matrix(I.multiply(np.arange(M)[None, :] % 7 != 3)).astype(dtype)    # empty columns
            doc = rng.integers(0, max(n // 3, 1), size=n)
            seeds = rng.integers(-1, n, size=(Q, S))                                        # -1: padding
            deg = rng.random((Q, S)).astype(dtype)
            mu = sp.random(Q, M, density=min(1.0, 4.0 / M), format="csr", random_state=rng).astype(dtype)
            want = ref.spread_hop(I, seeds, deg, mu.toarray(), doc)
            G = ops.SpreadIncidence(I, doc)
            for backend in ("cpu", "ref"):      # both always available (cpu: C++, or its NumPy fallback)
                got = ops.spread_hop(G, seeds, deg, mu, backend=backend)
                assert type(got) is np.ndarray and got.dtype == dtype and got.shape == (Q, n), (backend, got)
                worst = max(worst, float(np.abs(got - want).max()))
            shapes += 1
    for dtype in (np.float32, np.float64):
        a = rng.random((5, 1, 3)).astype(dtype)
        b = rng.random((4, 3)).astype(np.float32)
        for name in ("tnorm", "residuum"):
            got = getattr(ops, name)(a, b)
            assert type(got) is np.ndarray and got.shape == (5, 4, 3) and got.dtype == dtype, name
            worst = max(worst, float(np.abs(got - getattr(ref, name)(a, b)).max()))
        zero_d = ops.neg(np.asarray(dtype(0.25)))
        assert type(zero_d) is np.ndarray and zero_d.shape == () and float(zero_d) == 0.75
        A1, A2 = rng.random((3, 17)).astype(dtype), rng.random((3, 17)).astype(dtype)
        for name in ("soft_join", "soft_meet"):
            got = getattr(ops, name)(A1, A2)
            assert got.dtype == dtype
            worst = max(worst, float(np.abs(got - getattr(ref, name)(A1, A2)).max()))
    for bad, err in ((lambda: ops.soft_join(np.ones((2, 3)), np.ones((3, 2))), ValueError),
                     (lambda: ops.tnorm(np.full(3, 1.5), np.ones(3)), ValueError),
                     (lambda: ops.tnorm(np.ones(3, dtype=np.int64), np.ones(3)), TypeError),
                     (lambda: ops.tnorm(np.ones((2, 3)), np.ones((4, 3))), ValueError),
                     (lambda: ops.spread_hop(ops.SpreadIncidence(np.eye(3)), np.array([[0.5]]), np.ones((1, 1))),
                      TypeError)):
        try:
            bad()
        except err:
            pass
        else:
            raise AssertionError("no error")
    print(json.dumps({"worst": worst, "shapes": shapes,
                      "heavy": sorted(m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules)}))
""")


def test_cpu_ops_on_numpy_import_no_torch_and_match_reference():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["heavy"] == []
    assert res["shapes"] == 8
    assert res["worst"] < 1e-6


def test_numpy_and_torch_inputs_give_the_same_numbers(rng):
    torch = pytest.importorskip("torch")
    from contextrag import ops
    a, b = rng.random((6, 9)).astype(np.float32), rng.random((6, 9)).astype(np.float32)
    for name in ("tnorm", "residuum", "soft_join", "soft_meet"):
        np.testing.assert_array_equal(getattr(ops, name)(a, b),
                                      getattr(ops, name)(torch.from_numpy(a), torch.from_numpy(b)).numpy())
    np.testing.assert_array_equal(ops.neg(a), ops.neg(torch.from_numpy(a)).numpy())
    import scipy.sparse as sp
    I = sp.random(40, 12, density=0.3, format="csr", random_state=3, dtype=np.float32)
    G = ops.SpreadIncidence(I, np.arange(40) // 4)
    seeds, deg = np.array([[0, 5, -1], [39, 2, 7]]), np.array([[1.0, 0.8, 0.0], [0.9, 0.7, 0.6]], np.float32)
    np.testing.assert_array_equal(ops.spread_hop(G, seeds, deg),
                                  ops.spread_hop(G, torch.from_numpy(seeds), torch.from_numpy(deg)).numpy())
