"""Load a GGUF chat model with ``transformers``, keeping the converted model on disk once.

Loading from the GGUF dequantises every tensor and rebuilds the tokenizer from the GGUF vocabulary,
which takes about half a minute on two cores even for a 135M model. The result is saved once as
float32 safetensors plus ``tokenizer.json`` under the cache folder, keyed by the GGUF's name, size and
modification time and by the ``transformers`` version (a changed file or converter gives a new key);
later loads read that copy (docs/LLM.md has the measurements). The copy is written to a temporary
folder and renamed into place, so a crash or a concurrent writer never leaves a half-written model;
a copy that fails to load is replaced.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from ..quiet import quiet_loading

_DONE = "contextrag-converted.json"   # written last: its presence means the folder is complete


def default_convert_dir() -> Path:
    """``$CONTEXTRAG_CACHE_DIR/models``, else ``~/.cache/contextrag/models``."""
    base = os.environ.get("CONTEXTRAG_CACHE_DIR") or os.path.join(Path.home(), ".cache", "contextrag")
    return Path(base) / "models"


def converted_path(gguf: Path, root: Path) -> Path:
    """The folder the converted copy of ``gguf`` lives in under ``root``."""
    import transformers

    st = gguf.stat()
    key = json.dumps([gguf.name, st.st_size, st.st_mtime_ns, transformers.__version__])
    return root / f"{gguf.stem}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def _from_gguf(gguf: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    lm = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    return tok, lm.eval()


def _from_dir(path: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    lm = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32)
    return tok, lm.eval()


def _save(tok, lm, gguf: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".tmp-", dir=dest.parent))
    try:
        # The weights are plain float32 once loaded, but transformers marks a GGUF-loaded model as
        # quantized and refuses save_pretrained: write the three parts it would write ourselves.
        from safetensors.torch import save_model

        save_model(lm, str(tmp / "model.safetensors"))      # drops the tied lm_head copy; the config re-ties it
        cfg = copy.deepcopy(lm.config)
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config
        cfg.save_pretrained(tmp)
        lm.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / _DONE).write_text(json.dumps({"gguf": gguf.name, "size": gguf.stat().st_size}))
        try:
            os.rename(tmp, dest)                   # atomic; fails if another process got there first
        except OSError:
            if not (dest / _DONE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_converted(gguf: str | os.PathLike, cache_dir=None):
    """(tokenizer, model, source) for ``gguf``; source is ``"converted cache"`` or ``"gguf"``.

    cache_dir: folder of converted copies; None = :func:`default_convert_dir`; False = no copy.
    Loads without progress bars (contextrag.quiet.quiet_loading).
    """
    with quiet_loading():
        return _load_converted(Path(gguf), cache_dir)


def _load_converted(gguf: Path, cache_dir):
    if not gguf.is_file():
        raise FileNotFoundError(f"gguf {gguf} is not a file")
    if cache_dir is False:
        return (*_from_gguf(gguf), "gguf")
    root = Path(cache_dir) if cache_dir is not None else default_convert_dir()
    dest = converted_path(gguf, root)
    if (dest / _DONE).is_file():
        try:
            return (*_from_dir(dest), "converted cache")
        except Exception as e:   # truncated or from an incompatible writer: convert again
            warnings.warn(f"the converted model in {dest} could not be loaded ({type(e).__name__}: {e}); "
                          "converting the GGUF again", RuntimeWarning, stacklevel=2)
            shutil.rmtree(dest, ignore_errors=True)
    tok, lm = _from_gguf(gguf)
    try:
        _save(tok, lm, gguf, dest)
    except OSError as e:         # a read-only or full disk costs the next load time, nothing else
        warnings.warn(f"could not keep the converted model in {dest} ({e}); the next load converts again",
                      RuntimeWarning, stacklevel=2)
    return tok, lm, "gguf"
