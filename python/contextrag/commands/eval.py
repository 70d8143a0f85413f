"""`contextrag eval DATA --format F --out DIR`: retrieval (always) and answer (with an LLM) metrics of
BM25, dense, flat hybrid and contextrag variants on a multi-hop QA set, from one cached index."""
from __future__ import annotations

FORMATS = ("hotpotqa", "musique", "multihoprag", "jsonl")


def add_arguments(p):
    p.add_argument("data", help="the QA file (JSON list or JSONL)")
    p.add_argument("--format", required=True, choices=FORMATS,
                   help="hotpotqa (also 2WikiMultiHopQA), musique, multihoprag (needs --corpus), jsonl (needs --corpus)")
    p.add_argument("--out", required=True, help="output directory: report.md, results.json, questions.jsonl, plots")
    p.add_argument("--corpus", help="corpus file for multihoprag/jsonl (default: DATA's name + _corpus beside it)")
    p.add_argument("--limit", type=int, help="first N questions only (hotpotqa/musique: corpus = their paragraphs)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--llm", help="LLM spec for answers: local, local:NAME, http://host:port/v1[#model], vllm:MODEL")
    g.add_argument("--no-llm", action="store_true", help="retrieval metrics only (the default without --llm)")
    p.add_argument("--no-llm-cache", action="store_true",
                   help="do not answer LLM calls from the on-disk cache (measures every call's cost)")
    p.add_argument("--config", help="JSON file of Config fields for contextrag (default: Config())")
    p.add_argument("--systems", help="comma-separated subset of: bm25,dense,hybrid,hybrid_renorm,contextrag,"
                                     "contextrag_no_summaries,contextrag_paper (default: all)")
    p.add_argument("--cache-dir", help="index cache (default: $CONTEXTRAG_EVAL_CACHE or ~/.cache/contextrag/eval-indexes)")
    p.add_argument("--seed", type=int, default=0, help="corpus shuffle seed (default 0)")
    p.add_argument("--rebuild", action="store_true", help="rebuild cached indexes")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args) -> int:
    from contextrag.eval.runner import run as run_eval

    if args.limit is not None and args.limit < 1:
        raise ValueError(f"--limit must be >= 1, got {args.limit}")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()] if args.systems else None
    res = run_eval(args.data, format=args.format, out=args.out, corpus=args.corpus, limit=args.limit,
                   llm=None if args.no_llm else args.llm, config=args.config, systems=systems,
                   cache_dir=args.cache_dir, seed=args.seed, rebuild=args.rebuild, progress=not args.quiet,
                   plots=not args.no_plots, llm_cache=not args.no_llm_cache)
    cols = ("recall@2", "recall@5", "recall@10", "f1", "em", "latency_p50_ms")
    print(f"{'system':<26}" + "".join(f"{c:>16}" for c in cols))
    for name, m in res["systems"].items():
        print(f"{name:<26}" + "".join(f"{m[c]:>16.1f}" if isinstance(m.get(c), (int, float)) else f"{'–':>16}"
                                      for c in cols))
    print(f"report: {args.out}/report.md")
    return 0
