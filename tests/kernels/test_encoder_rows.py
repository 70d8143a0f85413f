"""The CPU embedder's encoder kernels (csrc/cpu/encoder_rows.h): attention over each sequence's own
length, residual add + LayerNorm and bias + GELU, against float64 references computed from the same
bf16 inputs, on odd shapes and every instruction set this CPU runs (amx: the attention's products on
the tiles). Results are bf16, so each is held to the rounding of the reference value (half a bf16
ulp, 2^-9 relative) plus fp32 slack; the tiles' attention to a reference that rounds its operands
as the tiles read them (q, k, v plus bias, and e^(s − max), to bf16)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from contextrag.ops import native
from contextrag.ops._bf16_bound import bf16_round

C = native()
pytestmark = pytest.mark.skipif(C is None or not hasattr(C, "encoder_attention"), reason="contextrag._C is not built")
ISAS = [i for i in ("amx", "avx512", "avx2", "generic") if C is not None and C.cpu_isa_supported(i)]
BF16_REL = 2.0 ** -8          # one bf16 ulp, relative: rounding to nearest is within half of it


@pytest.fixture
def isa(request):
    C.set_cpu_isa(request.param)
    yield request.param
    C.set_cpu_isa("auto")


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (uint16), round to nearest even."""
    return (bf16_round(np.ascontiguousarray(x, dtype=np.float32)).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b).astype(np.uint32) << 16).view(np.float32)


def within_bf16(got_bits, want, slack=1e-5):
    got = from_bf16_bits(got_bits).astype(np.float64)
    err = np.abs(got - want)
    bound = np.abs(want) * BF16_REL + slack
    assert (err <= bound).all(), float((err - bound).max())


def bf16(x):
    """x rounded to bf16, as float64."""
    return bf16_round(np.asarray(x, np.float32)).astype(np.float64)


def attention_reference(qkv_bits, lengths, H, scale, bias, tiles=False):
    """float64 attention; ``tiles``: with the operands rounded to bf16 as the AMX path reads them."""
    rows, cols = qkv_bits.shape
    B = len(lengths)
    L, d = rows // B, cols // (3 * H)
    x = from_bf16_bits(qkv_bits).astype(np.float64).reshape(B, L, 3, H, d) + bias.reshape(3, H, d)
    if tiles:       # the fp32 sum with the bias, rounded to bf16
        x = bf16(from_bf16_bits(qkv_bits).reshape(B, L, 3, H, d) + bias.reshape(3, H, d).astype(np.float32))
    out = np.zeros((B, L, H, d))
    for b, n in enumerate(lengths):
        for h in range(H):
            q, k, v = x[b, :n, 0, h], x[b, :n, 1, h], x[b, :n, 2, h]
            s = (q @ k.T) * scale
            p = np.exp(s - s.max(1, keepdims=True)) if n else s
            if tiles and n:
                p = bf16(p)
            out[b, :n, h] = (p / p.sum(1, keepdims=True)) @ v if n else 0
    return out.reshape(rows, H * d)


@pytest.mark.parametrize("isa", ISAS, indirect=True)
@pytest.mark.parametrize("B,L,H,d", [(3, 7, 2, 5), (2, 33, 3, 32), (1, 1, 1, 1), (2, 19, 2, 64), (1, 17, 1, 128),
                                     (2, 40, 12, 32)])
def test_attention_matches_float64(isa, B, L, H, d):
    rng = np.random.default_rng(B * 1000 + L * 10 + d)
    qkv = to_bf16_bits(rng.standard_normal((B * L, 3 * H * d)).astype(np.float32) * 2)
    bias = rng.standard_normal(3 * H * d).astype(np.float32)
    lengths = rng.integers(0, L + 1, B).astype(np.int64)
    lengths[0] = L                                     # one full sequence, others padded (maybe empty)
    got = C.encoder_attention(qkv, lengths, H, d ** -0.5, bias)
    assert got.dtype == np.uint16 and got.shape == (B * L, H * d)
    tiles = isa == "amx"
    want = attention_reference(qkv, lengths, H, d ** -0.5, bias, tiles=tiles)
    # the tiles: an e^(s − max) whose fp32 score sits at a bf16 rounding edge may round the other way
    within_bf16(got, want, slack=2.0 ** -8 * np.abs(want).max() if tiles else 1e-5)
    pad = np.concatenate([np.arange(b * L + n, (b + 1) * L) for b, n in enumerate(lengths)]).astype(int)
    assert (got[pad] == 0).all()                       # padded query rows are zeros
    # the int16 view torch hands over reads the same bits; no bias means a zero bias
    np.testing.assert_array_equal(C.encoder_attention(qkv.view(np.int16), lengths, H, d ** -0.5, bias), got)
    zero = attention_reference(qkv, lengths, H, d ** -0.5, np.zeros_like(bias), tiles=tiles)
    within_bf16(C.encoder_attention(qkv, lengths, H, d ** -0.5), zero,
                slack=2.0 ** -8 * np.abs(zero).max() if tiles else 1e-5)


