#!/usr/bin/env python
"""MiniLM embeddings of the shared corpora, for the real-data k-means benchmarks:

    python bench/embed_shared_corpora.py OUT.npy [--cap 30000]

HotpotQA-500's context sentences (over 20 characters, de-duplicated), MultiHop-RAG's article
paragraphs (over 40 characters) and UltraDomain Mix cut into 70-word chunks; above --cap texts a
seeded uniform sample of them, in order. Embedded with all-MiniLM-L6-v2 on ONNX Runtime fp32 (the
CPU default); saved as (n, 384) float32, unit rows. The data folder: $CONTEXTRAG_DATA, else
../shared/data beside the repository.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench_index import DATA


def texts_of_shared_corpora() -> tuple[list[str], dict]:
    texts = []
    for q in json.loads((DATA / "hotpotqa_500.json").read_text()):
        for _title, sents in q["context"]:
            texts += [s.strip() for s in sents if len(s.strip()) > 20]
    texts = list(dict.fromkeys(texts))
    counts = {"hotpotqa_sentences": len(texts)}
    for a in json.loads((DATA / "multihoprag_small_corpus.json").read_text()):
        texts += [p.strip() for p in a["body"].split("\n") if len(p.strip()) > 40]
    counts["multihoprag_paragraphs"] = len(texts) - counts["hotpotqa_sentences"]
    n0 = len(texts)
    for doc in json.loads((DATA / "ultradomain_mix_contexts.json").read_text()):
        w = doc.split()
        texts += [" ".join(w[i:i + 70]) for i in range(0, len(w), 70)]
    counts["ultradomain_chunks"] = len(texts) - n0
    return texts, counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--cap", type=int, default=30000)
    a = p.parse_args(argv)
    from contextrag.embed.embedder import Embedder
    texts, counts = texts_of_shared_corpora()
    if len(texts) > a.cap:
        keep = np.sort(np.random.default_rng(0).choice(len(texts), a.cap, replace=False))
        texts = [texts[i] for i in keep]
    print(counts, "kept", len(texts), flush=True)
    t = time.time()
    E = Embedder(backend="onnx").embed_passages(texts)
    print("embedded", E.shape, round(time.time() - t, 1), "s", flush=True)
    np.save(a.out, np.ascontiguousarray(E, dtype=np.float32))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
