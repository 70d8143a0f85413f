"""`contextrag serve DIR`: serve an index over HTTP (FastAPI on uvicorn; extra ``contextrag[server]``):
the JSON API, an OpenAI-compatible /v1/chat/completions, the web page at / and OpenAPI docs at /docs.
Binds 127.0.0.1 unless told otherwise; ``--api-key`` (or CONTEXTRAG_API_KEY) requires a bearer key."""
from __future__ import annotations

import os
import sys

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def add_arguments(p):
    p.add_argument("index", help="index directory (from `contextrag index` or `contextrag demo`)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--api-key", default=None,
                   help="require 'Authorization: Bearer KEY' on the API (default: $CONTEXTRAG_API_KEY, else none)")
    p.add_argument("--llm", default=None, help="LLM for answers: 'http://host:port/v1#MODEL', 'vllm:MODEL', "
                   "'local' (the embedded 135M model, for pipeline tests) or 'none'; default: $CONTEXTRAG_LLM, "
                   "else none (extractive answers)")
    p.add_argument("--no-cache", action="store_true", help="do not use the on-disk LLM call cache")
    p.add_argument("--max-body-mb", type=float, default=8.0, help="largest request body in MiB (default 8)")
    p.add_argument("--log-level", default="info", help="uvicorn log level (default info)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="accept requests whose Host is NAME (repeatable; '*' any): besides the loopback names "
                        "only these are served, against DNS rebinding (a --host address is added itself)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="close a connection whose request head is not complete within this many seconds (default 10)")


def make_app(args):
    """The app for parsed arguments (separate from run() so it can be tested without a server)."""
    from contextrag import ContextRAG
    from contextrag.server import create_app

    if not 1 <= args.port <= 65535:
        raise ValueError(f"--port must be in [1, 65535], got {args.port}")
    if not args.max_body_mb > 0:
        raise ValueError(f"--max-body-mb must be > 0, got {args.max_body_mb}")
    key = args.api_key if args.api_key is not None else (os.environ.get("CONTEXTRAG_API_KEY") or None)
    rag = ContextRAG.load(args.index)
    client = None
    spec = args.llm
    if spec is None or spec.strip().lower() not in ("none", "off"):
        from contextrag.llm import make_client
        from contextrag.llm.local import LocalLLMUnavailable
        try:
            client = make_client(spec, cache=not args.no_cache)
        except LocalLLMUnavailable as e:
            if spec is not None:
                raise ValueError(str(e)) from None
            print(f"contextrag serve: retrieval only ({e})", file=sys.stderr)
    if args.host not in LOOPBACK and key is None:
        print(f"contextrag serve: warning: listening on {args.host} without an API key", file=sys.stderr)
    hosts = list(getattr(args, "allow_host", None) or [])
    if args.host not in LOOPBACK and args.host not in ("0.0.0.0", "::"):
        hosts.append(args.host)
    return create_app(rag, llm=client, api_key=key, max_body_bytes=int(args.max_body_mb * (1 << 20)),
                      allowed_hosts=hosts)


def run(args) -> int:
    try:
        import uvicorn
    except ImportError:
        raise ValueError("contextrag serve needs the server extra: pip install 'contextrag[server]'") from None
    from contextrag.server.limits import header_deadline_protocol
    if not args.header_timeout > 0:
        raise ValueError(f"--header-timeout must be > 0 seconds, got {args.header_timeout}")
    app = make_app(args)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level,
                http=header_deadline_protocol(args.header_timeout), timeout_keep_alive=5)
    return 0
