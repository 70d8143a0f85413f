"""`contextrag query DIR "question"`: answer a question from an index, with the cited passages and the
cost of the query (LLM calls, tokens, seconds per stage). ``--no-llm`` retrieves only; ``--json`` prints
one JSON object for machines."""
from __future__ import annotations

import json
import sys
import time


def add_arguments(p):
    p.add_argument("index", help="index directory (from `contextrag index` or `contextrag demo`)")
    p.add_argument("question", help="the question")
    p.add_argument("-k", type=int, default=12, help="passages to retrieve / answer from (default 12)")
    p.add_argument("--doc", action="append", dest="doc_ids", metavar="DOC_ID",
                   help="only search these documents (repeatable; §4.6 doc_id filter)")
    p.add_argument("--filter", metavar="JSON", help="only documents whose metadata match, e.g. "
                   "'{\"year\": {\"$gte\": 2020}, \"format\": \"pdf\"}' (contextrag.query.filters)")
    p.add_argument("--llm", default=None, help="LLM: 'local' (embedded GGUF, the default), "
                   "'http://host:port/v1#MODEL', 'vllm:MODEL', or 'none' (= --no-llm)")
    p.add_argument("--no-llm", action="store_true", help="retrieval only: no rewrites, rerank or answer")
    p.add_argument("--no-rewrite", action="store_true", help="skip the three query rewrites")
    p.add_argument("--no-rerank", action="store_true", help="skip the LLM rerank")
    p.add_argument("--no-cache", action="store_true", help="do not use the on-disk LLM call cache")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--chars", type=int, default=240, help="characters of each passage to print (default 240)")


def _short(text: str, n: int) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1] + "…"


def print_result(question, hits, *, answer=None, cost=None, seconds=0.0, chars=240, note=None, out=None):
    w = (out or sys.stdout).write
    w(f"Q: {question}\n")
    if answer is not None:
        w(f"A: {answer}\n")
    if note:
        w(f"({note})\n")
    w(f"\nSources ({len(hits)}):\n")
    for i, h in enumerate(hits, 1):
        src = h.doc_id if h.doc_id is not None else ", ".join(h.doc_ids[:3]) + ("…" if len(h.doc_ids) > 3 else "")
        w(f" [{i}] {h.kind:7s} {h.score:.3f}  {src}  ({h.id})\n      {_short(h.text, chars)}\n")
    w("\nCost: ")
    tot = (cost or {}).get("total", {})
    if not tot or not (tot.get("calls") or tot.get("cached_calls")):
        w(f"0 LLM calls, {seconds:.2f} s\n")
    else:
        stages = ", ".join(f"{k} {v.get('calls', 0)}" + (f"(+{v['cached_calls']} cached)" if v.get("cached_calls") else "")
                           for k, v in cost.items() if k != "total")
        w(f"{tot.get('calls', 0)} LLM calls ({stages}), {tot.get('prompt_tokens', 0)} prompt + "
          f"{tot.get('completion_tokens', 0)} completion tokens, {tot.get('seconds', 0.0):.2f} s in the LLM, "
          f"{seconds:.2f} s in all\n")


def run(args) -> int:
    from contextrag import ContextRAG, query

    if args.k < 1:
        raise ValueError(f"-k must be >= 1, got {args.k}")
    t0 = time.perf_counter()
    rag = ContextRAG.load(args.index)
    if args.filter is not None:
        from contextrag.query.filters import doc_ids_for, parse_filter
        args.doc_ids = doc_ids_for(rag.index, args.doc_ids, parse_filter(args.filter, "--filter"))
    spec = "none" if args.no_llm else args.llm
    client = None
    note = None
    if spec is None or spec.lower() not in ("none", "off"):
        from contextrag.llm import make_client
        from contextrag.llm.local import LocalLLMUnavailable
        try:
            client = make_client(spec, cache=not args.no_cache)
        except LocalLLMUnavailable as e:
            if spec is not None:          # asked for explicitly: an error
                raise ValueError(str(e)) from None
            note = f"retrieval only: {e}"
    if client is None:
        hits = query.retrieve(rag.index, args.question, k=args.k, doc_ids=args.doc_ids)
        dt = time.perf_counter() - t0
        if args.json:
            print(json.dumps({"question": args.question, "answer": None, "hits": [h.to_dict() for h in hits],
                              "cost": {"total": {"calls": 0}}, "seconds": dt, "note": note}, indent=2))
        else:
            print_result(args.question, hits, seconds=dt, chars=args.chars, note=note)
        return 0
    ans = query.answer(rag.index, args.question, llm=client, k=args.k, doc_ids=args.doc_ids,
                       rewrite=not args.no_rewrite, rerank=not args.no_rerank)
    dt = time.perf_counter() - t0
    if args.json:
        d = ans.to_dict()
        d.update(question=args.question, model=client.model, seconds_total=dt)
        print(json.dumps(d, indent=2))
    else:
        print_result(args.question, ans.hits, answer=ans.text, cost=ans.cost, seconds=dt, chars=args.chars,
                     note=f"model {client.model}; rewrites: {'; '.join(ans.rewrites) or 'none'}; "
                          f"reranked: {'yes' if ans.reranked else 'no (fused order kept)'}")
    return 0
