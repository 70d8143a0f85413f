"""`contextrag demo [FOLDER]`: the main job on the embedded defaults, offline.

Indexes a corpus — the repository's own README.md and docs/*.md by default, or a folder of your
documents (PDF, HTML, Markdown, DOCX, text; or a .json/.jsonl corpus) — with the embedded MiniLM
embedder, then answers a question (``--question``, or a built-in one) and prints the answer, its
sources and the cost of the query. No LLM runs unless ``--llm`` names one: the answer is extractive
(the sentences that answer, chosen by the question's type, the links between passages and relevance;
contextrag.query.extractive), or ``--style span`` for the name, date or number alone. A capable
``--llm`` (an OpenAI-compatible server, vLLM) rewrites, reranks and writes the answer; ``--llm local``
runs the embedded 135M model, which is for pipeline tests, not for answers. The index is kept in
``--out`` and reused while the corpus is unchanged.

    contextrag demo                                   # this repository's docs, the built-in question
    contextrag demo my_notes/ --question "Who wrote the design memo?"
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

from contextrag.config import check_k

DEFAULT_QUESTION = "How is the BM25 score normalised in the hybrid retrieval score?"


def add_arguments(p):
    p.add_argument("corpus", nargs="?", default=None,
                   help="a folder of documents (PDF, HTML, Markdown, DOCX, text), a .jsonl or a .json corpus "
                        "(default: this repository's README.md and docs/)")
    p.add_argument("-q", "--question", default=DEFAULT_QUESTION, help=f"the question (default: {DEFAULT_QUESTION!r})")
    p.add_argument("--out", default=None, help="index directory (default: ~/.cache/contextrag/demo/<corpus hash>)")
    p.add_argument("--llm", default="none", help="'none' (default: an extractive answer), "
                   "'http://host:port/v1#MODEL', 'vllm:MODEL', or 'local' / 'llama-cpp' (the embedded 135M "
                   "model, for pipeline tests)")
    p.add_argument("-k", type=int, default=8, help="passages to answer from (default 8)")
    p.add_argument("--style", choices=("short", "paragraph", "extractive", "span"), default=None,
                   help="answer style (default: extractive without an LLM or with the embedded one, short with "
                        "any other LLM)")
    p.add_argument("--summaries", type=int, default=0, help="cluster-summary virtual chunks to generate with the "
                   "LLM at index time (default 0: the embedded model on a CPU is slow)")
    p.add_argument("--no-rewrite", action="store_true", help="skip the three query rewrites")
    p.add_argument("--no-rerank", action="store_true", help="skip the LLM rerank")
    p.add_argument("--rebuild", action="store_true", help="rebuild the index even if the corpus is unchanged")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def repo_docs() -> Path | None:
    """The repository this package runs from (editable install): its README.md and docs/ folder."""
    root = Path(__file__).resolve().parents[3]
    if (root / "README.md").is_file() and (root / "docs").is_dir():
        return root
    return None


def shipped_corpus() -> list[dict]:
    root = repo_docs()
    if root is None:
        raise FileNotFoundError("the repository's docs are not next to this installation; "
                                "pass a folder of documents: contextrag demo FOLDER")
    from contextrag.ingest import read_documents
    files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    # read as Markdown, as a user's folder would be: headings as sections, badges and URLs dropped
    return read_documents([f for f in files if f.is_file()], root=root).docs


def corpus_docs(path) -> list[dict]:
    if path is None:
        return shipped_corpus()
    from .index import read_corpus

    ns = argparse.Namespace(text_field="text", id_field="id", title_field="title")
    return read_corpus(path, ns)


def fingerprint(docs, config) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(config.to_dict(), sort_keys=True, default=str).encode())
    for d in docs:
        h.update(json.dumps([d.get("id"), d.get("title"), d["text"]]).encode())
    return h.hexdigest()


def run(args) -> int:
    from contextrag.cpu_floor import check

    check()                                   # before NumPy/torch load: one sentence, not SIGILL
    from contextrag.quiet import quiet_loading

    with quiet_loading():                     # no "Loading weights" bar for the embedder or the LLM
        return _run(args)


def _run(args) -> int:
    from contextrag import Config, ContextRAG, query
    from .query import answer_note, print_result

    check_k(args.k, "-k")
    if args.summaries < 0:
        raise ValueError(f"--summaries must be >= 0, got {args.summaries}")
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    docs = corpus_docs(args.corpus)
    if not docs:
        raise ValueError("the corpus holds no documents")
    config = Config(n_summaries=args.summaries)
    fp = fingerprint(docs, config)
    out = Path(args.out) if args.out else Path.home() / ".cache" / "contextrag" / "demo" / fp[:16]
    stamp = Path(str(out) + ".corpus-sha256")

    # ---- the LLM: none unless named
    client, note = None, None
    if args.llm and args.llm.lower() not in ("none", "off"):
        from contextrag.llm import make_client
        from contextrag.llm.local import LocalLLMUnavailable
        try:
            client = make_client(args.llm)
        except LocalLLMUnavailable as e:
            raise ValueError(f"--llm {args.llm}: {e}") from None
    if client is None and args.style in ("short", "paragraph"):
        raise ValueError(f"--style {args.style} needs an LLM (--llm); without one the styles are extractive and span")

    # ---- index (reused while the corpus and config are unchanged)
    t0 = time.perf_counter()
    rag = None
    if not args.rebuild and stamp.is_file() and stamp.read_text().strip() == fp and out.is_dir():
        try:
            rag = ContextRAG.load(out)
            log(f"index: reusing {out} ({len(docs)} documents)")
        except Exception as e:  # unreadable or from another version: build it again
            log(f"index: cannot reuse {out} ({type(e).__name__}: {e}); rebuilding")
            rag = None
    if rag is None:
        log(f"index: {len(docs)} documents -> {out} ...")
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            rag = ContextRAG.build(docs, path=os.fspath(out), config=config,
                                   llm=client if args.summaries else None)
        for w in {str(w.message) for w in ws}:
            log(f"  note: {w}")
        stamp.write_text(fp)
        st = rag.stats()
        log(f"  {st['chunks']} chunks, {st['items']} items, "
            f"{sum(v['count'] for v in st['nodes'].values())} concept nodes in {time.perf_counter() - t0:.1f} s")

    # ---- the question
    if getattr(client, "loaded_from", "") is None and hasattr(client, "convert_cache"):
        log("llm: loading the embedded model (the first run converts its GGUF once, about half a minute)")
    t1 = time.perf_counter()
    ans = query.answer(rag.index, args.question, llm=client if client is not None else "none", k=args.k,
                       rewrite=not args.no_rewrite, rerank=not args.no_rerank, style=args.style)
    dt = time.perf_counter() - t1
    if args.json:
        d = ans.to_dict()
        d.update(question=args.question, model=getattr(client, "model", None), index=str(out), note=note)
        print(json.dumps(d, indent=2))
    else:
        print()
        text = ans.text + ("" if ans.style == "paragraph" or not ans.citations
                           else " " + "".join(f"[{n}]" for n in ans.citations))
        print_result(args.question, ans.hits, answer=text, cost=ans.cost, seconds=dt, citations=ans.citations,
                     note=answer_note(ans, getattr(client, "model", None)))
    return 0
