"""Multi-hop QA sets → one common shape (:class:`QASet`): questions with gold passages, and a corpus.

Formats (``format=``):

* ``hotpotqa`` – a JSON list of ``{_id, question, answer, type, supporting_facts [[title, sent_idx]],
  context [[title, [sentences]]]}``. 2WikiMultiHopQA has the same shape and loads with it.
* ``musique`` – JSON list or JSONL of ``{id, question, answer, answer_aliases,
  paragraphs [{idx, title, paragraph_text, is_supporting}]}``; the question type is the id's prefix
  (``2hop``, ``3hop1``, ...).
* ``multihoprag`` – a JSON list of ``{query, answer, question_type, evidence_list [{title, url, ...}]}``
  plus a corpus file (JSON list of ``{title, body, url, source, ...}``).
* ``jsonl`` – one ``{question, answer, gold_ids}`` per line (optional ``id``, ``answers``/``aliases``,
  ``type``) plus a corpus file of ``{id, text, title?}`` (JSON list or JSONL).

The corpus is the union of every paragraph/article of the set, deduplicated on (title, text), each one
its own document, and **shuffled with a fixed seed**. The files list a question's paragraphs next to
each other (HotpotQA's 10 context paragraphs, MuSiQue's 20, MultiHop-RAG's evidence articles). Any
feature of the index that links neighbouring documents (co-occurrence windows over consecutive
chunks, insertion order, k-means initialisation from the first points, ...) would then learn which
passages belong to the same question: a leak that inflates multi-hop recall and that real corpora do
not offer. Shuffling removes the order as a signal, so what the graph finds it finds from text.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

FORMATS = ("hotpotqa", "musique", "multihoprag", "jsonl")
NEEDS_CORPUS = ("multihoprag", "jsonl")
DEFAULT_SEED = 0


@dataclass
class Question:
    id: str
    text: str
    answers: list[str]                 # gold answer first, then aliases
    type: str = ""
    gold_ids: list[str] = field(default_factory=list)   # corpus doc ids of the supporting passages
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Doc:
    id: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = {"id": self.id, "title": self.title, "text": self.text}
        if self.metadata:
            d["metadata"] = dict(self.metadata)
        return d


@dataclass
class QASet:
    name: str
    format: str
    questions: list[Question]
    corpus: list[Doc]                  # already shuffled with ``seed``
    seed: int = DEFAULT_SEED
    source: str = ""
    warnings: list[str] = field(default_factory=list)

    def corpus_hash(self) -> str:
        """Content hash of the corpus in its indexed (shuffled) order."""
        h = hashlib.sha256()
        for d in self.corpus:
            for part in (d.id, d.title, d.text):
                b = part.encode("utf-8")
                h.update(len(b).to_bytes(8, "little"))
                h.update(b)
        return h.hexdigest()

    def questions_hash(self) -> str:
        h = hashlib.sha256()
        for q in self.questions:
            h.update(json.dumps([q.id, q.text, q.answers, q.gold_ids], ensure_ascii=False).encode("utf-8"))
        return h.hexdigest()

    def docs_for_index(self) -> list[dict[str, Any]]:
        return [d.to_dict() for d in self.corpus]

    def summary(self) -> dict[str, Any]:
        types: dict[str, int] = {}
        for q in self.questions:
            types[q.type or "-"] = types.get(q.type or "-", 0) + 1
        return {"name": self.name, "format": self.format, "source": self.source, "seed": self.seed,
                "questions": len(self.questions), "with_gold": sum(1 for q in self.questions if q.gold_ids),
                "corpus_docs": len(self.corpus), "types": types,
                "corpus_hash": self.corpus_hash()[:16], "warnings": list(self.warnings)}


# ---------------------------------------------------------------------------------------------------
# reading files

def _read_records(path: Path, what: str) -> list[Any]:
    """A JSON list, a JSON object holding one (``data``/``questions``/...), or JSONL."""
    if not path.exists():
        raise FileNotFoundError(f"{what}: no such file: {path}")
    if not path.is_file():
        raise ValueError(f"{what}: {path} is not a file")
    raw = path.read_bytes()
    if not raw.strip():
        raise ValueError(f"{what}: {path} is empty")
    from ..textfile import decode
    text = decode(raw, f"{what}: {path}")
    if text is None:
        raise ValueError(f"{what}: {path} is not a text file")
    try:
        obj = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what}: {path} is nested too deeply") from None
    except json.JSONDecodeError:
        obj = None
        recs = []
        for ln, line in enumerate(text.split("\n"), 1):     # "\n" only: U+2028 etc. are valid in JSON
            if not line.strip():
                continue
            try:
                recs.append(json.loads(line))
            except RecursionError:
                raise ValueError(f"{what}: {path} line {ln} is nested too deeply") from None
            except json.JSONDecodeError as e:
                raise ValueError(f"{what}: {path} is neither JSON nor JSONL (line {ln}: {e.msg})") from None
        return recs
    if isinstance(obj, list):
        return obj
    if isinstance(obj, dict):
        for key in ("data", "questions", "queries", "corpus", "documents", "docs"):
            if isinstance(obj.get(key), list):
                return obj[key]
        # JSONL file with a single line
        return [obj]
    raise ValueError(f"{what}: {path} must hold a JSON list, an object with a list, or JSONL")


def _need(rec: Any, key: str, i: int, what: str, types=(str,)):
    if not isinstance(rec, dict):
        raise ValueError(f"{what}: record {i} must be an object, got {type(rec).__name__}")
    if key not in rec:
        raise ValueError(f"{what}: record {i} lacks field {key!r}")
    v = rec[key]
    if not isinstance(v, types):
        raise ValueError(f"{what}: record {i} field {key!r} must be {' or '.join(t.__name__ for t in types)}, "
                         f"got {type(v).__name__}")
    return v


def _join_sentences(sents: Iterable[str]) -> str:
    # HotpotQA's sentences carry their leading space, 2WikiMultiHopQA's do not: normalise both.
    return re.sub(r"\s+", " ", " ".join(s.strip() for s in sents)).strip()


def _answers(main: Any, aliases: Any = None) -> list[str]:
    out: list[str] = []
    for a in ([main] if not isinstance(main, list) else main) + list(aliases or []):
        if a is None:
            continue
        a = str(a)
        if a not in out:
            out.append(a)
    return out


class _CorpusBuilder:
    """Deduplicates on (title, text); gives readable, unique ids in order of first appearance."""

    def __init__(self):
        self.by_key: dict[tuple[str, str], Doc] = {}
        self.ids: set[str] = set()

    def add(self, title: str, text: str, preferred_id: str | None = None, metadata=None) -> str:
        key = (title.strip(), text.strip())
        d = self.by_key.get(key)
        if d is not None:
            return d.id
        base = (preferred_id or key[0] or "doc").strip() or "doc"
        did, n = base, 1
        while did in self.ids:
            n += 1
            did = f"{base} #{n}"
        d = Doc(did, key[0], key[1], dict(metadata or {}))
        self.by_key[key] = d
        self.ids.add(did)
        return did

    def docs(self) -> list[Doc]:
        return list(self.by_key.values())


# ---------------------------------------------------------------------------------------------------
# the four formats

def _load_hotpotqa(recs: list, limit: int | None, what: str):
    cb = _CorpusBuilder()
    qs: list[Question] = []
    for i, r in enumerate(recs[:limit] if limit else recs):
        qtext = _need(r, "question", i, what)
        ctx = _need(r, "context", i, what, (list,))
        sf = r.get("supporting_facts") or []
        title_to_id: dict[str, str] = {}
        for j, p in enumerate(ctx):
            if not (isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], str)
                    and isinstance(p[1], (list, tuple))):
                raise ValueError(f"{what}: record {i} context[{j}] must be [title, [sentences]]")
            title_to_id.setdefault(p[0], cb.add(p[0], _join_sentences(p[1])))
        gold: list[str] = []
        for f in sf:
            t = f[0] if isinstance(f, (list, tuple)) and f else None
            if t in title_to_id and title_to_id[t] not in gold:
                gold.append(title_to_id[t])
        qid = str(r.get("_id", r.get("id", i)))
        qs.append(Question(qid, qtext, _answers(r.get("answer", "")), str(r.get("type", "") or ""), gold,
                           {k: r[k] for k in ("level",) if k in r}))
    return qs, cb.docs()


def _load_musique(recs: list, limit: int | None, what: str):
    cb = _CorpusBuilder()
    qs: list[Question] = []
    for i, r in enumerate(recs[:limit] if limit else recs):
        qtext = _need(r, "question", i, what)
        paras = _need(r, "paragraphs", i, what, (list,))
        gold: list[str] = []
        for j, p in enumerate(paras):
            if not isinstance(p, dict) or "paragraph_text" not in p:
                raise ValueError(f"{what}: record {i} paragraphs[{j}] must be an object with 'paragraph_text'")
            did = cb.add(str(p.get("title", "")), str(p["paragraph_text"]))
            if p.get("is_supporting") and did not in gold:
                gold.append(did)
        qid = str(r.get("id", i))
        qtype = qid.split("__", 1)[0] if "__" in qid else str(r.get("type", "") or "")
        meta = {"answerable": r["answerable"]} if "answerable" in r else {}
        qs.append(Question(qid, qtext, _answers(r.get("answer", ""), r.get("answer_aliases")), qtype, gold, meta))
    return qs, cb.docs()


def _load_multihoprag(recs: list, corpus_recs: list, limit: int | None, what: str, cwhat: str, warnings):
    cb = _CorpusBuilder()
    by_title: dict[str, str] = {}
    by_url: dict[str, str] = {}
    for j, c in enumerate(corpus_recs):
        body = _need(c, "body", j, cwhat) if "text" not in c else _need(c, "text", j, cwhat)
        title = str(c.get("title", ""))
        meta = {k: c[k] for k in ("source", "published_at", "category", "author", "url") if k in c}
        did = cb.add(title, body, preferred_id=c.get("url") or c.get("id") or title, metadata=meta)
        by_title.setdefault(title.strip(), did)
        if c.get("url"):
            by_url.setdefault(str(c["url"]), did)
    qs: list[Question] = []
    for i, r in enumerate(recs[:limit] if limit else recs):
        qtext = r.get("query", r.get("question")) if isinstance(r, dict) else None
        if not isinstance(qtext, str):
            raise ValueError(f"{what}: record {i} lacks field 'query' (or 'question')")
        gold: list[str] = []
        ev = r.get("evidence_list") or []
        if not isinstance(ev, list):
            raise ValueError(f"{what}: record {i} field 'evidence_list' must be a list")
        for e in ev:
            if not isinstance(e, dict):
                raise ValueError(f"{what}: record {i} evidence_list items must be objects")
            did = by_url.get(str(e.get("url", ""))) or by_title.get(str(e.get("title", "")).strip())
            if did is None:
                warnings.append(f"question {i}: evidence {e.get('title', '')!r} is not in the corpus")
            elif did not in gold:
                gold.append(did)
        qs.append(Question(str(r.get("id", i)), qtext, _answers(r.get("answer", "")),
                           str(r.get("question_type", "") or ""), gold))
    return qs, cb.docs()


def _load_jsonl(recs: list, corpus_recs: list, limit: int | None, what: str, cwhat: str, warnings):
    cb = _CorpusBuilder()
    alias: dict[str, str] = {}
    for j, c in enumerate(corpus_recs):
        cid = c.get("id", c.get("_id")) if isinstance(c, dict) else None
        if cid is None:
            raise ValueError(f"{cwhat}: record {j} lacks field 'id'")
        text = c.get("text", c.get("body", c.get("contents")))
        if not isinstance(text, str):
            raise ValueError(f"{cwhat}: record {j} lacks field 'text'")
        got = cb.add(str(c.get("title", "")), text, preferred_id=str(cid),
                     metadata=c.get("metadata") if isinstance(c.get("metadata"), dict) else None)
        if got != str(cid):
            warnings.append(f"corpus record {j} (id {cid!r}) duplicates {got!r}; its gold references map to {got!r}")
            alias[str(cid)] = got
    known = {d.id for d in cb.docs()}
    qs: list[Question] = []
    for i, r in enumerate(recs[:limit] if limit else recs):
        qtext = _need(r, "question", i, what)
        gids = r.get("gold_ids", [])
        if not isinstance(gids, list):
            raise ValueError(f"{what}: record {i} field 'gold_ids' must be a list")
        gold: list[str] = []
        for g in gids:
            g = alias.get(str(g), str(g))
            if g not in known:
                warnings.append(f"question {i}: gold id {g!r} is not in the corpus")
            elif g not in gold:
                gold.append(g)
        ans = r.get("answers", r.get("answer", ""))
        qs.append(Question(str(r.get("id", i)), qtext, _answers(ans, r.get("aliases") or r.get("answer_aliases")),
                           str(r.get("type", "") or ""), gold))
    return qs, cb.docs()


def load(data: str | os.PathLike, format: str, corpus: str | os.PathLike | None = None,
         limit: int | None = None, seed: int = DEFAULT_SEED) -> QASet:
    """Load a QA set. ``limit`` keeps the first N questions; for the formats whose passages come with
    the questions (hotpotqa, musique) the corpus is then the union of those questions' paragraphs, for
    the others it is the whole corpus file."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be an int >= 1 or None, got {limit!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    path = Path(data)
    what = f"data {path.name} ({format})"
    recs = _read_records(path, what)
    warnings: list[str] = []
    if format in NEEDS_CORPUS:
        if corpus is None:
            guess = path.with_name(path.stem + "_corpus" + path.suffix)
            if not guess.exists():
                raise ValueError(f"corpus: format {format!r} needs a corpus file (--corpus); "
                                 f"none given and {guess.name} not found beside the data")
            corpus = guess
        cpath = Path(corpus)
        cwhat = f"corpus {cpath.name}"
        crecs = _read_records(cpath, cwhat)
        if format == "multihoprag":
            qs, docs = _load_multihoprag(recs, crecs, limit, what, cwhat, warnings)
        else:
            qs, docs = _load_jsonl(recs, crecs, limit, what, cwhat, warnings)
    elif format == "hotpotqa":
        qs, docs = _load_hotpotqa(recs, limit, what)
    else:
        qs, docs = _load_musique(recs, limit, what)
    if not qs:
        raise ValueError(f"data: {path} holds no questions")
    if not docs:
        raise ValueError(f"data: {path} yields an empty corpus")
    ids = [q.id for q in qs]
    if len(set(ids)) != len(ids):   # make question ids unique: they key the resumable results
        seen: dict[str, int] = {}
        for q in qs:
            n = seen.get(q.id, 0)
            seen[q.id] = n + 1
            if n:
                q.id = f"{q.id}#{n + 1}"
    shuffle_corpus(docs, seed)
    return QASet(path.stem, format, qs, docs, seed, str(path), warnings)


def shuffle_corpus(docs: list[Doc], seed: int = DEFAULT_SEED) -> list[Doc]:
    """In-place deterministic shuffle (see the module docstring for why the corpus is shuffled)."""
    random.Random(seed).shuffle(docs)
    return docs
