"""A realistic synthetic corpus of any size from the shared corpora, built offline.

Sentences of the HotpotQA-500 paragraphs, the MultiHop-RAG articles and the UltraDomain documents
are recombined into chunks (4-8 sentences each, a few chunks per document), so term document
frequencies follow real text. Document titles are real titles plus entity phrases taken from the
same sentences (capitalised n-grams), so chunks mention other documents' titles the way Wikipedia
paragraphs do. Deterministic for a seed.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
_SENT = re.compile(r"(?<=[.!?])\s+")


def data_dir() -> Path:
    import os
    d = Path(os.environ.get("CONTEXTRAG_DATA", DATA))
    if not (d / "hotpotqa_500.json").exists():
        raise FileNotFoundError(f"shared data not found at {d} (set CONTEXTRAG_DATA)")
    return d


def sentence_pool(d: Path):
    """(sentences, titles) from the shared corpora."""
    sents, titles = [], []
    for q in json.loads((d / "hotpotqa_500.json").read_text()):
        for t, ss in q["context"]:
            titles.append(t)
            sents += [s.strip() for s in ss if len(s.strip()) > 20]
    for a in json.loads((d / "multihoprag_small_corpus.json").read_text()):
        titles.append(a["title"])
        sents += [s for s in _SENT.split(a["body"]) if len(s) > 20]
    for doc in json.loads((d / "ultradomain_mix_contexts.json").read_text()):
        sents += [" ".join(s.split()) for s in _SENT.split(doc) if 20 < len(s) < 600]
    return list(dict.fromkeys(sents)), list(dict.fromkeys(titles))


def make_corpus(n_chunks: int, seed: int = 0, chunks_per_doc: int = 4):
    """(titles, texts) of n_chunks chunks; consecutive chunks share their document's title."""
    from contextrag.index.lexical.families import _PHRASE
    d = data_dir()
    sents, titles = sentence_pool(d)
    rng = np.random.default_rng(seed)
    n_docs = (n_chunks + chunks_per_doc - 1) // chunks_per_doc
    phrases = list(dict.fromkeys(m.group(0) for s in sents for m in _PHRASE.finditer(s) if " " in m.group(0)))
    pool = titles + phrases
    # more documents than distinct names: reuse names with a disambiguation, as Wikipedia does
    doc_titles = [pool[i % len(pool)] + ("" if i < len(pool) else f" ({i // len(pool)})") for i in range(n_docs)]
    order = rng.permutation(n_docs)
    S = len(sents)
    lens = rng.integers(4, 9, size=n_chunks)
    picks = rng.integers(0, S, size=int(lens.sum()))
    texts, out_titles, p = [], [], 0
    for i in range(n_chunks):
        k = int(lens[i])
        texts.append(" ".join(sents[j] for j in picks[p:p + k]))
        p += k
        out_titles.append(doc_titles[order[i // chunks_per_doc]])
    return out_titles, texts
