"""`contextrag query DIR "question"`: answer a question from an index, with the cited passages and the
cost of the query (LLM calls, tokens, seconds per stage). No LLM is used unless ``--llm`` (or
``CONTEXTRAG_LLM``) names one; ``--json`` prints one JSON object for machines; ``--stream`` prints the
answer as it is written.

Answer styles (``--style``, contextrag.query.answer): short, paragraph (cites passages as [n]),
extractive (the sentences that answer, no generation) and span (the name, date or number that
answers, no generation). The default is extractive with no LLM or only the tiny embedded one, short
with any other LLM: the same choice the server, the MCP tools and the web page make
(contextrag.query.answer_style).

Sources are listed in the order the answer numbers them: ``[n]`` is the passage's number in the
answer's context, the number its citations use; ``*`` marks the passages the answer cites. Beside
each: the rank score (the hybrid score of eq. 13 for the question itself: BM25 / its per-query max,
cosine, fuzzy routing, spreading, boosts) and the absolute relevance in [0, 1]
(contextrag.query.relevance), the two numbers the JSON output, the server and the web page show."""
from __future__ import annotations

import json
import sys
import time

from contextrag.config import DEFAULT_K, check_k


def add_arguments(p):
    p.add_argument("index", help="index directory (from `contextrag index` or `contextrag demo`)")
    p.add_argument("question", help="the question")
    p.add_argument("-k", type=int, default=DEFAULT_K, help=f"passages to retrieve / answer from (default {DEFAULT_K})")
    p.add_argument("--doc", action="append", dest="doc_ids", metavar="DOC_ID",
                   help="only search these documents (repeatable; §4.6 doc_id filter)")
    p.add_argument("--filter", metavar="JSON", help="only documents whose metadata match, e.g. "
                   "'{\"year\": {\"$gte\": 2020}, \"format\": \"pdf\"}' (contextrag.query.filters)")
    p.add_argument("--llm", default=None, help="LLM: 'http://host:port/v1#MODEL', 'vllm:MODEL', 'local' (the "
                   "embedded 135M GGUF, for pipeline tests), or 'none'; default: $CONTEXTRAG_LLM, else none "
                   "(an extractive answer)")
    p.add_argument("--no-llm", action="store_true", help="no LLM: no rewrites or rerank, an extractive answer")
    p.add_argument("--no-rewrite", action="store_true", help="skip the three query rewrites")
    p.add_argument("--no-rerank", action="store_true", help="skip the LLM rerank")
    p.add_argument("--no-cache", action="store_true", help="do not use the on-disk LLM call cache")
    p.add_argument("--style", choices=("short", "paragraph", "extractive", "span"), default=None,
                   help="answer style: short (a few words), paragraph (cites passages as [n]), extractive (the "
                        "sentences that answer, no generation), span (the name, date or number that answers, "
                        "no generation); default: extractive without an LLM or with the embedded one, short "
                        "with any other LLM")
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
    """The rank score a source is listed with: ``Hit.score``, the question's own eq. 13 hybrid score
    (the RRF score of a fused list is kept apart in ``parts["rrf"]``, the rerank position in
    ``parts["rerank_rank"]``), the number the JSON output and the server show."""
    return float(h.score)


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
    w(f"\nSources ({len(hits)}; score = rank score, rel = absolute relevance in [0, 1]):\n")
    for n, h in enumerate(hits, 1):
        src = h.doc_id if h.doc_id is not None else ", ".join(h.doc_ids[:3]) + ("…" if len(h.doc_ids) > 3 else "")
        mark = "*" if n in citations else " "
        rel = "  -  " if h.relevance is None else f"{h.relevance:.3f}"
        w(f" [{n}]{mark}{h.kind:7s} score {shown_score(h):.3f}  rel {rel}  {src}  ({h.id})\n"
          f"      {_short(h.text, chars)}\n")
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

    check_k(args.k, "-k")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise ValueError(f"--max-tokens must be >= 1, got {args.max_tokens}")
    t0 = time.perf_counter()
    rag = ContextRAG.load(args.index)
    if args.filter is not None:
        from contextrag.query.filters import parse_filter
        args.doc_ids = rag.doc_ids_for(args.doc_ids, parse_filter(args.filter, "--filter"))
    spec = "none" if args.no_llm else args.llm
    client = None
    note = None
    if spec is None or spec.lower() not in ("none", "off"):
        from contextrag.llm import make_client
        from contextrag.llm.local import LocalLLMUnavailable
        try:
            client = make_client(spec, cache=not args.no_cache)
        except LocalLLMUnavailable as e:
            raise ValueError(str(e)) from None
    if client is None and args.style in ("short", "paragraph"):
        raise ValueError(f"--style {args.style} needs an LLM (--llm or CONTEXTRAG_LLM); without one the "
                         "styles are extractive and span")
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
        print(_dumps(d, indent=None if args.stream else 2))   # --stream --json: JSON Lines, one per line
    else:
        text = ans.text + ("" if ans.style == "paragraph" or not ans.citations
                           else " " + "".join(f"[{n}]" for n in ans.citations))
        if args.stream and text != ans.text:             # the citation markers follow the streamed text
            print(f"   {text[len(ans.text):].strip()}")
        print_result(args.question, ans.hits, answer=text, cost=ans.cost, seconds=dt, chars=args.chars,
                     note="; ".join(x for x in (answer_note(ans, model), note) if x), citations=ans.citations,
                     answer_shown=args.stream)
    return 0


def _finite(x):
    """``x`` with NaN and ±Infinity as null: JSON has no such numbers (an index written before its
    metadata was checked at the door may still hold them)."""
    import math
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _dumps(obj, **kw) -> str:
    return json.dumps(_finite(obj), allow_nan=False, **kw)
