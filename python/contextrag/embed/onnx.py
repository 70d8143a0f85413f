"""Sentence embeddings on ONNX Runtime: the sentence-transformers model exported once, run without torch.

The export (torch's ONNX exporter, done once per model and cached by ``model_cache``) covers the
whole sentence-transformers pipeline of a Transformer -> Pooling (mean or CLS) -> optional Normalize
model, so the graph's output is the sentence embedding itself. ``int8`` is the fp32 export with its
weights dynamically quantised to int8 by ONNX Runtime (activations quantised per batch at run time).

At run time only ``onnxruntime``, ``tokenizers`` and NumPy are imported: a query embeds its question
without loading torch. Texts are tokenised exactly as sentence-transformers does (stripped, truncated
to the model's ``max_seq_length`` with special tokens), sorted by length and batched, so a batch pads
to its own longest text only.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .model_cache import derived_dir, ensure_dir

FORMAT = 2                # bump when the exported graph or meta.json changes
MODEL_FILE = "model.onnx"
META_FILE = "meta.json"
TOKENIZER_FILE = "tokenizer.json"
VARIANTS = ("fp32", "int8")


class TokenizerSpans:
    """The model's fast tokenizer as the chunker wants it: ``tok(text, add_special_tokens=False,
    return_offsets_mapping=True, ...)`` -> ``{"input_ids", "offset_mapping"}``, no truncation. Same
    tokenizer.json as transformers' fast tokenizer, so the same offsets, without importing transformers."""

    is_fast = True

    def __init__(self, tokenizer_json: str | Path):
        from tokenizers import Tokenizer
        self._tok = Tokenizer.from_file(str(tokenizer_json))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._ahead: dict = {}

    def prefetch(self, texts: list[str]) -> None:
        """Tokenise ``texts`` in one batch (Rust threads, outside the GIL); the next call for each of
        them (without special tokens) takes its result instead of tokenising again."""
        self._ahead = dict(zip(texts, self._tok.encode_batch(list(texts), add_special_tokens=False)))

    def __call__(self, text: str, add_special_tokens: bool = True, return_offsets_mapping: bool = False,
                 truncation: bool = False, verbose: bool = False, **_):
        enc = None if add_special_tokens else self._ahead.pop(text, None)
        if enc is None:
            enc = self._tok.encode(text, add_special_tokens=add_special_tokens)
        out = {"input_ids": enc.ids}
        if return_offsets_mapping:
            out["offset_mapping"] = enc.offsets
        return out


# ---- export (torch, once) ------------------------------------------------------------------------

def _pooling_of(st) -> tuple[str, bool, int]:
    """(pooling mode, normalize, max_seq_length) of a SentenceTransformer made of the modules the
    ONNX graph reproduces; ValueError otherwise."""
    mods = [type(m).__name__ for m in st]
    if len(mods) not in (2, 3) or mods[0] != "Transformer" or mods[1] != "Pooling" \
            or (len(mods) == 3 and mods[2] != "Normalize"):
        raise ValueError(f"the onnx embedder exports Transformer -> Pooling -> Normalize models; this one is "
                         f"{' -> '.join(mods)}: use Config(embedder='torch')")
    pool = st[1]
    modes = getattr(pool, "pooling_mode", None)      # sentence-transformers >= 5: a name (or names)
    if modes is None:                               # older releases: one flag per mode
        modes = [m for m in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens")
                 if getattr(pool, f"pooling_mode_{m}", False)]
    modes = [modes] if isinstance(modes, str) else list(modes)
    names = {"mean": "mean", "mean_tokens": "mean", "cls": "cls", "cls_token": "cls"}
    if len(modes) != 1 or modes[0] not in names:
        raise ValueError(f"the onnx embedder supports mean or CLS pooling only, this model pools by {modes}: "
                         "use Config(embedder='torch')")
    mode = names[modes[0]]
    return mode, len(mods) == 3, int(st.max_seq_length)


