"""The ``torch-bf16`` backend's forward for BERT encoders on the CPU (all-MiniLM-L6-v2, e5, bge with
mean pooling): the same arithmetic as sentence-transformers under ``torch.autocast`` in bfloat16 (bf16
matrix products with fp32 accumulation, fp32 residual stream, LayerNorm and softmax), in fewer passes.

Why by hand: under autocast a MiniLM layer is eleven casts, three GEMMs for q, k and v, and
``scaled_dot_product_attention``, whose CPU kernel ran head dimension 32 at about 40 GFLOP/s here;
the matrix products themselves were under half of the time. Here each layer is four bf16 GEMMs
(torch: oneDNN, on AMX where the CPU has it), q, k and v in one, and three kernels of ours
(``csrc/cpu/encoder_rows.h``, per instruction set): the attention over each sequence's own length
(on the AMX tiles where they run), the residual add with LayerNorm, which also writes the bf16 copy
the next GEMM reads, and the bias with GELU. docs/EMBEDDING.md has the rates and the cosine to fp32.

:func:`supports` says which models qualify; anything else runs through sentence-transformers.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..ops._backend import cpu_native

_OPS = ("encoder_attention", "add_layer_norm", "bias_gelu")
_POOLED = threading.Lock()    # one pooled encode at a time: it sets torch's process-wide thread count


def supports(st_model) -> bool:
    """True for a sentence-transformers model this forward reproduces: a ``BertModel`` with absolute
    positions, exact GELU and a tokenizer that pads on the right (the kernels take each sequence's
    first tokens), followed by mean pooling (and optionally normalisation), and the extension with
    the encoder kernels."""
    if any(cpu_native(op) is None for op in _OPS):
        return False
    mods = list(st_model)
    if len(mods) < 2 or type(mods[0]).__name__ != "Transformer":
        return False
    bert = getattr(mods[0], "auto_model", None)
    cfg = getattr(bert, "config", None)
    if type(bert).__name__ != "BertModel" or cfg is None:
        return False
    if getattr(getattr(mods[0], "tokenizer", None), "padding_side", "right") != "right":
        return False
    pool = mods[1]
    mode = getattr(pool, "pooling_mode", None) or (
        "mean" if getattr(pool, "pooling_mode_mean_tokens", False) else None)
    if type(pool).__name__ != "Pooling" or mode != "mean" or getattr(pool, "include_prompt", True) is False:
        return False
    if any(type(m).__name__ != "Normalize" for m in mods[2:]):
        return False
    return (getattr(cfg, "position_embedding_type", "absolute") == "absolute" and cfg.hidden_act == "gelu"
            and not getattr(cfg, "is_decoder", False) and cfg.hidden_size % cfg.num_attention_heads == 0)


class BertBf16:
    """Mean-pooled, L2-normalised embeddings of a supported model (see :func:`supports`)."""

    TOKENS = 4096       # padded tokens per forward pass at most
    workers: int | None   # batches at once: None, one per torch thread; 1, in turn on all threads
                          # (from CONTEXTRAG_EMBED_WORKERS when made)

    def __init__(self, st_model):
        import torch
        if not supports(st_model):
            raise ValueError("BertBf16 needs a BertModel with mean pooling and the encoder kernels "
                             "(see bert_cpu.supports)")
        self.C = cpu_native("encoder_attention")
        self.torch = torch
        self._tokenizing = threading.Lock()
        self.workers = _workers_from_env()
        first = st_model[0]
        self.bert = first.auto_model
        self.preprocess = getattr(first, "preprocess", None) or first.tokenize   # tokenize before 6.0
        cfg = self.bert.config
        self.heads = int(cfg.num_attention_heads)
        self.width = int(cfg.hidden_size)
        self.scale = (self.width // self.heads) ** -0.5
        bf = torch.bfloat16
        self.layers = []
        with torch.no_grad():
            for lay in self.bert.encoder.layer:
                a, out = lay.attention.self, lay.attention.output
                self.layers.append(dict(
                    w_qkv=torch.cat([a.query.weight, a.key.weight, a.value.weight]).to(bf).t(),
                    b_qkv=_f32(torch.cat([a.query.bias, a.key.bias, a.value.bias])),
                    w_o=out.dense.weight.to(bf).t(), ln1=_ln(out.LayerNorm) + (_f32(out.dense.bias),),
                    w_i=lay.intermediate.dense.weight.to(bf).t(), b_i=_f32(lay.intermediate.dense.bias),
                    w_out=lay.output.dense.weight.to(bf).t(),
                    ln2=_ln(lay.output.LayerNorm) + (_f32(lay.output.dense.bias),)))

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """(len(texts), hidden) float32, unit rows. Batches of ``batch_size`` texts in order of
        decreasing length, as sentence-transformers forms them, so a batch pads little.

        With more than one batch, ``workers`` threads (by default one per torch thread) each run
        whole batches on their own, torch set to one thread for the call and restored after: a GEMM
        split over threads waits at every step for its slowest thread, and the small kernels between
        GEMMs pay a fork and a join each. A batch's vectors do not depend on which thread ran it."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.width), dtype=np.float32)
        starts = list(range(0, len(texts), batch_size))

        def run(s: int, threads: int) -> None:
            idx = order[s:s + batch_size]
            out[idx] = self._batch([texts[i] for i in idx], threads)

        torch = self.torch
        workers = min(self.workers or torch.get_num_threads(), len(starts))
        if workers > 1:
            with _POOLED:
                before = torch.get_num_threads()
                torch.set_num_threads(1)
                try:
                    with ThreadPoolExecutor(workers, thread_name_prefix="contextrag-embed") as pool:
                        futures = [pool.submit(run, s, 1) for s in starts]   # longest batches first
                        try:
                            for f in futures:
                                f.result()
                        except BaseException:
                            for f in futures:
                                f.cancel()
                            raise
                finally:
                    torch.set_num_threads(before)
        else:
            for s in starts:
                run(s, 0)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def _batch(self, texts: list[str], threads: int = 0) -> np.ndarray:
        with self._tokenizing:                 # a fast tokenizer is not safe to call from two threads
            enc = self.preprocess(texts)       # sentence-transformers' own: stripped, truncated, padded
        ids, mask = enc["input_ids"], enc["attention_mask"]
        types = enc.get("token_type_ids")
        lengths = mask.sum(1).numpy().astype(np.int64)
        out = np.empty((len(texts), self.width), dtype=np.float32)
        # rows longest first, cut into runs of at most TOKENS padded tokens: each pass's activations
        # stay a few MB (a batch of 64 texts of 256 tokens would be 16,384 rows)
        order = np.argsort(-lengths, kind="stable")
        s = 0
        while s < len(order):
            L = int(max(lengths[order[s]], 1))
            rows = order[s:s + max(1, self.TOKENS // L)]
            out[rows] = self._forward(ids[rows, :L], lengths[rows], None if types is None else types[rows, :L],
                                      threads)
            s += len(rows)
        return out

    def _forward(self, ids, lengths: np.ndarray, types, threads: int = 0) -> np.ndarray:
        """Mean-pooled final hidden states (B, hidden) of token ids (B, L) whose rows hold lengths[b]
        tokens each (the rest padding); ``threads``: the kernels' team size (0: OpenMP's default)."""
        torch, C = self.torch, self.C
        B, L = ids.shape
        with torch.inference_mode():
            h = self.bert.embeddings(input_ids=ids, token_type_ids=types)
            h = h.reshape(B * L, self.width).float().contiguous()
            hn = h.numpy()                                  # the fp32 residual stream, updated in place
            hb = h.to(torch.bfloat16)
            for p in self.layers:
                ctx = _bf16(C.encoder_attention(_bits(torch.mm(hb, p["w_qkv"])), lengths, self.heads, self.scale,
                                                p["b_qkv"], threads))
                hb = _bf16(C.add_layer_norm(hn, _bits(torch.mm(ctx, p["w_o"])), *p["ln1"], threads))
                inner = torch.mm(hb, p["w_i"])
                C.bias_gelu(_bits(inner), p["b_i"], threads)
                hb = _bf16(C.add_layer_norm(hn, _bits(torch.mm(inner, p["w_out"])), *p["ln2"], threads))
            m = (np.arange(L)[None, :] < lengths[:, None]).astype(np.float32)[..., None]
            return (hn.reshape(B, L, -1) * m).sum(1) / np.maximum(m.sum(1), 1e-9)


def _workers_from_env() -> int | None:
    """CONTEXTRAG_EMBED_WORKERS: batches at once (1: in turn, each op on every torch thread); unset
    or empty: one per torch thread."""
    v = (os.environ.get("CONTEXTRAG_EMBED_WORKERS") or "").strip()
    if not v:
        return None
    if not v.isdigit() or int(v) < 1:
        raise ValueError(f"CONTEXTRAG_EMBED_WORKERS must be an integer >= 1, got {v!r}")
    return int(v)


def _f32(t) -> np.ndarray:
    return t.detach().float().contiguous().numpy()


def _ln(ln) -> tuple:
    """LayerNorm's (gamma, beta, eps) as ``add_layer_norm`` takes them."""
    return _f32(ln.weight), _f32(ln.bias), float(ln.eps)


def _bits(t):
    """A bf16 tensor's bits as a NumPy int16 array (no copy)."""
    import torch
    return t.contiguous().view(torch.int16).numpy()


def _bf16(a: np.ndarray):
    """bf16 bits from the extension as a torch bfloat16 tensor (no copy)."""
    import torch
    return torch.from_numpy(a).view(torch.bfloat16)
