"""A corpus of any size of distinct, real-text chunks with HotpotQA-500's passages inside it, unchanged.

    docs, info = scale_corpus(n_chunks, seed=0)

* HotpotQA-500's corpus (its 4,9xx distinct paragraphs, the ids the evaluation gives them), as they are,
  so its 500 questions can be asked against the big index and scored by the same gold ids.
* The rest: "recombined" documents of 2-4 sentences each (at most ``MAX_CHARS`` characters, so one
  chunk of 200 model tokens each), the sentences drawn with a fixed seed from a pool of
  UltraDomain Mix's 61 documents, MultiHop-RAG's 51 articles and the HotpotQA-500 paragraphs that are
  no question's supporting paragraph. Gold paragraphs' sentences are left out of the pool, so no
  recombined chunk repeats a supporting fact (the recall of the big index would otherwise count
  copies of the evidence as misses). Titles: the corpora's titles and capitalised phrases of the
  pool's sentences, with a disambiguation suffix once they run out (Wikipedia style), four documents
  per title. So a recombined document may carry the name of an entity a question asks about while
  its text is about something else; ``titles="own"`` names each one by the first capitalised phrase
  of its own text instead (disambiguated on reuse), ``titles="none"`` gives them no title (the
  ablations of docs/SCALING.md).
* Every text is distinct (a set of hashes rejects a repeated draw).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
MAX_CHARS = 700          # ~160 MiniLM tokens of English: one chunk at Config.chunk_tokens = 200
_SENT = re.compile(r"(?<=[.!?])\s+")
_PHRASE = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+){1,3}\b")


def data_dir() -> Path:
    d = Path(os.environ.get("CONTEXTRAG_DATA", REPO.parent / "shared" / "data"))
    if not (d / "hotpotqa_500.json").exists():
        raise FileNotFoundError(f"shared data not found at {d} (set CONTEXTRAG_DATA)")
    return d


def hotpotqa(d: Path | None = None):
    """The HotpotQA-500 QA set as contextrag.eval loads it (questions, corpus with gold ids)."""
    from contextrag.eval import datasets as ds
    return ds.load((d or data_dir()) / "hotpotqa_500.json", "hotpotqa")


def sentence_pool(d: Path, hotpotqa_distractors: bool = True) -> tuple[list[str], list[str]]:
    """(sentences, titles) of the recombination pool; see the module docstring.
    ``hotpotqa_distractors=False``: no HotpotQA-500 sentence or title at all (the ablation that
    separates the corpus's size from copies of the questions' own distractor sentences)."""
    recs = json.loads((d / "hotpotqa_500.json").read_text())
    gold_titles = {f[0] for r in recs for f in r.get("supporting_facts") or []}
    sents, titles = [], []
    for r in recs:
        for t, ss in r["context"]:
            if t in gold_titles or not hotpotqa_distractors:
                continue
            titles.append(t)
            sents += [" ".join(s.split()) for s in ss if len(s.strip()) > 20]
    for a in json.loads((d / "multihoprag_small_corpus.json").read_text()):
        titles.append(a["title"])
        sents += [" ".join(s.split()) for s in _SENT.split(a["body"]) if len(s) > 20]
    for doc in json.loads((d / "ultradomain_mix_contexts.json").read_text()):
        sents += [" ".join(s.split()) for s in _SENT.split(doc) if 20 < len(s) < 600]
    sents = [s for s in dict.fromkeys(sents) if len(s) <= MAX_CHARS // 2]
    phrases = [m.group(0) for s in sents for m in _PHRASE.finditer(s)]
    return sents, list(dict.fromkeys(titles + phrases))


def _own_title(text: str, used: dict) -> str:
    """A capitalised phrase of the document's own text (its first), disambiguated on reuse; the
    document's first words when it names none."""
    m = _PHRASE.search(text)
    name = m.group(0) if m else " ".join(text.split()[:3])
    k = used.get(name, 0)
    used[name] = k + 1
    return name if k == 0 else f"{name} ({k})"


def recombined(n_docs: int, seed: int, d: Path, hotpotqa_distractors: bool = True,
               titles: str = "pool") -> tuple[list[dict], dict]:
    if titles not in ("pool", "own", "none"):
        raise ValueError(f"titles must be 'pool', 'own' or 'none', got {titles!r}")
    sents, titles_pool = sentence_pool(d, hotpotqa_distractors)
    rng = np.random.default_rng(seed)
    S, T = len(sents), len(titles_pool)
    seen: set[bytes] = set()
    used: dict = {}
    docs: list[dict] = []
    rejected = 0
    while len(docs) < n_docs:
        m = n_docs - len(docs)
        lens = rng.integers(2, 5, size=m)
        picks = rng.integers(0, S, size=(m, 4))
        for i in range(m):
            parts = [sents[j] for j in picks[i, :lens[i]]]
            while len(parts) > 1 and sum(map(len, parts)) + len(parts) - 1 > MAX_CHARS:
                parts.pop()
            text = " ".join(parts)
            h = hashlib.blake2b(text.encode(), digest_size=16).digest()
            if h in seen:
                rejected += 1
                continue
            seen.add(h)
            k = len(docs)
            if titles == "none":
                docs.append({"id": f"rc:{k}", "text": text})
                continue
            if titles == "own":
                title = _own_title(text, used)
            else:
                t = k // 4
                title = titles_pool[t % T] + ("" if t < T else f" ({t // T})")
            docs.append({"id": f"rc:{k}", "title": title, "text": text})
    return docs, {"pool_sentences": S, "pool_titles": T, "repeated_draws_rejected": rejected}


def scale_corpus(n_chunks: int, seed: int = 0, chunks_per_doc: float = 1.0, hotpotqa_distractors: bool = True,
                 titles: str = "pool"):
    """(documents, description): HotpotQA-500's corpus plus recombined documents, about ``n_chunks``
    chunks in all (``chunks_per_doc``: the recombined documents' measured chunks per document, ~1)."""
    d = data_dir()
    qa = hotpotqa(d)
    base = qa.docs_for_index()
    n_fill = max(0, int(round((n_chunks - 5522) / chunks_per_doc)))   # HotpotQA-500: 5,522 chunks
    fill, info = recombined(n_fill, seed, d, hotpotqa_distractors, titles)
    return base + fill, {"hotpotqa500_docs": len(base), "recombined_docs": len(fill), "seed": seed,
                         "max_chars": MAX_CHARS, "pool_has_hotpotqa_distractors": hotpotqa_distractors,
                         "recombined_titles": titles,
                         **info, "qa": qa}