def export_fp32(source: str, out: Path) -> None:
    """Export the sentence-transformers model at ``source`` to ``out`` (model.onnx, tokenizer.json,
    meta.json). Needs torch and sentence-transformers; reads only local files for a local ``source``."""
    import os
    import warnings

    if Path(source).is_dir():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(source, device="cpu", trust_remote_code=False)
    mode, normalize, max_len = _pooling_of(st)
    hf = st[0].auto_model.eval()
    tok = st.tokenizer
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in tok.model_input_names]

    class SentenceGraph(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            kw = dict(zip(names, inputs))
            h = self.model(**kw).last_hidden_state
            if mode == "cls":
                e = h[:, 0]
            else:
                m = kw["attention_mask"].unsqueeze(-1).to(h.dtype)
                e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(e, p=2.0, dim=1) if normalize else e

    dummy = tuple(torch.ones(2, 8, dtype=torch.long) for _ in names)
    axes = {n: {0: "batch", 1: "tokens"} for n in names}
    axes["sentence_embedding"] = {0: "batch"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")    # the tracer's notes on Python control flow in the model
        torch.onnx.export(SentenceGraph(hf), dummy, str(out / MODEL_FILE), input_names=names,
                          output_names=["sentence_embedding"], dynamic_axes=axes, opset_version=17,
                          dynamo=False)
    tok.backend_tokenizer.save(str(out / TOKENIZER_FILE))
    dim = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension   # renamed in 5.x
    meta = {"source": str(source), "inputs": names, "pooling": mode, "normalize": normalize,
            "max_seq_length": max_len, "dim": int(dim()),
            "do_lower_case": bool(getattr(st[0], "do_lower_case", False)), "variant": "fp32",
            "format": FORMAT, "torch": torch.__version__}
    (out / META_FILE).write_text(json.dumps(meta, indent=1))


def quantize_int8(fp32_dir: Path, out: Path) -> None:
    """Dynamic int8 quantisation of the fp32 export (weights int8, activations per batch)."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic
    # per-channel uint8 weights: the closest to fp32 of ONNX Runtime's dynamic schemes on this model
    # (per-tensor int8 moved vectors by up to 0.09 in cosine, per-channel uint8 by about 0.01)
    quantize_dynamic(str(fp32_dir / MODEL_FILE), str(out / MODEL_FILE), weight_type=QuantType.QUInt8,
                     per_channel=True)
    shutil.copy(fp32_dir / TOKENIZER_FILE, out / TOKENIZER_FILE)
    meta = json.loads((fp32_dir / META_FILE).read_text())
    meta["variant"] = "int8"
    (out / META_FILE).write_text(json.dumps(meta, indent=1))


def ensure_export(source: str, variant: str = "fp32") -> Path:
    """The cached export folder of ``source`` for ``variant`` ("fp32" or "int8"), made when missing."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    fp32 = ensure_dir(derived_dir(source, "onnx-fp32", FORMAT), lambda d: export_fp32(source, d), META_FILE)
    if variant == "fp32":
        return fp32
    return ensure_dir(derived_dir(source, "onnx-int8", FORMAT), lambda d: quantize_int8(fp32, d), META_FILE)


def cached_export(source: str, variant: str) -> Path | None:
    """The export folder when it is already made (no torch import needed to find it), else None."""
    d = derived_dir(source, f"onnx-{variant}", FORMAT)
    return d if (d / META_FILE).is_file() else None


# ---- run time (onnxruntime + tokenizers) -----------------------------------------------------------

class OnnxEncoder:
    """Sentence embeddings from an export folder. ``threads``: ONNX Runtime's intra-op threads
    (None: one per physical core, its default)."""

    def __init__(self, folder: str | Path, threads: int | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        folder = Path(folder)
        self.meta = json.loads((folder / META_FILE).read_text())
        self.max_seq_length = int(self.meta["max_seq_length"])
        self.dim = int(self.meta["dim"])
        self.inputs = list(self.meta["inputs"])
        tok = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        tok.no_padding()
        tok.enable_truncation(self.max_seq_length)
        self._tok = tok
        self._folder = folder
        self._spans = None
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = int(threads)
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Its idle intra-op threads would otherwise spin after every run: a question is embedded once
        # per query, and the spinning thread then takes a core from the rest of the query (the BM25,
        # cosine and spreading kernels; docs/EMBEDDING.md). A batch of passages keeps the threads busy
        # within its run, where the spinning saves little.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._runner = ort.InferenceSession(str(folder / MODEL_FILE), opts, providers=["CPUExecutionProvider"])

    @property
    def tokenizer(self) -> TokenizerSpans:
        """The chunker's tokenizer (offsets, no truncation), made on first use: a query needs none."""
        if self._spans is None:
            self._spans = TokenizerSpans(self._folder / TOKENIZER_FILE)
        return self._spans

    def _prepare(self, texts: list[str]) -> list[str]:
        out = [t.strip() for t in texts]       # sentence-transformers strips each text
        return [t.lower() for t in out] if self.meta.get("do_lower_case") else out

    def encode(self, texts: list[str], batch_size: int = 32, on_batch=None) -> np.ndarray:
        """(len(texts), dim) float32 as the model outputs it (unit rows for a Normalize model).
        ``on_batch(n)`` is called after each batch of n texts."""
        enc = self._tok.encode_batch(self._prepare(texts))
        lengths = np.fromiter((len(e.ids) for e in enc), dtype=np.int64, count=len(enc))
        order = np.argsort(-lengths, kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for s in range(0, len(order), batch_size):
            idx = order[s:s + batch_size]
            width = int(lengths[idx[0]])
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            types = np.zeros((len(idx), width), dtype=np.int64)
            for j, i in enumerate(idx):
                e = enc[i]
                n = len(e.ids)
                ids[j, :n] = e.ids
                mask[j, :n] = 1
                types[j, :n] = e.type_ids
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            out[idx] = self._runner.run(None, {k: feed[k] for k in self.inputs})[0]
            if on_batch is not None:
                on_batch(len(idx))
        return out
