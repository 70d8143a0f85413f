"""`contextrag mcp DIR`: serve an index's retrieve and answer as MCP tools (extra ``contextrag[mcp]``),
over stdio (the way MCP hosts start local servers) or streamable HTTP on 127.0.0.1."""
from __future__ import annotations

import sys


def add_arguments(p):
    p.add_argument("index", help="index directory (from `contextrag index` or `contextrag demo`)")
    p.add_argument("--llm", default="none", help="LLM for the answer tool: 'local', 'http://host:port/v1#MODEL', "
                   "'vllm:MODEL' or 'none' (the default: an extractive answer, no LLM)")
    p.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio",
                   help="stdio (default) or streamable-http")
    p.add_argument("--port", type=int, default=8000, help="port for streamable-http on 127.0.0.1 (default 8000)")


def run(args) -> int:
    from contextrag import ContextRAG
    from contextrag.server.mcp_tools import create_mcp

    rag = ContextRAG.load(args.index)
    client = None
    if args.llm.strip().lower() not in ("none", "off"):
        from contextrag.llm import make_client
        client = make_client(args.llm)
    server = create_mcp(rag, llm=client)
    print(f"contextrag mcp: serving {args.index} over {args.transport}", file=sys.stderr)
    server.run(args.transport, **({"port": args.port} if args.transport == "streamable-http" else {}))
    return 0