@pytest.mark.parametrize("isa", ISAS, indirect=True)
def test_attention_is_exact_on_a_softmax_edge(isa):
    """Scores far apart (the exponential's floor) and all equal (a uniform softmax)."""
    B, L, H, d = 1, 20, 1, 16
    x = np.zeros((L, 3, d), np.float32)
    x[:, 0, 0] = 1.0
    x[:, 1, 0] = np.where(np.arange(L) == 7, 300.0, 0.0)     # key 7 wins by e^300
    x[:, 2] = np.arange(L, dtype=np.float32)[:, None]
    got = from_bf16_bits(C.encoder_attention(to_bf16_bits(x.reshape(L, -1)), np.array([L]), H, 1.0))
    np.testing.assert_array_equal(got, 7.0)
    x[:, 1, 0] = 0.0                                            # every score equal: the mean of the values
    got = from_bf16_bits(C.encoder_attention(to_bf16_bits(x.reshape(L, -1)), np.array([L]), H, 1.0))
    np.testing.assert_allclose(got, (L - 1) / 2, rtol=BF16_REL)


@pytest.mark.parametrize("isa", ISAS, indirect=True)
@pytest.mark.parametrize("M,Cw", [(1, 1), (5, 7), (37, 384), (300, 100)])
def test_add_layer_norm_matches_float64(isa, M, Cw):
    rng = np.random.default_rng(M + Cw)
    h = (rng.standard_normal((M, Cw)) * 3 + 1).astype(np.float32)
    y = to_bf16_bits(rng.standard_normal((M, Cw)).astype(np.float32))
    g, b, bias = (rng.standard_normal(Cw).astype(np.float32) for _ in range(3))
    x = h.astype(np.float64) + from_bf16_bits(y) + bias
    mean = x.mean(1, keepdims=True)
    want = (x - mean) / np.sqrt(x.var(1, keepdims=True) + 1e-12) * g + b
    h0 = h.copy()
    bits = C.add_layer_norm(h, y, g, b, 1e-12, bias)
    assert bits.dtype == np.uint16 and bits.shape == (M, Cw)
    tol = 1e-6 if Cw > 1 else 1e-3                     # one column: var = 0, every row is beta
    np.testing.assert_allclose(h, want, rtol=1e-4, atol=tol * (1 + np.abs(b).max()))
    np.testing.assert_array_equal(bits, to_bf16_bits(h))    # the bf16 copy is h rounded
    h1 = h0.copy()
    C.add_layer_norm(h1, y, g, b, 1e-12)               # no bias: as a zero bias
    h2 = h0.copy()
    C.add_layer_norm(h2, y, g, b, 1e-12, np.zeros(Cw, np.float32))
    np.testing.assert_array_equal(h1, h2)


@pytest.mark.parametrize("isa", ISAS, indirect=True)
@pytest.mark.parametrize("M,N", [(1, 1), (3, 17), (64, 1536)])
def test_bias_gelu_matches_float64(isa, M, N):
    rng = np.random.default_rng(M * N)
    x = rng.standard_normal((M, N)).astype(np.float32) * 4
    x[0, :min(N, 6)] = [0.0, -0.0, 1e-30, -9.0, 9.0, 40.0][:min(N, 6)]
    y = to_bf16_bits(x)
    bias = rng.standard_normal(N).astype(np.float32)
    z = from_bf16_bits(y).astype(np.float64) + bias
    erf = np.vectorize(math.erf)
    want = 0.5 * z * (1 + erf(z / math.sqrt(2)))
    C.bias_gelu(y, bias)
    within_bf16(y, want, slack=1e-6)


