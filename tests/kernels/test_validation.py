"""Bad inputs are rejected with a ValueError/TypeError whose message names the argument."""
import numpy as np
import pytest
import torch

from contextrag import ops



def _bad_values(shape):
    out = []
    for v, msg in ((np.nan, "NaN"), (np.inf, "NaN or inf"), (1.5, r"\[0, 1\]"), (-0.1, r"\[0, 1\]")):
        a = np.full(shape, 0.5)
        a[-1, -1] = v
        out.append((a, msg))
    return out


SEMIRING = [
    ("luk_up", lambda a, i: ops.luk_up(a, i), "A", "I", (3, 3), (3, 4)),
    ("luk_down", lambda b, i: ops.luk_down(b, i), "B", "I", (3, 4), (3, 4)),
    ("fuzzy_route", lambda m, i: ops.fuzzy_route(m, i), "mu", "I", (3, 4), (3, 4)),
    ("meet_cardinality", lambda a, b: ops.meet_cardinality(a, b), "A", "B", (3, 4), (3, 4)),
]


@pytest.mark.parametrize("name,fn,first,second,s1,s2", SEMIRING)
@pytest.mark.parametrize("where", ["first", "second"])
def test_semiring_values(name, fn, first, second, s1, s2, where):
    arg = first if where == "first" else second
    for bad, msg in _bad_values(s1 if where == "first" else s2):
        a, b = np.full(s1, 0.5), np.full(s2, 0.5)
        if where == "first":
            a = bad
        else:
            b = bad
        with pytest.raises(ValueError, match=rf"^{arg} .*{msg}"):
            fn(a, b)


@pytest.mark.parametrize("name,fn,first,second,s1,s2", SEMIRING)
def test_semiring_types_and_shapes(name, fn, first, second, s1, s2):
    a, b = np.full(s1, 0.5), np.full(s2, 0.5)
    with pytest.raises(TypeError, match=rf"^{first} .*float32 or float64"):
        fn(a.astype(np.int64), b)
    with pytest.raises(TypeError, match=rf"^{second} .*dtype"):
        fn(a, torch.from_numpy(b).half())
    with pytest.raises(TypeError, match=rf"^{first} must be a numpy"):
        fn(a.tolist(), b)
    with pytest.raises(ValueError, match=rf"^{second} must be 2-D"):
        fn(a, b[None])
    with pytest.raises(ValueError, match=rf"^{first} must be"):
        fn(np.full((2, 2, 2), 0.5), b)
    with pytest.raises(ValueError, match=rf"{first} has|{first} and {second}"):
        fn(np.full((3, 7), 0.5), b)


def test_kmeans_validation():
    X = np.random.default_rng(0).standard_normal((10, 3))
    with pytest.raises(ValueError, match=r"k=11 exceeds"):
        ops.kmeans_fit(X, 11)
    with pytest.raises(ValueError, match=r"^k must be >= 1"):
        ops.kmeans_fit(X, 0)
    with pytest.raises(TypeError, match=r"^k must be an int"):
        ops.kmeans_fit(X, 2.0)
    with pytest.raises(TypeError, match=r"^X .*float16"):
        ops.kmeans_fit(X.astype(np.float16), 2)
    with pytest.raises(TypeError, match=r"^X has dtype float16"):
        ops.kmeans_fit(torch.from_numpy(X).half(), 2)
    with pytest.raises(TypeError, match=r"^X must be float32 or float64"):
        ops.kmeans_assign(X.astype(np.int32), X[:2])
    with pytest.raises(ValueError, match=r"^X contains NaN"):
        ops.kmeans_fit(np.where(X > 1, np.nan, X), 2)
    with pytest.raises(ValueError, match=r"^X must be 2-D"):
        ops.kmeans_fit(X[0], 2)
    with pytest.raises(ValueError, match=r"X has 3 columns but C has 2"):
        ops.kmeans_assign(X, X[:2, :2].copy())
    with pytest.raises(ValueError, match=r"^C must hold at least one"):
        ops.kmeans_assign(X, X[:0])
    with pytest.raises(ValueError, match=r"^init must have shape"):
        ops.kmeans_fit(X, 2, init=X[:3])
    with pytest.raises(ValueError, match=r"^tol must be"):
        ops.kmeans_fit(X, 2, tol=-1.0)
    with pytest.raises(TypeError, match=r"^max_points_per_centroid must be None or an int >= 1"):
        ops.kmeans_fit(X, 2, max_points_per_centroid=1.5)
    with pytest.raises(TypeError, match=r"^problems must be a list"):
        ops.rq_kmeans_batched(X)


def test_fcm_validation():
    X = np.random.default_rng(0).standard_normal((10, 3))
    with pytest.raises(ValueError, match=r"^m must be a finite number > 1"):
        ops.fcm_memberships(X, X[:2], m=1.0)
    with pytest.raises(ValueError, match=r"^m must be"):
        ops.fcm_fit(X, 2, m=float("nan"))
    with pytest.raises(ValueError, match=r"c=11 exceeds"):
        ops.fcm_fit(X, 11)
    with pytest.raises(ValueError, match=r"^top_k must be >= 1"):
        ops.fcm_memberships(X, X[:2], top_k=0)
    with pytest.raises(TypeError, match=r"^C has dtype float16"):
        ops.fcm_memberships(X, torch.from_numpy(X[:2]).half())
    with pytest.raises(ValueError, match=r"^C contains NaN"):
        ops.fcm_memberships(X, np.full((2, 3), np.inf))


def test_backend_names():
    A = np.full((2, 3), 0.5)
    with pytest.raises(ValueError, match=r"^backend must be one of"):
        ops.luk_up(A, A.T.copy(), backend="gpu")
    with pytest.raises(ValueError, match=r"needs CUDA tensors|unavailable"):
        ops.luk_up(A, A.T.copy(), backend="cuda") if torch.cuda.is_available() else (_ for _ in ()).throw(
            ValueError("needs CUDA tensors"))


def test_elementwise_broadcast_error():
    with pytest.raises(ValueError, match=r"^a of shape .* and b of shape .* do not broadcast"):
        ops.tnorm(np.zeros(3), np.zeros(4))


def test_cpu_backend_selection_does_not_import_triton():
    """Picking a CPU backend probes only the CPU backends: importing Triton took ~0.2 s (profiled) of
    the first op call of every CPU process. ops.backends() still reports on all of them."""
    import subprocess
    import sys
    code = ("import sys, numpy as np\n"
            "from contextrag import ops\n"
            "ops.kmeans_fit(np.random.rand(50, 4).astype(np.float32), 3)\n"
            "ops.meet_cardinality(np.random.rand(3, 5), np.random.rand(2, 5))\n"
            "print('triton' in sys.modules)\n"
            "print(sorted(ops.backends()))\n")
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("TRITON_INTERPRET", "CONTEXTRAG_BACKEND")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0] == "False"
    assert lines[1] == str(sorted(["ref", "cpu", "triton", "cuda"]))


def test_reversed_and_read_only_numpy_views_are_accepted():
    a = np.linspace(0.0, 1.0, 12).reshape(3, 4)
    ro = a.copy()
    ro.flags.writeable = False
    np.testing.assert_array_equal(ops.tnorm(a[::-1], ro), np.maximum(a[::-1] + a - 1.0, 0.0))
    np.testing.assert_array_equal(ops.luk_up(a[:, ::-1], a.T.copy()), ops.luk_up(a[:, ::-1].copy(), a.T.copy()))
