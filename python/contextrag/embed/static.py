"""A static embedding model distilled from the sentence-transformers model with model2vec.

model2vec passes every token of the model's vocabulary through the transformer once, reduces the
token vectors with PCA (256 dimensions) and weights them by a smooth inverse frequency; a text's
embedding is then the mean of its tokens' vectors: no attention, no matrix products, thousands of
texts per second on one core. The distillation runs once, locally, from the model's own files
(a few minutes on a CPU) and is cached by ``model_cache``; run time imports neither torch nor
transformers.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .model_cache import derived_dir, ensure_dir

FORMAT = 1
PCA_DIMS = 256            # model2vec's default
MARKER = "contextrag.json"


def distil(source: str, out: Path) -> None:
    """Distil ``source`` (a local sentence-transformers folder, or a name) into ``out``."""
    import os
    if Path(source).is_dir():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from model2vec.distill import distill_from_model
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(source, device="cpu", trust_remote_code=False)
    # the transformer and tokenizer objects carry the local path as their name: model2vec then asks
    # the hub for nothing (it looks a model card up only for a name that is not a local path)
    model = distill_from_model(model=st[0].auto_model, tokenizer=st.tokenizer, pca_dims=PCA_DIMS,
                               device="cpu")
    model.save_pretrained(str(out))
    (out / MARKER).write_text(json.dumps({"source": str(source), "format": FORMAT, "pca_dims": PCA_DIMS,
                                          "dim": int(model.dim)}))


def ensure_static(source: str) -> Path:
    return ensure_dir(derived_dir(source, "static", FORMAT), lambda d: distil(source, d), MARKER)


def cached_static(source: str) -> Path | None:
    """The static model distilled from ``source`` when it is in the cache, else None."""
    d = derived_dir(source, "static", FORMAT)
    return d if (d / MARKER).is_file() else None


class StaticEncoder:
    """Mean of distilled token vectors (model2vec's StaticModel), unit rows."""

    def __init__(self, folder: str | Path):
        self._model = _load_static(Path(folder))
        self.dim = int(self._model.dim)

    def encode(self, texts: list[str], batch_size: int = 1024, on_batch=None) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for s in range(0, len(texts), batch_size):
            part = texts[s:s + batch_size]
            out[s:s + len(part)] = self._model.encode(part, batch_size=len(part) or 1, show_progress_bar=False,
                                                      use_multiprocessing=False)
            if on_batch is not None:
                on_batch(len(part))
        return out


def _load_static(folder: Path):
    """model2vec's ``StaticModel`` built from the folder ``distil`` wrote, by its constructor.

    ``StaticModel.from_pretrained`` reads the same three files, but it imports model2vec's persistence
    and model-card modules (and huggingface_hub's card machinery) on the way: half a second of a
    ``contextrag add`` that takes about one and a half. The files of a local, already distilled model
    need none of it."""
    from model2vec import StaticModel
    from safetensors import safe_open
    from tokenizers import Tokenizer

    config = json.loads((folder / "config.json").read_text())
    with safe_open(str(folder / "model.safetensors"), framework="numpy") as f:
        names = set(f.keys())
        vectors = f.get_tensor("embeddings")
        weights = f.get_tensor("weights") if "weights" in names else None
        mapping = f.get_tensor("mapping") if "mapping" in names else None
    kwargs = {"max_length": config["max_length"]} if "max_length" in config else {}
    return StaticModel(vectors=vectors, tokenizer=Tokenizer.from_file(str(folder / "tokenizer.json")),
                       config=config, normalize=bool(config.get("normalize", False)), weights=weights,
                       token_mapping=mapping, **kwargs)