@pytest.mark.parametrize("isa", ISAS, indirect=True)
def test_team_size_does_not_change_results(isa):
    """``threads`` only sizes the OpenMP team (the embedder's workers pass 1): every count gives the
    same bits, since each row and each sequence is computed by one thread whatever the split."""
    rng = np.random.default_rng(7)
    B, L, H, d = 5, 23, 3, 32
    qkv = to_bf16_bits(rng.standard_normal((B * L, 3 * H * d)).astype(np.float32))
    lengths, bias = np.array([23, 1, 0, 17, 9]), rng.standard_normal(3 * H * d).astype(np.float32)
    h0 = rng.standard_normal((300, 384)).astype(np.float32)
    y = to_bf16_bits(rng.standard_normal((300, 384)).astype(np.float32))
    g, b = rng.standard_normal(384).astype(np.float32), rng.standard_normal(384).astype(np.float32)
    z0 = to_bf16_bits(rng.standard_normal((300, 1536)).astype(np.float32))
    results = []
    for threads in (0, 1, 3):
        att = C.encoder_attention(qkv, lengths, H, 0.2, bias, threads)
        h, z = h0.copy(), z0.copy()
        ln = C.add_layer_norm(h, y, g, b, 1e-12, None, threads)
        C.bias_gelu(z, None, threads)
        results.append((att, h, ln, z))
    assert not np.array_equal(results[0][3], z0)
    for r in results[1:]:
        for got, want in zip(r, results[0]):
            np.testing.assert_array_equal(got, want)


def test_encoder_kernels_reject_bad_arguments():
    qkv = np.zeros((6, 12), np.uint16)
    with pytest.raises(ValueError, match="qkv must be a 2-D array of bf16 bits"):
        C.encoder_attention(qkv.astype(np.float32), np.array([3, 3]), 2, 1.0)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        C.encoder_attention(qkv, np.array([3, 4]), 2, 1.0)
    with pytest.raises(ValueError, match="qkv must have 3·heads·d columns"):
        C.encoder_attention(qkv, np.array([3, 3]), 5, 1.0)
    with pytest.raises(ValueError, match="qkv must have B·L rows"):
        C.encoder_attention(qkv, np.array([1, 1, 1, 1]), 2, 1.0)
    with pytest.raises(ValueError, match="bias must be a 1-D float array of length 12"):
        C.encoder_attention(qkv, np.array([3, 3]), 2, 1.0, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="heads must be >= 1"):
        C.encoder_attention(qkv, np.array([3, 3]), 0, 1.0)
    h, y, g = np.zeros((2, 4), np.float32), np.zeros((2, 4), np.uint16), np.ones(4, np.float32)
    with pytest.raises(ValueError, match=r"y must have h's shape \(2, 4\)"):
        C.add_layer_norm(h, y[:1], g, g, 1e-5)
    with pytest.raises(ValueError, match="gamma must be a 1-D float array of length 4"):
        C.add_layer_norm(h, y, g[:3], g, 1e-5)
    with pytest.raises(ValueError, match="eps must be > 0"):
        C.add_layer_norm(h, y, g, g, 0.0)
    with pytest.raises(TypeError):
        C.add_layer_norm(h.astype(np.float64), y, g, g, 1e-5)    # h is updated in place: no conversion
    with pytest.raises(ValueError, match="y must be a C-contiguous 2-D array of bf16 bits"):
        C.bias_gelu(np.zeros((4, 4), np.uint16)[:, ::2])
    with pytest.raises(ValueError, match="bias must be a 1-D float array of length 4"):
        C.bias_gelu(y, np.zeros(5, np.float32))
    with pytest.raises(ValueError, match=r"threads must be 0 \(OpenMP's default\) or a count in \[1, 4096\], got -1"):
        C.bias_gelu(y, None, -1)
    with pytest.raises(ValueError, match="threads must be 0"):
        C.add_layer_norm(h, y, g, g, 1e-5, None, 5000)
    with pytest.raises(ValueError, match="threads must be 0"):
        C.encoder_attention(qkv, np.array([3, 3]), 2, 1.0, None, -2)
