"""The attributes → chunks step of the spreading hop (csrc/cpu/spread.cpp has the definition).

The caller gathers the chunks → attributes step (a few seed rows) into activation entries
(q, a, v, sdoc, self). One program walks the column of one entry's attribute in Iᵀ (CSR) in
BLOCK-wide slabs and folds v + I(c, a) − 1 into the zero-filled out[q, c] with an atomic max; only
values > 0 are written, so the clamp at 0 is the initial value, and the max runs on the values' bit
patterns as integers (exact for non-negative floats, and one atomic instead of Triton's two-sided
float max). A chunk of the seed's own document
other than the seed itself is skipped (the no-sibling rule) when ``self >= 0`` and ``HAS_DOC``.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._utils import launch

BLOCK = 128  # entries of one attribute's column per step


@triton.jit
def _spread_kernel(tip_ptr, tix_ptr, tdv_ptr, doc_ptr, eq_ptr, ea_ptr, ev_ptr, esdoc_ptr, eself_ptr,
                   out_bits_ptr, n, HAS_DOC: tl.constexpr, BITS: tl.constexpr, BLOCK: tl.constexpr):
    e = tl.program_id(0)
    q = tl.load(eq_ptr + e)
    a = tl.load(ea_ptr + e)
    v = tl.load(ev_ptr + e)
    sdoc = tl.load(esdoc_ptr + e)
    me = tl.load(eself_ptr + e)
    start = tl.load(tip_ptr + a)
    end = tl.load(tip_ptr + a + 1)
    for off in range(start, end, BLOCK):
        p = off + tl.arange(0, BLOCK)
        m = p < end
        c = tl.load(tix_ptr + p, mask=m, other=0)
        w = tl.load(tdv_ptr + p, mask=m, other=0.0)
        t = (v + w) - 1.0
        ok = m & (t > 0.0)
        if HAS_DOC:
            d = tl.load(doc_ptr + c, mask=m, other=0)
            ok = ok & ((me < 0) | (d != sdoc) | (c == me))
        # t > 0 where written: its IEEE bits order like signed integers, so the integer max is exact
        # (lanes that must not write fold a 0 — a no-op on the non-negative output — rather than
        # masking with `ok`, which the interpreter passes on as an int64 mask it then rejects)
        tl.atomic_max(out_bits_ptr + q * n + c, tl.where(ok, t, 0.0).to(BITS, bitcast=True), mask=m)


def spread_columns(t_indptr: torch.Tensor, t_indices: torch.Tensor, t_data: torch.Tensor, doc, entries: tuple,
                   Q: int, n: int) -> torch.Tensor:
    """(Q, n) hop from activation entries ``(q, a, v, sdoc, self)`` (int64, int64, data dtype, int64,
    int64) over Iᵀ in CSR; ``doc`` (n,) int64 or None."""
    eq, ea, ev, esdoc, eself = entries
    out = torch.zeros((Q, n), dtype=t_data.dtype, device=t_data.device)
    if eq.numel() == 0 or n == 0:
        return out
    has_doc = doc is not None
    f64 = t_data.dtype == torch.float64
    bits = out.view(torch.int64 if f64 else torch.int32)
    launch(_spread_kernel, (eq.numel(),), (t_indptr, t_indices, t_data, doc if has_doc else t_indptr, eq, ea,
                                           ev.to(t_data.dtype), esdoc, eself, bits, n),
           dict(HAS_DOC=has_doc, BITS=tl.int64 if f64 else tl.int32, BLOCK=BLOCK))
    return out
