"""ops.spread_hop: every backend against the float64 reference (contextrag.ref.spread_hop).

Odd shapes, empty rows (chunks with no attribute) and columns (attributes of no chunk), padded seed
lists, batched queries with and without μ and the no-sibling rule. Triton runs in a subprocess under
TRITON_INTERPRET=1 (small shapes); CUDA runs when a device is visible and otherwise only checks that
the kernel was compiled.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import contextrag.ops as ops
from contextrag import ref
from contextrag.ops._backend import availability


def _case(rng, n, M, density, Q, S, *, with_mu=True, with_doc=True, dtype=np.float32):
    I = sp.random(n, M, density=density, format="csr", random_state=rng, dtype=np.float64)
    I.data = rng.choice([0.3, 0.55, 0.8, 0.95, 1.0], size=I.nnz)   # exact ties and degree-1 entries
    I = I.astype(dtype)
    if n > 3:
        I = sp.csr_matrix(I.multiply(np.arange(n)[:, None] % 5 != 2))   # empty rows
    if M > 3:
        I = sp.csr_matrix(I.multiply(np.arange(M)[None, :] % 7 != 3))   # empty columns
    doc = rng.integers(0, max(n // 3, 1), size=n) if with_doc else None
    seeds = rng.integers(-1, n, size=(Q, S))                            # -1: padding
    deg = rng.random((Q, S)).astype(dtype)
    deg[:, 0] = 1.0
    mu = None
    if with_mu:
        mu = sp.random(Q, M, density=min(1.0, 4.0 / max(M, 1)), format="csr", random_state=rng, dtype=np.float64)
        mu = mu.astype(dtype)
    return I, doc, seeds, deg, mu


def _ref(I, doc, seeds, deg, mu):
    return ref.spread_hop(I, seeds, deg, None if mu is None else mu.toarray(), doc)


SHAPES = [(1, 1, 1.0, 1, 1), (7, 5, 0.4, 3, 2), (33, 17, 0.2, 5, 4), (64, 129, 0.05, 9, 5), (130, 61, 0.1, 2, 7)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_mu,with_doc", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("backend", [b for b in ("ref", "cpu") if availability()[b][0]])
def test_matches_reference(rng, shape, with_mu, with_doc, backend):
    n, M, dens, Q, S = shape
    I, doc, seeds, deg, mu = _case(rng, n, M, dens, Q, S, with_mu=with_mu, with_doc=with_doc)
    G = ops.SpreadIncidence(I, doc)
    out = ops.spread_hop(G, seeds, deg, mu, backend=backend)
    assert out.shape == (Q, n) and out.dtype == np.float32
    np.testing.assert_allclose(out, _ref(I, doc, seeds, deg, mu), atol=1e-6, rtol=0)


def test_float64_is_exact(rng):
    I, doc, seeds, deg, mu = _case(rng, 40, 23, 0.2, 4, 3, dtype=np.float64)
    out = ops.spread_hop(ops.SpreadIncidence(I, doc), seeds, deg, mu, backend="cpu")
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, _ref(I, doc, seeds, deg, mu), atol=1e-12, rtol=0)


def test_cpu_equals_the_numpy_gather_bit_for_bit(rng):
    from contextrag.ops.spread import gather_py
    I, doc, seeds, deg, mu = _case(rng, 90, 40, 0.1, 6, 5)
    G = ops.SpreadIncidence(I, doc)
    fast = ops.spread_hop(G, seeds, deg, mu, backend="cpu")
    slow = gather_py(G, torch.from_numpy(seeds), torch.from_numpy(deg), sp.csr_matrix(mu, dtype=np.float32))
    assert np.array_equal(fast, slow)


def test_no_sibling_rule_by_hand():
    # chunks 0, 1 in document 0, chunk 2 in document 1; all share attribute 0 with degree 1
    I = sp.csr_matrix(np.array([[1.0], [1.0], [1.0]], np.float32))
    G = ops.SpreadIncidence(I, np.array([0, 0, 1]))
    out = ops.spread_hop(G, np.array([[0]]), np.array([[0.75]], np.float32))
    np.testing.assert_allclose(out, [[0.75, 0.0, 0.75]])        # the seed keeps its own, sibling gets nothing
    out = ops.spread_hop(ops.SpreadIncidence(I), np.array([[0]]), np.array([[0.75]], np.float32))
    np.testing.assert_allclose(out, [[0.75, 0.75, 0.75]])       # no doc: no rule
    mu = np.array([[0.5]], np.float32)                          # μ has no sibling rule, ⊗ with 1 keeps 0.5
    out = ops.spread_hop(G, np.array([[-1]]), np.array([[0.0]], np.float32), mu)
    np.testing.assert_allclose(out, [[0.5, 0.5, 0.5]])


def test_empty_batch_and_empty_incidence(rng):
    G = ops.SpreadIncidence(sp.csr_matrix((5, 0), dtype=np.float32))
    out = ops.spread_hop(G, np.zeros((2, 3), np.int64), np.ones((2, 3), np.float32))
    assert out.shape == (2, 5) and not out.any()
    G = ops.SpreadIncidence(sp.random(6, 4, density=0.5, format="csr", random_state=rng, dtype=np.float32))
    out = ops.spread_hop(G, np.zeros((0, 2), np.int64), np.zeros((0, 2), np.float32))
    assert out.shape == (0, 6)


def test_torch_in_torch_out(rng):
    I, doc, seeds, deg, mu = _case(rng, 20, 11, 0.3, 3, 2)
    out = ops.spread_hop(ops.SpreadIncidence(I, doc), torch.from_numpy(seeds), torch.from_numpy(deg), mu)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), _ref(I, doc, seeds, deg, mu), atol=1e-6)


def test_bad_input_raises_clear_errors(rng):
    I = sp.random(6, 4, density=0.5, format="csr", random_state=rng, dtype=np.float32)
    G = ops.SpreadIncidence(I)
    with pytest.raises(TypeError, match="SpreadIncidence"):
        ops.spread_hop(I, np.zeros((1, 1), np.int64), np.ones((1, 1), np.float32))
    with pytest.raises(ValueError, match="seeds must be chunk indices"):
        ops.spread_hop(G, np.array([[6]]), np.ones((1, 1), np.float32))
    with pytest.raises(ValueError, match="one shape"):
        ops.spread_hop(G, np.zeros((1, 2), np.int64), np.ones((1, 1), np.float32))
    with pytest.raises(ValueError, match="seed_deg must hold degrees"):
        ops.spread_hop(G, np.zeros((1, 1), np.int64), np.full((1, 1), 1.5, np.float32))
    with pytest.raises(ValueError, match=r"mu must be \(Q, M\)"):
        ops.spread_hop(G, np.zeros((1, 1), np.int64), np.ones((1, 1), np.float32), np.ones((1, 5), np.float32))
    with pytest.raises(TypeError, match="seeds must be an integer"):
        ops.spread_hop(G, np.zeros((1, 1)), np.ones((1, 1), np.float32))
    bad = I.copy()
    bad.data[:] = 2.0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ops.SpreadIncidence(bad)
    with pytest.raises(ValueError, match="doc must be an integer array"):
        ops.SpreadIncidence(I, np.zeros(5, np.int64))


# ---- Triton (interpreter) and CUDA --------------------------------------------------------------

_TRITON_SNIPPET = r"""
import numpy as np, scipy.sparse as sp, torch, contextrag.ops as ops
from contextrag import ref
rng = np.random.default_rng(7)
done = 0
for n, M, dens, Q, S, mu_on, doc_on in [(1, 1, 1.0, 1, 1, True, True), (9, 6, 0.4, 2, 3, True, True),
                                        (23, 13, 0.25, 3, 2, False, True), (17, 150, 0.05, 2, 4, True, False)]:
    I = sp.random(n, M, density=dens, format="csr", random_state=rng, dtype=np.float32)
    I.data = rng.choice([0.3, 0.8, 1.0], size=I.nnz).astype(np.float32)
    doc = rng.integers(0, max(n // 3, 1), size=n) if doc_on else None
    seeds = rng.integers(-1, n, size=(Q, S)); deg = rng.random((Q, S)).astype(np.float32)
    mu = sp.random(Q, M, density=0.3, format="csr", random_state=rng, dtype=np.float32) if mu_on else None
    out = ops.spread_hop(ops.SpreadIncidence(I, doc), torch.from_numpy(seeds), torch.from_numpy(deg), mu,
                         backend="triton")
    want = ref.spread_hop(I, seeds, deg, None if mu is None else mu.toarray(), doc)
    np.testing.assert_allclose(out.numpy(), want, atol=1e-6)
    done += 1
print("TRITON_OK", done)
"""


def _lexsort_order(indptr, data):
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return np.lexsort((-data.astype(np.float64), rows))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_by_degree_sorts_only_the_rows_out_of_order(rng, dtype):
    """The columns' decreasing-degree order equals one stable sort of every row, whether a row is
    already in order (left as it is), out of order, tied, empty or a single entry."""
    from contextrag.ops.spread import _apply_moves, _by_degree

    def as_order(moves):            # the moves applied to the identity: the permutation they make
        order = np.arange(data.size if moves is None else int(indptr[-1]))
        _apply_moves(moves, order)
        return order
    lens = rng.integers(0, 9, size=200)
    lens[::17] = 0
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    data = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=int(indptr[-1])).astype(dtype)
    for r in range(0, 200, 3):              # every third row already in decreasing order
        a, b = indptr[r], indptr[r + 1]
        data[a:b] = np.sort(data[a:b])[::-1]
    moves = _by_degree(indptr, data)
    assert moves is not None
    order = as_order(moves)
    np.testing.assert_array_equal(order, _lexsort_order(indptr, data))
    unsorted = [np.arange(indptr[r], indptr[r + 1]) for r in range(200)
                if np.any(np.diff(data[indptr[r]:indptr[r + 1]]) > 0)]
    np.testing.assert_array_equal(moves[0], np.concatenate(unsorted))     # only the rows out of order move
    ordered = data[order]
    assert _by_degree(indptr, ordered) is None
    assert _by_degree(np.zeros(1, np.int64), np.zeros(0, dtype)) is None
    # a rise across a row boundary is not out of order
    assert _by_degree(np.array([0, 1, 2], np.int64), np.array([0.1, 0.9], dtype)) is None
    dst, src = _by_degree(np.array([0, 2], np.int64), np.array([0.1, 0.9], dtype))
    np.testing.assert_array_equal(dst, [0, 1])
    np.testing.assert_array_equal(src, [1, 0])


@pytest.mark.parametrize("shape", SHAPES)
def test_from_transposed_equals_the_constructor(rng, shape):
    n, M, density = shape[:3]
    I, doc, *_ = _case(rng, n, M, density, 1, 1)
    I = sp.csr_matrix(I)
    I.sum_duplicates()
    T = I.T.tocsr()
    T.sort_indices()
    want = ops.SpreadIncidence(I, doc).to_arrays()
    got = ops.SpreadIncidence.from_transposed(I, T, doc).to_arrays()
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    with pytest.raises(ValueError, match="transpose"):
        ops.SpreadIncidence.from_transposed(I, sp.csr_matrix((M + 1, n), dtype=I.dtype), doc)
    with pytest.raises(TypeError, match="CSR"):
        ops.SpreadIncidence.from_transposed(I.toarray(), T, doc)
    if I.nnz:
        bad = I.copy()
        bad.data[0] = 1.5
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            ops.SpreadIncidence.from_transposed(bad, T, doc)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_int32_and_int64_indices_give_the_same_hop(rng, dtype):
    """An incidence keeps int32 indices where its shape fits them; the same arrays widened to int64
    (as indexes stored before) give the same hop bit for bit, on the native kernel of each index
    dtype and on the NumPy gather; mixed index dtypes are refused when loaded."""
    from contextrag.ops._backend import native
    from contextrag.ops.spread import gather_py
    C = native()
    if C is not None:       # the int32 hop runs natively, not through the NumPy fallback
        assert hasattr(C, "spread_hop_f32_i32") and hasattr(C, "spread_hop_f64_i32")
    I, doc, seeds, deg, mu = _case(rng, 120, 45, 0.1, 5, 4, dtype=dtype)
    G = ops.SpreadIncidence(I, doc)
    assert G.indices.dtype == G.t_indices.dtype == np.int32
    assert G.indptr.dtype == G.t_indptr.dtype == np.int64
    wide = G.to_arrays()
    wide["indices"], wide["t_indices"] = wide["indices"].astype(np.int64), wide["t_indices"].astype(np.int64)
    G64 = ops.SpreadIncidence.from_arrays(wide)
    a = ops.spread_hop(G, seeds, deg, mu, backend="cpu")
    b = ops.spread_hop(G64, seeds, deg, mu, backend="cpu")
    assert np.array_equal(a, b)
    slow = gather_py(G, torch.from_numpy(seeds), torch.from_numpy(deg), sp.csr_matrix(mu, dtype=dtype))
    assert np.array_equal(a, slow)
    np.testing.assert_allclose(a, _ref(I, doc, seeds, deg, mu), atol=1e-6 if dtype == np.float32 else 1e-12, rtol=0)
    wide["indices"] = wide["indices"].astype(np.int32)
    with pytest.raises(ValueError, match="both int32 or both int64"):
        ops.SpreadIncidence.from_arrays(wide)


def test_from_transposed_leaves_the_callers_transpose_unless_given(rng):
    """Putting the columns in degree order copies T's arrays unless the caller gives T away
    (``t_owned``), when they are reordered in place; both give the constructor's arrays."""
    I, doc, *_ = _case(rng, 200, 30, 0.2, 1, 1)
    I = sp.csr_matrix(I)
    I.sum_duplicates()
    I.data = rng.random(I.nnz).astype(np.float32)       # columns far from degree order
    T = I.T.tocsr()
    T.sort_indices()
    before = T.indices.copy(), T.data.copy()
    want = ops.SpreadIncidence(I, doc).to_arrays()
    kept = ops.SpreadIncidence.from_transposed(I, T, doc)
    assert np.array_equal(T.indices, before[0]) and np.array_equal(T.data, before[1])
    given = ops.SpreadIncidence.from_transposed(I, T, doc, t_owned=True)
    assert given.t_data is T.data and not np.array_equal(T.data, before[1])
    for G in (kept, given):
        got = G.to_arrays()
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_triton_under_interpreter():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1")
    env.pop("CONTEXTRAG_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", _TRITON_SNIPPET], env=env, capture_output=True, text=True,
                          timeout=600, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "TRITON_OK 4" in proc.stdout


def test_cuda_kernel_compiled_when_nvcc_present():
    C = pytest.importorskip("contextrag._C")
    if shutil.which("nvcc") is None or os.environ.get("CONTEXTRAG_CUDA", "AUTO").upper() == "OFF" \
            or not C.cuda_compiled():
        pytest.skip("contextrag._C built without CUDA")
    assert callable(C.cuda.spread_hop)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_gpu_matches_reference(rng, backend):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    if not availability()[backend][0]:
        pytest.skip(f"{backend} unavailable: {availability()[backend][1]}")
    for shape in SHAPES + [(5000, 3000, 0.002, 64, 5)]:
        n, M, dens, Q, S = shape
        I, doc, seeds, deg, mu = _case(rng, n, M, dens, Q, S)
        out = ops.spread_hop(ops.SpreadIncidence(I, doc), torch.from_numpy(seeds).cuda(),
                             torch.from_numpy(deg).cuda(), mu, backend=backend)
        np.testing.assert_allclose(out.cpu().numpy(), _ref(I, doc, seeds, deg, mu), atol=1e-6)
