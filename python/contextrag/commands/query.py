"""`contextrag query DIR "question"`: answer a question from an index, with the cited passages and the
cost of the query (LLM calls, tokens, seconds per stage). ``--no-llm`` retrieves only; ``--json`` prints
one JSON object for machines; ``--stream`` prints the answer as it is written.

Answer styles (``--style``, contextrag.query.answer): short, paragraph (cites passages as [n]) and
extractive (the best supporting sentences, no generation). The default is extractive when the only
model is the tiny embedded one (or none is installed), short with any other LLM.

Sources are listed by the score shown, highest first: the hybrid score of eq. 13 for the question
itself (BM25 / its max, cosine, fuzzy routing, spreading, boosts), the same scale whether or not the
query was rewritten or the LLM reranked. ``[n]`` is the passage's number in the answer's context, the
number its citations use; ``*`` marks the passages the answer cites."""
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
    p.add_argument("--style", choices=("short", "paragraph", "extractive"), default=None,
                   help="answer style: short (a few words), paragraph (cites passages as [n]), extractive (the "
                        "best supporting sentences, no generation); default: extractive with the embedded "
                        "model, short with any other LLM")
    p.add_argument("--max-tokens", type=int, default=None, help="answer length cap in tokens (default: the style's: "
                   "short 48, paragraph 256)")
    p.add_argument("--stream", action="store_true", help="print the answer as it is written (with --json: one "
                   "JSON line per delta, then the result on one line: JSON Lines)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--chars", type=int, default=240, help="characters of each passage to print (default 240)")


def _short(text: str, n: int) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[: n - 1] + "…"


def shown_score(h) -> float:
    """The score a source is listed with: the question's own eq. 13 hybrid score (the RRF score of a
    fused list is kept apart in ``parts["rrf"]``, the rerank position in ``parts["rerank_rank"]``)."""
    return float(h.parts.get("hybrid", h.score))


def rewrites_note(calls) -> str:
    """The rewrite calls made, on one line: what each returned and whether it was searched."""
    if not calls:
        return "rewrites: none"
    parts = []
    for c in calls:
        reply = f"“{c['reply']}”" if c.get("reply") else "no usable reply"
        repeat = c.get("reply") and not c.get("used")
        parts.append(f"{c['kind']} {reply}" + (" (a repeat, not searched)" if repeat else ""))
    n = len(calls)
    return f"rewrites ({n} call{'s' if n > 1 else ''}): " + "; ".join(parts)


def print_result(question, hits, *, answer=None, cost=None, seconds=0.0, chars=240, note=None, out=None,
                 citations=(), answer_shown=False):
    w = (out or sys.stdout).write
    if not answer_shown:
        w(f"Q: {question}\n")
        if answer is not None:
            w(f"A: {answer}\n")
    if note:
        w(f"({note})\n")
    w(f"\nSources ({len(hits)}, by score):\n")
    order = sorted(range(len(hits)), key=lambda i: -shown_score(hits[i]))
    for i in order:
        h = hits[i]
        src = h.doc_id if h.doc_id is not None else ", ".join(h.doc_ids[:3]) + ("…" if len(h.doc_ids) > 3 else "")
        mark = "*" if i + 1 in citations else " "
        w(f" [{i + 1}]{mark}{h.kind:7s} {shown_score(h):.3f}  {src}  ({h.id})\n      {_short(h.text, chars)}\n")
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


def answer_note(ans, model: str | None) -> str:
    """The answer's provenance: model, style, the rewrite calls and whether the rerank reordered."""
    if "rerank" in ans.cost:
        rer = "reranked: yes" if ans.reranked else "reranked: no (the reply named no passage; fused order kept)"
    else:
        rer = "no rerank"
    return f"{'model ' + model if model else 'no LLM'}; style {ans.style}; {rewrites_note(ans.rewrite_calls)}; {rer}"


def _stream_answer(stream, question, as_json: bool):
    """Print the deltas of ``stream`` as they come; return the final Answer."""
    if not as_json:
        sys.stdout.write(f"Q: {question}\nA: ")
        sys.stdout.flush()
    for x in stream:
        if isinstance(x, str):
            if as_json:
                print(json.dumps({"delta": x}), flush=True)
            else:
                sys.stdout.write(x)
                sys.stdout.flush()
        else:
            if not as_json:
                sys.stdout.write("\n")
            return x
    raise AssertionError("unreachable")


def run(args) -> int:
    from contextrag.quiet import quiet_loading

    with quiet_loading():      # the embedder and the LLM load on every run: no progress bars
        return _run(args)


def _run(args) -> int:
    from contextrag import ContextRAG, query

    if args.k < 1:
        raise ValueError(f"-k must be >= 1, got {args.k}")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise ValueError(f"--max-tokens must be >= 1, got {args.max_tokens}")
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
            if spec is not None or args.style in ("short", "paragraph"):   # asked for: an error
                raise ValueError(str(e)) from None
            note = f"no LLM installed: {e}"
    if client is None and args.style != "extractive" and (args.no_llm or spec is not None):
        hits = query.retrieve(rag.index, args.question, k=args.k, doc_ids=args.doc_ids)
        dt = time.perf_counter() - t0
        if args.json:
            print(json.dumps({"question": args.question, "answer": None, "hits": [h.to_dict() for h in hits],
                              "cost": {"total": {"calls": 0}}, "seconds": dt, "note": note},
                             indent=None if args.stream else 2))   # --stream --json: JSON Lines
        else:
            print_result(args.question, hits, seconds=dt, chars=args.chars, note=note)
        return 0
    kw = dict(llm=client if client is not None else "none", k=args.k, doc_ids=args.doc_ids,
              rewrite=not args.no_rewrite, rerank=not args.no_rerank, style=args.style,
              max_tokens=args.max_tokens)
    if args.stream:
        ans = _stream_answer(query.answer_stream(rag.index, args.question, **kw), args.question, args.json)
    else:
        ans = query.answer(rag.index, args.question, **kw)
    dt = time.perf_counter() - t0
    model = client.model if client is not None else None
    if args.json:
        d = ans.to_dict()
        d.update(question=args.question, model=model, seconds_total=dt)
        if note:
            d["note"] = note
        print(json.dumps(d, indent=None if args.stream else 2))   # --stream --json: JSON Lines, one per line
    else:
        text = ans.text + ("" if ans.style == "paragraph" or not ans.citations
                           else " " + "".join(f"[{n}]" for n in ans.citations))
        if args.stream and text != ans.text:             # the citation markers follow the streamed text
            print(f"   {text[len(ans.text):].strip()}")
        print_result(args.question, ans.hits, answer=text, cost=ans.cost, seconds=dt, chars=args.chars,
                     note="; ".join(x for x in (answer_note(ans, model), note) if x), citations=ans.citations,
                     answer_shown=args.stream)
    return 0
