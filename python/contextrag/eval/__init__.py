"""contextrag.eval: datasets, metrics, systems, diagnostics and reports for multi-hop QA.

``contextrag.eval.run(data, format=..., out=..., limit=None, llm=None, config=None)`` evaluates BM25,
dense, flat hybrid and contextrag variants from one cached index and writes ``out/report.md``,
``out/results.json``, ``out/questions.jsonl`` and plots. See docs/EVAL.md.
"""
from __future__ import annotations

from .datasets import FORMATS, Doc, QASet, Question, load
from .metrics import exact_match, normalize_answer, recall_at_k, token_f1

__all__ = ["run", "load", "FORMATS", "QASet", "Question", "Doc", "exact_match", "token_f1", "normalize_answer",
           "recall_at_k"]


def run(data, format: str = "hotpotqa", out="eval-out", limit=None, llm=None, config=None, **kwargs) -> dict:
    """Evaluate on a QA set; see :func:`contextrag.eval.runner.run` for every option."""
    from .runner import run as _run
    return _run(data, format=format, out=out, limit=limit, llm=llm, config=config, **kwargs)
