"""`contextrag index | query | eval | bench | inspect | demo | serve | mcp`.

Each subcommand lives in contextrag/commands/<name>.py with ``add_arguments(parser)`` and
``run(args) -> int``; its heavy imports happen inside ``run`` so ``contextrag --help`` stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "index": "build an index from a corpus",
    "query": "answer a question from an index",
    "eval": "evaluate retrieval and answers on a QA set",
    "bench": "run the kernel benchmarks",
    "inspect": "show an index's statistics and concept graph",
    "demo": "the main job: index a corpus and answer a question offline",
    "serve": "serve an index over HTTP: JSON API, OpenAI-compatible chat, web page",
    "mcp": "serve an index's retrieve and answer as MCP tools",
}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="contextrag", description="Extraction-free graph RAG.")
    from contextrag import __version__
    p.add_argument("--version", action="version", version=f"contextrag {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_ in COMMANDS.items():
        try:
            mod = importlib.import_module(f"contextrag.commands.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"contextrag.commands.{name}":
                raise
            continue
        sp = sub.add_parser(name, help=help_, description=help_)
        mod.add_arguments(sp)
        sp.set_defaults(_run=mod.run)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"contextrag {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
