"""Run by tests/portability/test_emulated_cpus.py under `qemu-x86_64 -cpu MODEL`: one op of every
native kernel family against the float64 reference on tiny shapes, optionally a few tokens from the
embedded LLM. Prints one JSON line (the ISA the native kernels chose, the checks, the reply) and
exits 0 only if every check passed."""
from __future__ import annotations

import json
import sys
import time

import numpy as np


def close(a, b, tol=1e-4) -> bool:
    return bool(np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=tol, rtol=tol))


def kernels() -> tuple[dict, dict]:
    import scipy.sparse as sp

    from contextrag import ops, ref
    from contextrag.ops._backend import native

    C = native()
    if C is None:
        raise SystemExit("the native module contextrag._C did not load")
    info = {"isa": C.cpu_isa(), "supported": [i for i in ("avx512", "avx2", "generic") if C.cpu_isa_supported(i)],
            "bf16_gemm": bool(C.bf16_supported())}
    # Forcing an instruction set this CPU lacks must be refused with a sentence, not run into SIGILL.
    info["refused"] = {}
    for isa in ("avx512", "avx2"):
        if isa not in info["supported"]:
            try:
                C.set_cpu_isa(isa)
                info["refused"][isa] = None            # accepted: the test fails on this
                C.set_cpu_isa("auto")
            except ValueError as e:
                info["refused"][isa] = str(e)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((37, 11)).astype(np.float32)
    Cb = rng.standard_normal((5, 11)).astype(np.float32)
    A = rng.random((3, 29)).astype(np.float32)           # fuzzy object sets
    I = rng.random((29, 13)).astype(np.float32)          # incidence objects x attributes
    B = rng.random((4, 29)).astype(np.float32)
    Isp = I * (rng.random(I.shape) < 0.3)
    checks = {
        "kmeans_assign": lambda: np.array_equal(np.asarray(ops.kmeans_assign(X, Cb, backend="cpu")[0]),
                                                np.asarray(ref.kmeans.kmeans_assign(X, Cb)[0])),
        "kmeans_fit": lambda: close(ops.kmeans_fit(X, 4, n_iter=5, init=Cb[:4], backend="cpu").centroids,
                                    ref.kmeans.kmeans_fit(X, 4, n_iter=5, init=Cb[:4])[0], 1e-3),
        "fcm_memberships": lambda: close(ops.fcm_memberships(X, Cb, m=2.0, backend="cpu"),
                                         ref.fcm.fcm_memberships(X, Cb, m=2.0)),
        "luk_up": lambda: close(ops.luk_up(A, I, backend="cpu"), ref.semiring.luk_up(A, I)),
        "luk_up_sparse": lambda: close(ops.luk_up(A, sp.csr_matrix(Isp), backend="cpu"),
                                       ref.semiring.luk_up(A, Isp)),
        "meet_cardinality": lambda: close(ops.meet_cardinality(A, B, backend="cpu"),
                                          ref.semiring.meet_cardinality(A, B)),
        "fuzzy_route": lambda: close(ops.fuzzy_route(A[:, :13], I[:13].T.copy(), backend="cpu"),
                                     ref.semiring.fuzzy_route(A[:, :13], I[:13].T.copy())),
    }
    if hasattr(C, "encoder_attention"):
        checks.update(encoder_checks(C, rng))
    out = {}
    for name, fn in checks.items():
        try:
            out[name] = bool(fn())
        except Exception as e:      # a wrong shape in this script is a failure too, with its message
            out[name] = f"{type(e).__name__}: {e}"
    return info, out


def encoder_checks(C, rng) -> dict:
    """The CPU embedder's kernels (bf16 in and out) against float64, to bf16 rounding."""
    from contextrag.ops._bf16_bound import bf16_round

    def bits(x):
        return (bf16_round(np.asarray(x, np.float32)).view(np.uint32) >> 16).astype(np.uint16)

    def val(b):
        return (np.asarray(b).astype(np.uint32) << 16).view(np.float32).astype(np.float64)

    B, L, H, d = 2, 5, 2, 3
    qkv, lengths = bits(rng.standard_normal((B * L, 3 * H * d))), np.array([5, 3])

    def attention():
        x = val(qkv).reshape(B, L, 3, H, d)
        want = np.zeros((B, L, H, d))
        for b, n in enumerate(lengths):
            for h in range(H):
                s = x[b, :n, 0, h] @ x[b, :n, 1, h].T / np.sqrt(d)
                p = np.exp(s - s.max(1, keepdims=True))
                want[b, :n, h] = p / p.sum(1, keepdims=True) @ x[b, :n, 2, h]
        return close(val(C.encoder_attention(qkv, lengths, H, d ** -0.5)), want.reshape(B * L, -1), 1e-2)

    h0, y = rng.standard_normal((4, 7)).astype(np.float32), bits(rng.standard_normal((4, 7)))
    g = np.ones(7, np.float32)

    def layer_norm():
        h = h0.copy()
        C.add_layer_norm(h, y, g, 0 * g, 1e-6)
        x = h0 + val(y)
        return close(h, (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-6), 1e-4)

    def gelu():
        from math import erf
        z = y.copy()
        C.bias_gelu(z)
        x = val(y)
        return close(val(z), 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2))), 1e-2)

    return {"encoder_attention": attention, "add_layer_norm": layer_norm, "bias_gelu": gelu}


def llm(max_tokens: int) -> dict:
    from contextrag.llm.local import LocalLLMClient

    t = time.perf_counter()
    c = LocalLLMClient(n_ctx=512)
    r = c.complete([{"role": "user", "content": "What is the capital of France? Answer with one word."}],
                   max_tokens=max_tokens)
    return {"reply": r.text, "completion_tokens": r.completion_tokens, "load_s": round(c.load_seconds, 1),
            "total_s": round(time.perf_counter() - t, 1), "loaded_from": c.loaded_from}


def main(argv) -> int:
    t = time.perf_counter()
    info, checks = kernels()
    res = {"native": info, "checks": checks, "kernels_s": round(time.perf_counter() - t, 1)}
    if "--llm" in argv:
        res["llm"] = llm(int(argv[argv.index("--llm") + 1]))
    print(json.dumps(res))
    ok = all(v is True for v in checks.values()) and ("llm" not in res or "paris" in res["llm"]["reply"].lower())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
